"""A CUDA kernel launched from Python with nothing between: NVRTC compiles it, the Driver API loads it, and each
launch is one cuLaunchKernel through ctypes on PyTorch's current stream. The baseline the operator's cost per call
is measured against (operator_overhead.py): what a hand-written launch of the same kernel costs."""
import ctypes

import torch


def _load(names):
    errors = []
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
    raise OSError("; ".join(errors))


class RawKernel:
    def __init__(self, source, entry, defines=()):
        torch.cuda.init()
        self.cuda = _load(["libcuda.so.1", "libcuda.so"])
        nvrtc = _load(["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"])
        major, minor = torch.cuda.get_device_capability()
        program = ctypes.c_void_p()
        self._check_nvrtc(nvrtc, nvrtc.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"raw.cu", 0, None,
                                                          None), "nvrtcCreateProgram")
        options = [f"--gpu-architecture=sm_{major}{minor}".encode()] + [f"-D{d}".encode() for d in defines]
        status = nvrtc.nvrtcCompileProgram(program, len(options), (ctypes.c_char_p * len(options))(*options))
        if status:
            size = ctypes.c_size_t()
            nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            nvrtc.nvrtcGetProgramLog(program, log)
            raise RuntimeError("NVRTC: " + log.value.decode())
        size = ctypes.c_size_t()
        self._check_nvrtc(nvrtc, nvrtc.nvrtcGetCUBINSize(program, ctypes.byref(size)), "nvrtcGetCUBINSize")
        self.image = ctypes.create_string_buffer(size.value)
        self._check_nvrtc(nvrtc, nvrtc.nvrtcGetCUBIN(program, self.image), "nvrtcGetCUBIN")
        nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
        # PyTorch's context is the device's primary one: made current on this thread, the module loads into it.
        context = ctypes.c_void_p()
        self._check(self.cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), torch.cuda.current_device()),
                    "cuDevicePrimaryCtxRetain")
        self._check(self.cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
        self.module = ctypes.c_void_p()
        self._check(self.cuda.cuModuleLoadData(ctypes.byref(self.module), self.image), "cuModuleLoadData")
        self.function = ctypes.c_void_p()
        self._check(self.cuda.cuModuleGetFunction(ctypes.byref(self.function), self.module, entry.encode()),
                    "cuModuleGetFunction")
        launch = self.cuda.cuLaunchKernel
        launch.restype = ctypes.c_int
        launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p, ctypes.c_void_p,
                                                                      ctypes.c_void_p]
        self._launch = launch

    @staticmethod
    def _check(status, call):
        if status:
            raise RuntimeError(f"{call} failed: CUresult {status}")

    @staticmethod
    def _check_nvrtc(nvrtc, status, call):
        if status:
            raise RuntimeError(f"{call} failed: nvrtcResult {status}")

    def arguments(self, values):
        """An argument block of ctypes values (c_void_p for pointers, c_longlong, ...), refilled by the caller and
        passed to launch()."""
        return (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])

    def launch(self, grid, block, block_args, stream):
        status = self._launch(self.function, grid, 1, 1, block, 1, 1, 0, stream, block_args, None)
        if status:
            self._check(status, "cuLaunchKernel")
