// The C API header compiled as C++ (with -Wall -Wextra -pedantic -Werror): the C test, unchanged.
#include "test_capi_header.c"
