"""vLLM on device "tpu": an out-of-tree vLLM platform plugin.

vLLM finds `register` through the `vllm.platform_plugins` entry point. Its scheduler, KV block manager,
sampler and model code run unchanged; this package supplies the platform (`platform.TpuPlatform`), the
worker and model runner (`worker`, `model_runner`) and a paged-attention backend written with ordinary
torch ops on tpu tensors (`attention`).

Environment:
- `TORCH_TPU_VLLM=0` leaves vLLM to its built-in platforms.
- `TORCH_TPU_VLLM_DEVICE=cpu` runs the same plugin on device "cpu" (CPU eager PyTorch): the baseline of
  benchmarks/serving.py.
- `TORCH_TPU_VLLM_BUCKETS=0` turns off the fixed-shape step padding (model_runner), `TORCH_TPU_VLLM_WARM_UP=0`
  only the warm-up over the buckets.
"""
import os


def register() -> str | None:
    if os.environ.get("TORCH_TPU_VLLM", "1") == "0":
        return None
    return "torch_tpu.vllm.platform.TpuPlatform"
