"""The vLLM platform for device "tpu" (or "cpu" with TORCH_TPU_VLLM_DEVICE=cpu, the serving baseline)."""
import os

import torch
from vllm.logger import init_logger
from vllm.platforms.interface import Platform, PlatformEnum

logger = init_logger(__name__)

_DEVICE = os.environ.get("TORCH_TPU_VLLM_DEVICE", "tpu")
if _DEVICE not in ("tpu", "cpu"):
    raise ValueError(f"TORCH_TPU_VLLM_DEVICE must be 'tpu' or 'cpu', not {_DEVICE!r}")

MODEL_DTYPES = (torch.bfloat16, torch.float16, torch.float32)

ASYNC_ENV = "TORCH_TPU_VLLM_ASYNC_SCHEDULING"


def _async_scheduling_pays() -> bool:
    """Whether vLLM's async scheduling (the engine schedules and prepares step N+1 while the device runs step
    N; the runner takes the tokens step N sampled from the device) stays on where vLLM chose it.
    Off on device cpu (as vLLM's CPU platform). On tpu TORCH_TPU_VLLM_ASYNC_SCHEDULING=1/0 decides; unset,
    it is off when the PJRT plugin tried first runs programs on the host's own cores (the CPU plugins): there
    is no device time to overlap, and the extra work of a step made serving slower (docs/serving.md)."""
    if _DEVICE == "cpu":
        return False
    explicit = os.environ.get(ASYNC_ENV)
    if explicit in ("0", "1"):
        return explicit == "1"
    if explicit:
        raise ValueError(f"{ASYNC_ENV} must be '0' or '1', not {explicit!r}")
    from torch_tpu import _plugins
    found = _plugins.candidates()
    # Without starting a PJRT client in the engine process: an explicit plugin path is judged by its name.
    return bool(found) and found[0][0] != "cpu" and "cpu" not in os.path.basename(found[0][1]).lower()


