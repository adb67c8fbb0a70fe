"""A stored program as a Python object over the C API: its signature, and calls on raw addresses."""
import ctypes
import json
import struct
import threading
from dataclasses import dataclass, field

from . import _capi

_lib = None
_lib_path = None
_lib_lock = threading.Lock()


def _library():
    global _lib, _lib_path
    with _lib_lock:
        if _lib is None:
            _lib, _lib_path = _capi.load_library()
    return _lib


def library_path():
    """The libkernelevolve this package calls."""
    _library()
    return _lib_path


class Error(RuntimeError):
    """A C API call failed; `status` is its ke_status name ("invalid argument", ...)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _check(status, function):
    if status != 0:
        message = _library().ke_last_error()
        raise Error(_capi.STATUS_NAMES.get(status, str(status)), message.decode() if message else function)


@dataclass
class Param:
    name: str
    dtype: str  # "f32", "i64", ... as a spec writes it
    role: str  # "in", "out", "inout", "size", "scalar"
    shape: list = field(default_factory=list)  # a buffer's dimensions: literals, size names or expressions
    value: float = 0.0  # a scalar's value, as verified

    @property
    def is_buffer(self):
        return self.role in ("in", "out", "inout")


# A size's or scalar's value as its dtype's C type; f16 and bf16 as their bits.
_C_TYPES = {"f32": ctypes.c_float, "f64": ctypes.c_double, "i64": ctypes.c_int64, "i32": ctypes.c_int32,
            "i8": ctypes.c_int8, "u8": ctypes.c_uint8, "f16": ctypes.c_uint16, "bf16": ctypes.c_uint16}


# Each integer dtype's range: a Python int outside it is refused, never passed on wrapped (ctypes would keep its
# low bits: 2**70 as 0).
_INT_RANGES = {"i64": (-2**63, 2**63 - 1), "i32": (-2**31, 2**31 - 1), "i8": (-2**7, 2**7 - 1), "u8": (0, 2**8 - 1)}


def out_of_range(param, value):
    """Why `value` cannot be passed as `param` without changing it (an int past its dtype's range, an address
    that is none), or None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None  # ctypes refuses what is no number itself
    if param.is_buffer:
        if not 0 <= value < 2**64:
            return f"'{param.name}' is at {value}, which is no address"
        return None
    bounds = _INT_RANGES.get(param.dtype)
    if bounds and not bounds[0] <= value <= bounds[1]:
        return f"'{param.name}' is {value}, which does not fit {param.dtype} ({bounds[0]} to {bounds[1]})"
    return None


def _half_bits(dtype, x):
    if dtype == "f16":
        return struct.unpack("<H", struct.pack("<e", x))[0]
    return struct.unpack("<I", struct.pack("<f", x))[0] >> 16  # bf16: the top half of the float's bits


