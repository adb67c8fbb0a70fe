"""Deriving on PyTorch's meta device: factories made there, the forward's intermediate shapes recorded, and the meta
kernels torch 1.13 lacks."""

import torch


# Deriving the signature. Factory functions (torch.randn in get_inputs(), a layer's weights) make their
# tensors on the device a derivation runs on: PyTorch's meta device where the module allows, so nothing is
# allocated and a 16 GB problem derives in a second. `with torch.device(...)` is PyTorch 2's; this mode
# (after PyTorch 2's torch/utils/_device.py) works on torch 1.13 too.
FACTORY_NAMES = ("empty", "empty_strided", "zeros", "ones", "full", "rand", "randn", "randint", "randperm", "arange",
                 "range", "linspace", "logspace", "eye", "tensor", "as_tensor", "asarray", "scalar_tensor", "normal",
                 "bartlett_window", "blackman_window", "hamming_window", "hann_window", "kaiser_window",
                 "tril_indices", "triu_indices")
FACTORIES = {f for f in (getattr(torch, n, None) for n in FACTORY_NAMES) if f is not None}


def meta_kernels():
    """Meta kernels that torch 1.13 lacks, for the operators KernelBench uses: max_pool3d (PyTorch 2 has it).
    Registered once, only where missing, so a module that uses it derives on meta too."""
    global META_LIBRARY
    if META_LIBRARY is not None:
        return
    META_LIBRARY = False
    try:
        torch.nn.functional.max_pool3d(torch.empty(1, 1, 1, 1, 1, device="meta"), 1)
        return
    except Exception:
        pass

    def triple(v):
        if isinstance(v, (list, tuple)):
            return tuple(v) * 3 if len(v) == 1 else tuple(v) if len(v) == 3 else None
        return (v, v, v)

    def max_pool3d_with_indices(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
        k, p, d = triple(kernel_size), triple(padding), triple(dilation)
        s = triple(stride) or k
        out = []
        for i in range(3):
            n = x.shape[-3 + i]
            span = n + 2 * p[i] - d[i] * (k[i] - 1) - 1
            o = (-(-span // s[i]) if ceil_mode else span // s[i]) + 1
            if ceil_mode and (o - 1) * s[i] >= n + p[i]:
                o -= 1
            out.append(o)
        shape = tuple(x.shape[:-3]) + tuple(out)
        return x.new_empty(shape), x.new_empty(shape, dtype=torch.int64)

    try:
        META_LIBRARY = torch.library.Library("aten", "IMPL", "Meta")
        META_LIBRARY.impl("max_pool3d_with_indices", max_pool3d_with_indices)
    except Exception:
        META_LIBRARY = False


META_LIBRARY = None


class OnDevice(torch.overrides.TorchFunctionMode):
    """Factories without a device make their tensors on `device`; while `shapes` is a list, the shape of
    every tensor a call returns is recorded (a forward's intermediates, from which a dimension that follows a
    computation of the sizes is found step by step)."""

    def __init__(self, device):
        super().__init__()
        self.device = torch.device(device)
        self.shapes = None
        self.small_real = False  # small tensors on the CPU instead of meta: see Sample

    SMALL = 1 << 16

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            factory = func in FACTORIES
        except TypeError:
            factory = False
        if factory and kwargs.get("device") is None and not any(isinstance(a, torch.Tensor) for a in args):
            kwargs = dict(kwargs, device=self.device)
        result = func(*args, **kwargs)
        if factory and self.small_real and isinstance(result, torch.Tensor) and result.is_meta and \
                result.numel() <= self.SMALL:
            result = func(*args, **dict(kwargs, device="cpu"))
        if self.shapes is not None and len(self.shapes) < 4096:
            for t in (result if isinstance(result, (tuple, list)) else (result,)):
                if isinstance(t, torch.Tensor):
                    self.shapes.append(tuple(t.shape))
        return result
