"""PyTorch's dtypes and the spec's names for them (f32, bf16, i64, ...)."""

import torch


DTYPES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int64: "i64", torch.int32: "i32", torch.int8: "i8", torch.uint8: "u8", torch.bool: "u8",
}
TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64,
                "i64": torch.int64, "i32": torch.int32, "i8": torch.int8, "u8": torch.uint8}
