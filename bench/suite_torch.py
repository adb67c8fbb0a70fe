#!/usr/bin/env python3
"""PyTorch's time for every CUDA problem of the suite, for bench/suite.sh's "vs PyTorch" column.

  suite_torch.py SPEC... --out torch.json

For each spec (a problems/**/cuda.json), the eager PyTorch code a user would write for the same operator
(or fused chain: one call per operation, as PyTorch runs it) is timed on each workload. The problems of
bench/gpu_baselines.py (the CUDA engineer's: matmul, softmax, layernorm, row_sum, scale_bias_gelu) are
timed by its own code, and so is everything else: CUDA events around one call, the L2 cache flushed before
each, the median of many calls, TF32 off (the kernels compute in true fp32). The output has the shape of
gpu_baselines.py's: {"device", "torch", "copy_gbps", "problems": {spec name: [{"workload", "time_us"}]}}.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_baselines  # noqa: E402  the CUDA engineer's baselines and timer, reused where they apply
from gpu_baselines import scalar  # noqa: E402

# The CUDA engineer's problems, which gpu_baselines.torch_op knows by these exact names.
THEIRS = {"matmul_cuda", "softmax_cuda", "layernorm_cuda", "row_sum_cuda", "scale_bias_gelu_cuda"}


def torch_op(spec, w, torch):
    """A zero-argument callable running PyTorch's version of the spec's kernel on workload w."""
    name = spec["name"]
    if name in THEIRS:
        return gpu_baselines.torch_op(spec, w, torch)
    F = torch.nn.functional
    g = torch.Generator(device="cuda")
    g.manual_seed(1)

    def randn(*shape):
        return torch.randn(*shape, device="cuda", generator=g)

    base = name[:-len("_cuda")] if name.endswith("_cuda") else name
    if base == "matmul_rect":
        A, B = randn(w["M"], w["K"]), randn(w["N"], w["K"])
        return lambda: F.linear(A, B)
    if base == "bmm":
        A, B = randn(w["BATCH"], w["M"], w["K"]), randn(w["BATCH"], w["K"], w["N"])
        return lambda: torch.bmm(A, B)
    if base == "matvec":
        A, x = randn(w["M"], w["K"]), randn(w["K"])
        return lambda: torch.mv(A, x)
    if base in ("reduce_max", "argmax"):
        x = randn(w["B"], w["R"], w["C"])
        return (lambda: torch.amax(x, dim=1)) if base == "reduce_max" else (lambda: torch.argmax(x, dim=1))
    if base == "col_mean":
        x = randn(w["M"], w["N"])
        return lambda: x.mean(dim=0)
    if base in ("log_softmax", "l2norm", "cumsum", "relu", "gelu", "silu", "transpose"):
        x = randn(w["M"], w["N"])
        if base == "transpose":
            y = torch.empty(w["N"], w["M"], device="cuda")
            return lambda: y.copy_(x.t())
        return {"log_softmax": lambda: torch.log_softmax(x, dim=1), "l2norm": lambda: F.normalize(x, dim=1),
                "cumsum": lambda: torch.cumsum(x, dim=1), "relu": lambda: torch.relu(x),
                "gelu": lambda: F.gelu(x), "silu": lambda: F.silu(x)}[base]
    if base == "rmsnorm":
        x, wt = randn(w["M"], w["N"]), randn(w["N"])
        eps = scalar(spec, "eps")
        return lambda: F.rms_norm(x, (w["N"],), wt, eps)
    if base == "batchnorm":
        x = randn(w["N"], w["C"], w["H"], w["W"])
        mean, var, gamma, beta = randn(w["C"]), randn(w["C"]).abs() + 0.5, randn(w["C"]), randn(w["C"])
        eps = scalar(spec, "eps")
        return lambda: F.batch_norm(x, mean, var, gamma, beta, False, 0.0, eps)
    if base in ("conv2d", "conv2d_relu_bias"):
        x, wt = randn(w["N"], w["CI"], w["H"], w["W"]), randn(w["CO"], w["CI"], 3, 3)
        if base == "conv2d":
            return lambda: F.conv2d(x, wt)
        bias = randn(w["CO"]).view(1, -1, 1, 1)
        return lambda: F.relu(F.conv2d(x, wt)) + bias
    if base == "maxpool2d":
        x = randn(w["N"], w["C"], w["H"], w["W"])
        return lambda: F.max_pool2d(x, 3, 2, 1)
    if base == "cross_entropy":
        logits = randn(w["M"], w["C"])
        target = torch.randint(0, w["C"], (w["M"],), device="cuda", generator=g)
        return lambda: F.cross_entropy(logits, target, reduction="none")
    if base == "gemm_bias_relu_scale":
        x, W, b = randn(w["M"], w["K"]), randn(w["N"], w["K"]), randn(w["N"])
        scale = scalar(spec, "scale")
        return lambda: F.relu(F.linear(x, W, b)) * scale
    if base == "gemm_sigmoid_rowsum":
        x, W, b = randn(w["M"], w["K"]), randn(w["N"], w["K"]), randn(w["N"])
        return lambda: torch.sigmoid(F.linear(x, W, b)).sum(dim=1)
    if base == "swiglu":
        x, W1, W3 = randn(w["M"], w["K"]), randn(w["N"], w["K"]), randn(w["N"], w["K"])
        return lambda: F.silu(F.linear(x, W1)) * F.linear(x, W3)
    if base == "residual_layernorm":
        x, r, gamma, beta = randn(w["M"], w["N"]), randn(w["M"], w["N"]), randn(w["N"]), randn(w["N"])
        eps = scalar(spec, "eps")

        def run():
            h = x + r
            return h, F.layer_norm(h, (w["N"],), gamma, beta, eps)
        return run
    if base == "rmsnorm_silu_gate":
        x, z, wt = randn(w["M"], w["N"]), randn(w["M"], w["N"]), randn(w["N"])
        eps = scalar(spec, "eps")
        return lambda: F.rms_norm(x, (w["N"],), wt, eps) * F.silu(z)
    if base == "scale_mask_softmax":
        x = randn(w["B"], w["T"], w["T"])
        mask = torch.triu(torch.ones(w["T"], w["T"], dtype=torch.bool, device="cuda"), diagonal=1)
        scale = scalar(spec, "scale")
        return lambda: torch.softmax((x * scale).masked_fill(mask, float("-inf")), dim=-1)
    if base == "softmax_matmul":
        S, V = randn(w["B"], w["T"], w["T"]), randn(w["B"], w["T"], w["D"])
        return lambda: torch.bmm(torch.softmax(S, dim=-1), V)
    if base == "groupnorm_swish":
        x, gamma, beta = randn(w["N"], w["C"], w["H"], w["W"]), randn(w["C"]), randn(w["C"])
        eps = scalar(spec, "eps")

        def run():
            v = F.group_norm(x, w["G"], gamma, beta, eps)
            return v * torch.sigmoid(v)
        return run
    # Level 3 (recommendation models): indices and offsets drawn as the evaluator draws them (uniform rows,
    # sorted offsets in [0, NNZ]), with offsets[0] = 0 as PyTorch requires.
    def offsets(B, NNZ, dtype):
        o = torch.sort(torch.randint(0, NNZ + 1, (B,), device="cuda", generator=g)).values
        o[0] = 0
        return o.to(dtype)
    if base in ("embedding_bag_sum", "embedding_bag_mean"):
        dtype = torch.int64 if base.endswith("sum") else torch.int32
        W = randn(w["V"], w["D"])
        idx = torch.randint(0, w["V"], (w["NNZ"],), device="cuda", generator=g).to(dtype)
        offs = offsets(w["B"], w["NNZ"], dtype)
        if base.endswith("sum"):
            psw = randn(w["NNZ"])
            return lambda: F.embedding_bag(idx, W, offs, mode="sum", per_sample_weights=psw)
        return lambda: F.embedding_bag(idx, W, offs, mode="mean")
    if base == "jagged_segment_sum":
        values = randn(w["NNZ"], w["D"])
        offs = torch.cat([offsets(w["B"], w["NNZ"], torch.int64), torch.tensor([w["NNZ"]], device="cuda")])
        return lambda: torch.segment_reduce(values, "sum", offsets=offs, axis=0, unsafe=True)
    if base == "dot_interaction":
        X = randn(w["B"], w["F"], w["D"])
        li, lj = torch.tril_indices(w["F"], w["F"], offset=-1, device="cuda")
        return lambda: torch.bmm(X, X.transpose(1, 2))[:, li, lj]  # DLRM's interact_features (dot)
    if base == "gather_rows_max":
        W = randn(w["V"], w["D"])
        idx = torch.randint(0, w["V"], (w["B"], w["L"]), device="cuda", generator=g, dtype=torch.int32)
        return lambda: F.embedding_bag(idx, W, mode="max")  # fixed-length bags: the 2-D input form
    return gpu_baselines.torch_op(spec, w, torch)  # it names the problem if it has no baseline either


time_us = gpu_baselines.time_us  # the same timer for both scripts: events, L2 flush, median


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("specs", nargs="+")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    props = torch.cuda.get_device_properties(0)
    flush = torch.empty(2 * getattr(props, "L2_cache_size", 50 << 20), dtype=torch.uint8, device="cuda")
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "problems": {}}
    n = (1 << 30) // 4
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    out["copy_gbps"] = 2 * n * 4 / (time_us(lambda: dst.copy_(src), torch, flush, 20) * 1e-6) / 1e9
    src = dst = None  # the copy's buffers freed before the problems run
    for path in args.specs:
        with open(path) as f:
            spec = json.load(f)
        rows = []
        try:
            for w in spec["workloads"]:
                fn = torch_op(spec, w, torch)
                rows.append({"workload": w, "time_us": time_us(fn, torch, flush, 20)})
                del fn
                torch.cuda.empty_cache()
        except Exception as e:  # one problem's failure leaves the others' times
            print(f"torch {spec['name']}: failed: {e}", file=sys.stderr)
            continue
        out["problems"][spec["name"]] = rows
        print(f"torch {spec['name']}: " + ", ".join(f"{r['time_us']:.1f} us" for r in rows), file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
