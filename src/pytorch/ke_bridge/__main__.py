"""The command line: `describe` or `serve` (the package's docstring says what each does)."""

import json
import os
import traceback

import torch

from . import precision
from .describe import describe
from .errors import Unmappable
from .protocol import serve
from .variant import Variant


def main():
    import argparse
    parser = argparse.ArgumentParser(prog="kernelevolve-pytorch-bridge")
    parser.add_argument("mode", choices=["describe", "serve"])
    parser.add_argument("--module", default="")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", default="")
    parser.add_argument("--arena-fd", type=int, default=-1)
    parser.add_argument("--arena-bytes", type=int, default=0)
    parser.add_argument("--arena-ipc", default="")
    parser.add_argument("--arena-alloc", action="store_true")
    parser.add_argument("--control-fd", type=int, default=-1)
    parser.add_argument("--model-seed", type=int, default=0)
    parser.add_argument("--dtype", choices=["", "bf16", "f16"], default="")
    parser.add_argument("--backward", action="store_true")
    parser.add_argument("--with-forward", action="store_true")
    parser.add_argument("--precision", choices=["as-run", "strict"], default="strict")
    args = parser.parse_args()
    torch.set_num_threads(max(1, int(os.environ.get("KE_TORCH_THREADS", "1"))))
    precision.PRECISION = args.precision
    precision.apply_precision()
    if args.mode == "describe":
        try:
            variant = Variant(args.dtype, args.backward, args.with_forward)
            print(json.dumps(describe(args.module, args.device, json.loads(args.sizes) if args.sizes else None,
                                      variant)))
        except Unmappable as e:
            print(json.dumps({"error": str(e)}))
        except Exception as e:
            print(json.dumps({"error": f"the module failed: {type(e).__name__}: {e}",
                              "trace": traceback.format_exc()[-2000:]}))
        return
    serve(args)


if __name__ == "__main__":
    main()
