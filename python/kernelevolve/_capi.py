"""The C API's functions as ctypes sees them (capi/kernelevolve.h, section Program)."""
import ctypes
import os

c_status = ctypes.c_int
c_program_p = ctypes.c_void_p


class ProgramOptions(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("run", ctypes.c_int64), ("node", ctypes.c_int64),
                ("device", ctypes.c_char_p)]


PROGRAM_OPTIONS_VERSION = 1
ANY_SHAPE = 1
WAIT = 2

# Status codes (ke_status).
STATUS_NAMES = {0: "ok", 1: "invalid argument", 2: "bad spec", 3: "device unavailable", 4: "not found",
                5: "aborted", 6: "out of memory", 7: "internal"}


def _candidates():
    """Where libkernelevolve may be: $KE_LIBRARY, the path this package was built or installed with, then the
    loader's own search (LD_LIBRARY_PATH, the system's directories)."""
    env = os.environ.get("KE_LIBRARY")
    if env:
        return [env]
    out = []
    try:
        from . import _library  # written by the build (build/python) and by `cmake --install`
        out.append(_library.path)
    except ImportError:
        pass
    out.append("libkernelevolve.so.0")
    return out


def load_library():
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        _declare(lib)
        return lib, path
    raise OSError("kernelevolve: cannot load libkernelevolve (set KE_LIBRARY to its path): " + "; ".join(errors))


def _declare(lib):
    P = ctypes.POINTER
    sig = {
        "ke_last_error": (ctypes.c_char_p, []),
        "ke_program_load": (c_status, [P(c_program_p), ctypes.c_char_p, P(ProgramOptions)]),
        "ke_program_destroy": (c_status, [c_program_p]),
        "ke_program_param_count": (c_status, [P(ctypes.c_size_t), c_program_p]),
        "ke_program_param": (c_status, [P(ctypes.c_char_p), P(ctypes.c_char_p), P(ctypes.c_char_p), c_program_p,
                                        ctypes.c_size_t]),
        "ke_program_shape": (c_status, [P(ctypes.c_int64), ctypes.c_size_t, P(ctypes.c_size_t), c_program_p,
                                        ctypes.c_size_t, P(ctypes.c_int64), ctypes.c_size_t]),
        "ke_program_call": (c_status, [c_program_p, P(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_void_p,
                                       ctypes.c_uint]),
        "ke_program_verified": (c_status, [P(ctypes.c_int), c_program_p, P(ctypes.c_void_p), ctypes.c_size_t]),
        "ke_program_calls": (c_status, [P(ctypes.c_int64), c_program_p]),
        "ke_program_provenance_json": (c_status, [P(ctypes.c_char_p), c_program_p]),
        "ke_program_spec_json": (c_status, [P(ctypes.c_char_p), c_program_p]),
    }
    for name, (restype, argtypes) in sig.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
