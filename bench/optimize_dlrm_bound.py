#!/usr/bin/env python3
"""Why the DLRM (problems/models/dlrm at its GPU size) is no faster with its lookups put back (issue 30;
bench/results/optimize_l3_h200.md): whether its eager forward is bound by the CPU's launches or by the GPU, and
what each layer of a put-back call costs the CPU against the ATen call it replaces. On the lent GPU, from a bundle:

    KE_PYTHON=/opt/torch/.venv/bin/python3 $KE_PYTHON bench/optimize_dlrm_bound.py build-gpu

1. The model's forward: CUDA events around 50 forwards (the GPU's time, per forward) against the CPU's time to queue
   them; then torch.profiler's table of the GPU time by operator. Where the CPU's time is the larger, a kernel that
   takes the GPU less time leaves the forward as long as it was.
2. The eight lookups alone, ATen's, against the translated embedding-bag kernel (ke_inductor's, launched by
   Triton from Python: the CPU's time per launch is Triton's, not ours) at several configurations, on the model's
   own tables and inputs (each table read once a round, as the forward reads them).
3. problems/pytorch/emb_bag_sum run for 2 evaluations (node 0 torch.compile's program, translated), its best loaded
   as an operator, and the CPU's microseconds per call of: ATen's embedding_bag, one ATen element-wise kernel, the
   Guarded module a put-back model calls, Operator.__call__, Operator._execute, an output's new_empty, the
   program's launch through the C API, and the operator through PyTorch's dispatcher; each the best of five loops of
   3000 calls, beside the loop's time with the GPU's work drained."""
import os
import subprocess
import sys
import tempfile

import torch

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build-gpu"))
sys.path[:0] = [os.path.join(build, "python"), os.path.join(root, "src", "pytorch"), os.path.join(root, "bench")]
from ke_inductor.embedding_bag import _EMBEDDING_BAG_SUM  # noqa: E402
from dlrm_timing import load, per_call, queued  # noqa: E402
import kernelevolve.torch as ket  # noqa: E402
import triton  # noqa: E402


def queued_text(fn):
    return "GPU %.1f us, CPU %.1f us" % queued(fn)


def per_call_text(fn):
    return "%.2f us (%.2f with the GPU drained)" % per_call(fn)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        kernel_file = os.path.join(tmp, "ke_embedding_bag.py")
        with open(kernel_file, "w") as f:
            f.write("import triton\nimport triton.language as tl\n\n@triton.jit\n" +
                    _EMBEDDING_BAG_SUM + "\n")
        kernel = load(kernel_file, "ke_embedding_bag").ke_embedding_bag_sum
        dlrm = load(os.path.join(root, "problems", "models", "dlrm", "model.py"), "dlrm")
        torch.manual_seed(1)
        model = dlrm.Model(*dlrm.get_init_inputs()).cuda().eval()
        dense, indices, offsets = [x.cuda() for x in dlrm.get_inputs()]
        with torch.no_grad():
            print("\n## 1. The forward (batch %d)" % dense.shape[0])
            print("eager:", queued_text(lambda: model(dense, indices, offsets)))
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    model(dense, indices, offsets)
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12))

            print("## 2. The eight lookups")
            bags = list(model.bags)
            batch, dim = offsets.shape[1], bags[0].weight.shape[1]
            outs = [torch.empty(batch, dim, device="cuda") for _ in bags]
            print("ATen's:", queued_text(lambda: [b(indices[t], offsets[t]) for t, b in enumerate(bags)]))

            def ours(block_d, block_i, warps):
                def launch():
                    for t, b in enumerate(bags):
                        kernel[(batch, triton.cdiv(dim, block_d))](
                            b.weight, indices[t], offsets[t], outs[t], batch, indices.shape[1], dim,
                            BLOCK_D=block_d, BLOCK_I=block_i, num_warps=warps)
                return launch
            ours(64, 8, 2)()
            torch.cuda.synchronize()
            error = max((o - torch.nn.functional.embedding_bag(indices[t], b.weight, offsets[t], mode="sum"))
                        .abs().max().item() for t, (o, b) in enumerate(zip(outs, bags)))
            print(f"ours (max error {error:.2g}):")
            for config in [(64, 8, 2), (32, 32, 1), (32, 8, 1), (64, 32, 4), (32, 16, 2), (64, 8, 8)]:
                print("  BLOCK_D %d BLOCK_I %d num_warps %d:" % config, queued_text(ours(*config)))

        print("\n## 3. A put-back call's layers (problems/pytorch/emb_bag_sum)")
        db = os.path.join(tmp, "emb.db")
        done = subprocess.run([os.path.join(build, "kernelevolve"), "run",
                               os.path.join(root, "problems", "pytorch", "emb_bag_sum", "model.py"), "--device", "cuda",
                               "--max-evals", "2", "--db", db], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the emb_bag_sum run failed ({done.returncode}): {done.stderr[-2000:]}")
        problem = load(os.path.join(root, "problems", "pytorch", "emb_bag_sum", "model.py"), "emb_bag_sum")
        torch.manual_seed(0)
        bag = problem.Model(*problem.get_init_inputs()).cuda().eval().bag
        args = tuple(x.cuda() for x in problem.get_inputs()) + (bag.weight,)
        op = ket.load(db, device="cuda")

        def original(i, o, w):
            return torch.nn.functional.embedding_bag(i, w, o, mode="sum")
        guarded = ket.Guarded(op, original)
        with torch.no_grad():
            error = (guarded(*args) - original(*args)).abs().max().item()
            print(f"{op.qualname}, max error {error:.2g}, fallbacks {guarded.fallbacks}")
            key = tuple((a.shape, a.dtype, a.device, a.is_contiguous()) for a in args)
            dispatched = getattr(torch.ops.kernelevolve, op.qualname.split("::")[1])
            program = op.program
            for name, fn in [("ATen's embedding_bag", lambda: original(*args)),
                             ("one ATen element-wise kernel (x * 2)", lambda: args[0] * 2),
                             ("Guarded (the module a put-back model calls)", lambda: guarded(*args)),
                             ("Operator.__call__", lambda: op(*args)),
                             ("Operator._execute", lambda: op._execute(args, key)),
                             ("new_empty of the output", lambda: bag.weight.new_empty((512, 64))),
                             ("the program's launch (C API)", lambda: program.launch(ket._raw_stream(0), op._flags)),
                             ("through PyTorch's dispatcher", lambda: dispatched(*args))]:
                # The launch alone writes where the last call's output was: that output is kept alive meanwhile.
                kept = op._execute(args, key)
                print(f"  {name}: {per_call_text(fn)}")
                del kept


if __name__ == "__main__":
    main()
