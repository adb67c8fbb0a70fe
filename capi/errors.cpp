// The C API: the calling thread's last error, the names of statuses, the version. Every entry point of
// capi/ runs its body inside guard() (internal.hpp), which records a failure (internal.cpp) that
// ke_last_error reads back; nothing throws past it.
#include "internal.hpp"

#include <string>

using namespace capi;

static_assert(KE_VERSION_MAJOR == KE_PROJECT_VERSION_MAJOR && KE_VERSION_MINOR == KE_PROJECT_VERSION_MINOR &&
                  KE_VERSION_PATCH == KE_PROJECT_VERSION_PATCH,
              "kernelevolve.h's KE_VERSION_* must match the project's version in CMakeLists.txt");

// ---------------------------------------------------------------------------------------------------
// Status, errors, version. The definitions take their C linkage from the declarations in the header.

KE_API const char* ke_last_error(void) { return last_error(); }

KE_API ke_status ke_status_name(const char** out, ke_status status) {
  return guard(__func__, [&] {
    need_out(out, "out");
    const char* name = nullptr;
    switch (status) {
      case KE_OK: name = "ok"; break;
      case KE_ERROR_INVALID_ARGUMENT: name = "invalid_argument"; break;
      case KE_ERROR_BAD_SPEC: name = "bad_spec"; break;
      case KE_ERROR_DEVICE_UNAVAILABLE: name = "device_unavailable"; break;
      case KE_ERROR_NOT_FOUND: name = "not_found"; break;
      case KE_ERROR_ABORTED: name = "aborted"; break;
      case KE_ERROR_OUT_OF_MEMORY: name = "out_of_memory"; break;
      case KE_ERROR_INTERNAL: name = "internal"; break;
      case KE_STATUS_MAX_ENUM: break;
    }
    if (!name) fail(KE_ERROR_INVALID_ARGUMENT, "'status' is not a ke_status (" + std::to_string(status) + ")");
    *out = name;
  });
}

KE_API ke_status ke_version(int* major, int* minor, int* patch) {
  return guard(__func__, [&] {
    if (major) *major = KE_VERSION_MAJOR;
    if (minor) *minor = KE_VERSION_MINOR;
    if (patch) *patch = KE_VERSION_PATCH;
  });
}
