"""vLLM's model runner on device tpu: GPUModelRunner, with CUDA's stream and event API routed to torch.tpu.

The runner keeps vLLM's pinned host buffers and their non_blocking copies to the device (torch_tpu
supports both), its input preparation and sampler; the attention backend is torch_tpu.vllm.attention.
"""
import torch
from vllm.v1.worker.gpu_model_runner import GPUModelRunner


def _event(*args, blocking=None, **kwargs):
    # torch.tpu.Event takes no `blocking`: its synchronize() always waits on the host.
    return torch.tpu.Event(*args, **kwargs)


def route_cuda_streams_to_tpu() -> None:
    """GPUModelRunner names torch.cuda.Stream / Event / current_stream / stream directly.

    A CPU build of torch has no CUDA, so these names are free in a serving process: they are pointed at
    torch.tpu's equivalents for the process (vLLM's XPU runner does the same for torch.xpu).
    """
    torch.cuda.Stream = torch.tpu.Stream
    torch.cuda.Event = _event
    torch.cuda.current_stream = torch.tpu.current_stream
    torch.cuda.default_stream = torch.tpu.default_stream
    torch.cuda.stream = torch.tpu.stream
    torch.cuda.set_stream = torch.tpu.set_stream


class TpuModelRunner(GPUModelRunner):
    def __init__(self, vllm_config, device: torch.device):
        route_cuda_streams_to_tpu()
        super().__init__(vllm_config, device)
        self.use_cuda_graph = False

    def _sync_device(self) -> None:
        torch.tpu.synchronize(self.device)

    def _to_list(self, sampled_token_ids: torch.Tensor) -> list[list[int]]:
        return sampled_token_ids.tolist()
