"""The FLOPs of what the problem computes, as PyTorch counts them (FlopCounterMode, else torch.profiler), or None."""

import torch

from .module_call import as_outputs


def autograd_step(model, inputs, grad_indices, weight_keys):
    """The forward with its backward, as flops are counted: each differentiable output's gradient ones, the
    gradients of inputs[grad_indices] and of the parameters named weight_keys."""
    leaves = [x.detach().requires_grad_(True) if i in grad_indices else x for i, x in enumerate(inputs)]
    own = dict(model.named_parameters())
    with torch.enable_grad():
        outs = [o for o in as_outputs(model(*leaves)) if o.requires_grad]
        targets = [leaves[i] for i in grad_indices] + [own[k] for k in weight_keys]
        if outs and targets:
            torch.autograd.grad(outs, targets, [torch.ones_like(o) for o in outs], allow_unused=True)


# What torch.profiler's flop count (with_flops, before PyTorch 2.1) covers, as FlopCounterMode counts them:
# the matrix products and 2-d convolutions; and the heavy operators it gives no count for, whose presence
# makes its total an undercount, so none is given.
PROFILED_FLOPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::conv2d"}
UNPROFILED_HEAVY = ("aten::conv1d", "aten::conv3d", "aten::conv_transpose", "aten::einsum", "aten::lstm", "aten::gru",
                    "aten::rnn_", "aten::_scaled_dot_product", "aten::scaled_dot_product", "aten::bilinear",
                    "aten::_convolution_mode", "aten::tensordot")


def profiled_flops(model, run):
    """torch.profiler's count of what run() computes, where this PyTorch has no FlopCounterMode (1.13, CI's):
    products and 2-d convolutions only (on meta tensors too; a backward's products as well), else None. A
    module with a layer it gives no count for is not profiled at all: the count would be refused anyway, and
    profiling a recurrent layer's steps took a GRU's derivation from 1 s to 96 s."""
    nn = torch.nn
    if any(isinstance(m, (nn.RNNBase, nn.Conv1d, nn.Conv3d, nn.modules.conv._ConvTransposeNd, nn.MultiheadAttention,
                          nn.Bilinear)) for m in model.modules()):
        return None
    try:
        from torch.profiler import profile
        with profile(with_flops=True) as prof:
            run()
        events = prof.key_averages()
    except Exception:
        return None
    if any(e.key.startswith(UNPROFILED_HEAVY) for e in events):
        return None
    return int(sum(e.flops for e in events if e.key in PROFILED_FLOPS and e.flops))


def counted_flops(model, run):
    """PyTorch's count of the FLOPs run() computes where it has a counter (torch.utils.flop_counter, PyTorch
    2.1 and later; it works on meta tensors), else torch.profiler's (profiled_flops), else None."""
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return profiled_flops(model, run)
    try:
        counter = FlopCounterMode(display=False)
        with counter:
            run()
        return int(counter.get_total_flops())
    except Exception:
        return None


def total_flops(model, inputs, step=None):
    """The FLOPs of what the problem computes: the forward; or, with `step` (the inputs' and weights'
    gradients asked: (grad_indices, weight_keys)), the forward and its backward less the forward alone
    unless `step` asks for the forward too."""
    def forward():
        with torch.no_grad():
            model(*inputs)
    forward_flops = counted_flops(model, forward)
    if step is None or forward_flops is None:
        return forward_flops
    grad_indices, weight_keys, with_forward = step
    both = counted_flops(model, lambda: autograd_step(model, inputs, grad_indices, weight_keys))
    if both is None:
        return None
    return both if with_forward else max(both - forward_flops, 0)