class TpuPlatform(Platform):
    _enum = PlatformEnum.OOT
    # parallel_state builds torch.device(f"{device_name}:{rank}"): both must be the torch device string.
    device_name: str = _DEVICE
    device_type: str = _DEVICE
    dispatch_key: str = "PrivateUse1" if _DEVICE == "tpu" else "CPU"
    dist_backend: str = "tpu_dist" if _DEVICE == "tpu" else "gloo"
    # vLLM's small @torch.compile helpers (logprob ranks, unseeded random sampling, grouped top-k routing)
    # name this backend explicitly, which bypasses torch_tpu's default-backend routing: Inductor has no
    # code generator for tpu.
    simple_compile_backend: str = "tpu" if _DEVICE == "tpu" else "inductor"
    # FP8 W8A8 (torch_tpu.vllm.fp8): fp8 checkpoints and online per-tensor / per-channel quantization. vLLM's
    # verify_quantization refuses every other method with its own error.
    supported_quantization: list[str] = ["fp8", "fp8_per_tensor", "fp8_per_channel"]

    @property
    def supported_dtypes(self) -> list[torch.dtype]:
        return list(MODEL_DTYPES)

    @classmethod
    def check_if_supports_dtype(cls, dtype: torch.dtype) -> None:
        if dtype not in MODEL_DTYPES:
            raise ValueError(f"tpu: vLLM model dtype {dtype} is not supported; use bfloat16, float16 or float32")

    @classmethod
    def supports_fp8(cls) -> bool:
        return True

    @classmethod
    def fp8_dtype(cls) -> torch.dtype:
        return torch.float8_e4m3fn

    @classmethod
    def is_fp8_fnuz(cls) -> bool:
        return False

    @classmethod
    def import_kernels(cls) -> None:
        # vllm._C is a CUDA build: every kernel this platform needs is torch code.
        return

    @classmethod
    def register_triton_kernel_overrides(cls) -> None:
        from vllm.triton_utils.dispatcher import register_kernels

        from . import fp8, kernels, moe
        register_kernels(kernels.OVERRIDES)
        # vLLM calls this in every worker before building the model: the MoE and FP8 ops go in at the same point.
        moe.register()
        fp8.register()

    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None) -> str:
        if attn_selector_config.use_mla or attn_selector_config.use_sparse:
            raise NotImplementedError(
                "tpu: MLA and sparse attention are not supported by torch_tpu's vLLM attention backend; "
                "serve a model with standard (multi-head / grouped-query) attention")
        from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

        from .attention import TpuAttentionBackend
        # vLLM checks an out-of-tree backend's cache dtypes nowhere else.
        if not TpuAttentionBackend.supports_kv_cache_dtype(attn_selector_config.kv_cache_dtype):
            raise ValueError(f"tpu: kv_cache_dtype {attn_selector_config.kv_cache_dtype!r} is not supported by "
                             "torch_tpu's vLLM attention backend; use one of "
                             f"{', '.join(TpuAttentionBackend.supported_kv_cache_dtypes)}")
        path = "torch_tpu.vllm.attention.TpuAttentionBackend"
        if "TORCH_TPU_PAGED" not in AttentionBackendEnum.__members__:  # layers look their backend up by name
            register_backend("TORCH_TPU_PAGED", path)
        return path

    @classmethod
    def get_vit_attn_backend(cls, head_size, dtype, backend=None):
        # Multimodal encoders (MMEncoderAttention): torch's scaled_dot_product_attention, which runs on tpu.
        # The base class refuses other backends with an assert; this says why, as a ValueError.
        from vllm.v1.attention.backends.registry import AttentionBackendEnum

        if backend is not None and backend != AttentionBackendEnum.TORCH_SDPA:
            raise ValueError(f"tpu: mm_encoder_attn_backend {backend.name} is not supported; multimodal encoders "
                             "run TORCH_SDPA (torch scaled_dot_product_attention) on tpu")
        return AttentionBackendEnum.TORCH_SDPA

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        if _DEVICE == "cpu":
            return "cpu"
        return torch.tpu.get_device_name(device_id)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        if _DEVICE == "cpu":
            import psutil
            return psutil.virtual_memory().total
        return torch.tpu.mem_get_info(device_id)[1]

    @classmethod
    def get_current_memory_usage(cls, device=None) -> float:
        if _DEVICE == "cpu":
            import psutil
            return float(psutil.Process().memory_info().rss)
        return float(torch.tpu.memory_allocated(device))

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        if _DEVICE == "tpu":
            torch.tpu.set_device(device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        if _DEVICE == "tpu":
            torch.tpu.manual_seed_all(seed)

    @classmethod
    def inference_mode(cls):
        return torch.no_grad()

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        return _DEVICE == "tpu"

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        from vllm.config import CompilationMode, CUDAGraphMode

        parallel_config = vllm_config.parallel_config
        if parallel_config.worker_cls == "auto":
            parallel_config.worker_cls = "torch_tpu.vllm.worker.TpuWorker"
        parallel_config.disable_custom_all_reduce = True
        if parallel_config.enable_dbo:
            logger.warning_once("tpu: dual-batch overlap is not supported, disabled")
            parallel_config.enable_dbo = False

        cache_config = vllm_config.cache_config
        if not cache_config.user_specified_block_size:
            cache_config.block_size = 16

        # The worker compiles its own fixed-shape programs (torch_tpu.vllm.model_runner): vLLM's
        # Inductor pipeline and CUDA graphs do not apply.
        compilation_config = vllm_config.compilation_config
        compilation_config.mode = CompilationMode.NONE
        compilation_config.cudagraph_mode = CUDAGraphMode.NONE
        compilation_config.cudagraph_capture_sizes = []
        scheduler_config = vllm_config.scheduler_config
        if scheduler_config.async_scheduling and not _async_scheduling_pays():
            if _DEVICE == "tpu" and ASYNC_ENV not in os.environ:
                logger.info_once("tpu: async scheduling off (a CPU PJRT plugin runs the device's programs on the "
                                 f"host's cores); {ASYNC_ENV}=1 keeps it")
            scheduler_config.async_scheduling = False

        # Workers are started with spawn: a forked child would inherit the parent's PJRT client.
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"

    @classmethod
    def is_sleep_mode_available(cls) -> bool:
        return False

    @classmethod
    def use_all_gather(cls) -> bool:
        return True
