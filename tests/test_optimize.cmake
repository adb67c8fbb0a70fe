# `kernelevolve optimize` (issue 30) through the command-line tool on small models of ours
# (tests/python/test_optimize.py, fixtures in tests/fixtures/optimize). It needs a Python that imports torch, as the
# optimizer finds one; without, it is skipped and says so. The tool runs the Python (never the reverse), so an
# instrumented build is tested like any other, but for what needs the library loaded into Python (putting kernels
# back): the test reads whether the build beside the CLI is sanitized (KE_SANITIZE in its CMakeCache.txt).
#   cmake -DCLI=... -DSOURCE_DIR=... -DWORK_DIR=... -P test_optimize.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
include(${CMAKE_CURRENT_LIST_DIR}/find_torch_python.cmake)
if(NOT python)
  message(STATUS "SKIPPED: the optimizer's tests (no Python here imports torch)")
  return()
endif()
get_filename_component(build_dir ${CLI} DIRECTORY)
set(sanitize OFF)
if(EXISTS ${build_dir}/CMakeCache.txt)
  file(STRINGS ${build_dir}/CMakeCache.txt line REGEX "^KE_SANITIZE:[A-Z]+=")
  if(line MATCHES "=(ON|1|TRUE|YES)$")
    set(sanitize ON)
  endif()
endif()
set(ENV{KE_CLI} ${CLI})
set(ENV{KE_WORK} ${WORK_DIR})
set(ENV{KE_SANITIZE} ${sanitize})
execute_process(COMMAND ${python} ${SOURCE_DIR}/tests/python/test_optimize.py RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the optimizer's tests failed (${rc})")
endif()