class Program:
    """A verified node of a run database (the latest run's best by default), compiled for a device of the class
    it was verified on (`device`: "cpu", "cuda:0", ...; None: the kind it was verified on, device 0).

    `params` is the signature, in the order `call` takes its arguments."""

    def __init__(self, database, run=None, node=None, device=None):
        lib = _library()
        options = _capi.ProgramOptions(_capi.PROGRAM_OPTIONS_VERSION, int(run or 0),
                                       -1 if node is None else int(node),
                                       device.encode() if device else None)
        handle = ctypes.c_void_p()
        _check(lib.ke_program_load(ctypes.byref(handle), str(database).encode(), ctypes.byref(options)),
               "ke_program_load")
        self._handle = handle
        self._lib = lib
        self._lock = threading.Lock()
        text = ctypes.c_char_p()
        _check(lib.ke_program_spec_json(ctypes.byref(text), handle), "ke_program_spec_json")
        self.spec = json.loads(text.value.decode())
        _check(lib.ke_program_provenance_json(ctypes.byref(text), handle), "ke_program_provenance_json")
        self.provenance = json.loads(text.value.decode())
        self.device_kind = self.provenance["device_class"].split(" ", 1)[0]
        self.device = device or self.device_kind
        by_name = {p["name"]: p for p in self.spec["params"]}
        count = ctypes.c_size_t()
        _check(lib.ke_program_param_count(ctypes.byref(count), handle), "ke_program_param_count")
        self.params = []
        for i in range(count.value):
            name, dtype, role = ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_char_p()
            _check(lib.ke_program_param(ctypes.byref(name), ctypes.byref(dtype), ctypes.byref(role), handle, i),
                   "ke_program_param")
            entry = by_name.get(name.value.decode(), {})
            self.params.append(Param(name.value.decode(), dtype.value.decode(), role.value.decode(),
                                     list(entry.get("shape", [])), float(entry.get("value", 0.0))))
        self.sizes = [p.name for p in self.params if p.role == "size"]
        self.workloads = [dict(w) for w in self.spec.get("workloads", [])]
        tolerance = self.spec.get("tolerance", {})
        self.atol = float(tolerance.get("atol", 1e-5))
        self.rtol = float(tolerance.get("rtol", 1e-4))
        # The argument block: one value per param at a fixed address, refilled by each call.
        self._values = [ctypes.c_void_p() if p.is_buffer else _C_TYPES[p.dtype]() for p in self.params]
        self._slots = (ctypes.c_void_p * len(self.params))(*[ctypes.addressof(v) for v in self._values])
        self._halves = any(p.dtype in ("f16", "bf16") and not p.is_buffer for p in self.params)
        self.has_half_scalars = self._halves
        self._count = len(self._values)
        self._call = lib.ke_program_call

    def close(self):
        if getattr(self, "_handle", None):
            self._lib.ke_program_destroy(self._handle)
            self._handle = None

    def __del__(self):
        self.close()

    def __repr__(self):
        p = self.provenance
        return (f"<kernelevolve.Program {p['problem']}: {p['database']}, run {p['run']}, node {p['node']}, "
                f"{p['speedup']:.3g}x, on {self.device}>")

    def shape(self, index, sizes):
        """The shape of buffer param `index` when the sizes take `sizes` (a dict naming every size param)."""
        values = (ctypes.c_int64 * max(1, len(self.sizes)))(*[int(sizes[n]) for n in self.sizes])
        dims = (ctypes.c_int64 * 16)()
        ndim = ctypes.c_size_t()
        _check(self._lib.ke_program_shape(dims, 16, ctypes.byref(ndim), self._handle, index, values, len(self.sizes)),
               "ke_program_shape")
        return [dims[d] for d in range(ndim.value)]

    def _fill(self, args):
        if len(args) != len(self.params):
            raise Error("invalid argument", f"{len(args)} arguments, but the program takes {len(self.params)}: "
                        + ", ".join(p.name for p in self.params))
        for param, arg in zip(self.params, args):
            why = out_of_range(param, arg)
            if why:
                raise Error("invalid argument", why)
        if self._halves:
            for value, param, arg in zip(self._values, self.params, args):
                value.value = _half_bits(param.dtype, float(arg)) if param.dtype in ("f16", "bf16") else arg
        else:
            for value, arg in zip(self._values, args):
                value.value = arg

    def value_slot(self, index):
        """The ctypes value param `index` is passed from (a buffer's address, a size's or scalar's value), for a
        caller that writes it in place under `_lock` and then calls `launch` (kernelevolve.torch's fast path)."""
        return self._values[index]

    def launch(self, stream, flags):
        """ke_program_call on the argument block as it is written: the caller holds `_lock` and has written every
        value_slot (call() does so from a list; kernelevolve.torch writes them in place)."""
        status = self._call(self._handle, self._slots, self._count, stream, flags)
        if status:
            _check(status, "ke_program_call")

    def verified(self, args):
        """Whether `args` (as `call` takes them) hold sizes and scalars the program was verified on."""
        out = ctypes.c_int()
        with self._lock:
            self._fill(args)
            _check(self._lib.ke_program_verified(ctypes.byref(out), self._handle, self._slots, len(self.params)),
                   "ke_program_verified")
        return bool(out.value)

    def call(self, args, stream=None, any_shape=False, wait=False):
        """Runs the program: `args` in param order, a buffer as its data's address (an int), a size or scalar as
        its value. On a GPU it is queued on `stream` (a CUstream as an int; None: the default stream) and not
        waited for, unless `wait`; on the CPU it runs now. Error("invalid argument") on sizes it was not verified
        on, unless `any_shape`; and always on an address of 0 (a buffer with elements at these sizes), a negative
        size, or an int that does not fit its param's dtype, naming the param."""
        flags = (_capi.ANY_SHAPE if any_shape else 0) | (_capi.WAIT if wait else 0)
        with self._lock:
            self._fill(args)
            self.launch(stream, flags)

    @property
    def calls(self):
        """How many calls ran or queued the program (the C library's count)."""
        out = ctypes.c_int64()
        _check(self._lib.ke_program_calls(ctypes.byref(out), self._handle), "ke_program_calls")
        return out.value
