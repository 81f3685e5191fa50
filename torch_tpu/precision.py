"""torch.tpu.precision: float32 matmul/convolution precision for a region.

"medium": the backend's default (one bfloat16 pass on TPU, TF32 on NVIDIA GPUs), "high": HIGH (three bf16
passes / TF32), "highest": HIGHEST (true float32; six bf16 passes on TPU). It sets PyTorch's own
torch.set_float32_matmul_precision for the block and restores it after (the setting is process-wide, as
PyTorch's is), so every op launched inside — eager in any mode, torch.compile graphs, torch_tpu.pallas JAX
ops — compiles with that precision_config. On TPU, the first program that asks for "high"/"highest" warns
once with the cost.
"""
import contextlib

import torch

MODES = ("medium", "high", "highest")


@contextlib.contextmanager
def precision(mode: str):
    if mode not in MODES:
        raise ValueError(f"torch.tpu.precision: unknown precision {mode!r}; expected one of {', '.join(MODES)}")
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(mode)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old)
