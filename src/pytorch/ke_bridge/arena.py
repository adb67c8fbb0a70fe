"""The memory KernelEvolve shares with this process: a memfd on the CPU, a CUDA IPC allocation on a GPU."""

import ctypes
import math
import mmap

import torch

from .dtypes import TORCH_DTYPES
from .errors import Unmappable


class Arena:
    """The memory KernelEvolve shares with this process: a memfd on the CPU; on a GPU, device memory the
    worker allocated and exported with cuIpcGetMemHandle, opened here, so no trial's tensors cross the bus.
    A bridge that the workers of a GPU share allocates it itself (--arena-alloc), and they open it: it
    outlives any one of them."""

    def __init__(self, args):
        self.device = torch.device(args.device)
        self.views = {}
        self.ipc_handle = ""  # what the workers open the arena by, where this process allocated it
        size = args.arena_bytes
        if self.device.type == "cpu":
            self.map = mmap.mmap(args.arena_fd, size)
            self.base = torch.frombuffer(self.map, dtype=torch.uint8) if size > 0 else torch.empty(0, dtype=torch.uint8)
        elif self.device.type == "cuda" and args.arena_alloc:
            self.base, self.ipc_handle = allocate_ipc(self.device, size)
        elif self.device.type == "cuda":
            self.base = open_ipc(self.device, args.arena_ipc, size)
        else:
            raise Unmappable(f"no arena on a {self.device.type} device")

    def release(self, offset):
        """Gives the memfd's pages from `offset` on back to the system (the worker, confined, cannot): what
        only a baseline's second block used. Later reads see zeros; the mapping stays."""
        if self.device.type != "cpu" or not hasattr(self.map, "madvise") or not hasattr(mmap, "MADV_REMOVE"):
            return
        start = -(-int(offset) // mmap.PAGESIZE) * mmap.PAGESIZE
        if start < len(self.map):
            self.map.madvise(mmap.MADV_REMOVE, start, len(self.map) - start)

    def view(self, spec):
        # The same few views come back in every request: made once (a reference trial's host cost is
        # mostly this process's own overhead).
        key = (spec[0], spec[1], tuple(spec[2]))
        view = self.views.get(key)
        if view is None:
            offset, dtype, shape = key
            dt = TORCH_DTYPES[dtype]
            count = math.prod(shape) if shape else 1
            nbytes = count * torch.empty(0, dtype=dt).element_size()
            view = self.base[offset:offset + nbytes].view(dt).view(shape)
            if len(self.views) > 4096:
                self.views.clear()
            self.views[key] = view
        return view


class IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def cuda_driver(device):
    """libcuda, with `device`'s primary context (the one PyTorch uses) created and current."""
    torch.cuda.set_device(device)
    torch.empty(1, device=device)
    return ctypes.CDLL("libcuda.so.1")


def as_tensor(device, pointer, size):
    """`size` bytes of device memory at `pointer` as a uint8 tensor, without a copy (__cuda_array_interface__)."""
    class Shared:
        __cuda_array_interface__ = {"shape": (size,), "typestr": "|u1", "data": (pointer, False),
                                    "version": 2, "strides": None}

    holder = Shared()
    tensor = torch.as_tensor(holder, device=device)
    tensor._kernelevolve_holder = holder
    return tensor


def open_ipc(device, handle_hex, size):
    """The worker's allocation, as a uint8 tensor on `device`: cuIpcOpenMemHandle in the primary context."""
    lib = cuda_driver(device)
    opener = getattr(lib, "cuIpcOpenMemHandle_v2", None) or lib.cuIpcOpenMemHandle
    opener.argtypes = [ctypes.POINTER(ctypes.c_uint64), IpcHandle, ctypes.c_uint]
    handle = IpcHandle.from_buffer_copy(bytes.fromhex(handle_hex))
    pointer = ctypes.c_uint64(0)
    status = opener(ctypes.byref(pointer), handle, 1)  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
    if status != 0:
        raise Unmappable(f"cuIpcOpenMemHandle failed with CUresult {status}")
    return as_tensor(device, pointer.value, size)


def allocate_ipc(device, size):
    """`size` bytes of `device` for the workers to open: cuMemAlloc, not PyTorch's caching allocator (whose
    blocks may share an allocation with other tensors, and which empty_cache() would give back), exported
    with cuIpcGetMemHandle. Returns the tensor and the handle in hex. Freed when this process ends."""
    lib = cuda_driver(device)
    alloc = getattr(lib, "cuMemAlloc_v2", None) or lib.cuMemAlloc
    alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    pointer = ctypes.c_uint64(0)
    status = alloc(ctypes.byref(pointer), max(int(size), 1))
    if status != 0:
        raise Unmappable(f"cuMemAlloc of the arena ({size} bytes) failed with CUresult {status}")
    lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(IpcHandle), ctypes.c_uint64]
    handle = IpcHandle()
    status = lib.cuIpcGetMemHandle(ctypes.byref(handle), pointer)
    if status != 0:
        raise Unmappable(f"cuIpcGetMemHandle failed with CUresult {status}")
    return as_tensor(device, pointer.value, size), bytes(handle).hex()
