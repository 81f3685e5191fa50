"""torch_tpu.amp: tpu defaults for torch.amp, as torch.cuda.amp has for CUDA (torch.amp works unchanged:
torch.autocast("tpu"), torch.amp.GradScaler("tpu"))."""
import torch


def autocast(enabled: bool = True, dtype: torch.dtype = torch.bfloat16, cache_enabled: bool = True):
    """torch.autocast("tpu", ...) with bfloat16 as the default dtype (the TPU's native low precision)."""
    return torch.autocast("tpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """torch.amp.GradScaler on device "tpu" (its unscale and update ops run on the device, no host read)."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        super().__init__("tpu", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)


__all__ = ["autocast", "GradScaler"]
