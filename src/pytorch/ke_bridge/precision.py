"""The run's precision policy (issue 50) and the TF32 switches the reference and the baselines run under.
`PRECISION` is set once, by the command line (__main__), before the problem's module loads."""

import torch


# The run's precision policy (issue 50): "as-run" leaves PyTorch's TF32 switches as the user's environment and the
# module's file have them (PyTorch's defaults: cuDNN's convolutions on TF32, matrix products not); "strict" turns
# TF32 off everywhere, after the file is loaded, so that the reference, eager and torch.compile are fp32.
PRECISION = "strict"


def apply_precision():
    if PRECISION == "strict":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        if hasattr(torch, "set_float32_matmul_precision"):
            torch.set_float32_matmul_precision("highest")


def precision_state():
    """The switches the reference and the baselines run under, as the run stores and prints them."""
    matmul = torch.get_float32_matmul_precision() if hasattr(torch, "get_float32_matmul_precision") else "highest"
    return {"policy": PRECISION, "cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
            "matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "float32_matmul_precision": matmul}
