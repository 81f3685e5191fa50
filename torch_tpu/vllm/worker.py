"""vLLM's worker on device tpu: one process (or the engine's own process) per tpu device."""
import gc
from contextlib import nullcontext

import torch
from vllm.logger import init_logger
from vllm.platforms import current_platform
from vllm.utils.mem_utils import format_gib
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment
from vllm.v1.worker.worker_base import CompilationTimes

logger = init_logger(__name__)


class TpuWorker(Worker):
    def init_device(self):
        device_type = current_platform.device_type
        if device_type == "tpu":
            import torch_tpu.distributed  # noqa: F401  registers the tpu_dist backend

            if self.local_rank >= torch.tpu.device_count():
                raise RuntimeError(
                    f"tpu: worker rank {self.local_rank} has no device: {torch.tpu.device_count()} tpu devices; "
                    "lower tensor_parallel_size")
            self.device = torch.device(f"tpu:{self.local_rank}")
            torch.tpu.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        current_platform.check_if_supports_dtype(self.model_config.dtype)
        init_worker_distributed_environment(self.vllm_config, self.rank, self.distributed_init_method,
                                            self.local_rank, current_platform.dist_backend)
        set_random_seed(self.model_config.seed)
        self._init_workspace_and_model_runner()

    def _make_model_runner(self):
        if self.device.type == "cpu":
            from vllm.v1.worker.cpu_model_runner import CPUModelRunner
            return CPUModelRunner(self.vllm_config, self.device)
        from .model_runner import TpuModelRunner
        return TpuModelRunner(self.vllm_config, self.device)

    def _maybe_get_memory_pool_context(self, tag: str):
        return nullcontext()  # no sleep-mode memory pool on tpu

    def determine_available_memory(self) -> int:
        """Bytes for the KV cache: kv_cache_memory_bytes when given, else gpu_memory_utilization of the
        device's memory minus what the weights and one profiling forward pass hold."""
        with torch.no_grad():
            self.model_runner.profile_run()
        if (explicit := self.cache_config.kv_cache_memory_bytes) is not None:
            return explicit
        if self.device.type == "cpu":
            import psutil
            free, total = psutil.virtual_memory().available, psutil.virtual_memory().total
            used = psutil.Process().memory_info().rss
        else:
            torch.tpu.synchronize(self.device)
            gc.collect()
            free, total = torch.tpu.mem_get_info(self.device)
            used = torch.tpu.max_memory_allocated(self.device)
        budget = int(total * self.cache_config.gpu_memory_utilization) - used
        available = min(budget, free)
        if available <= 0:
            raise ValueError(
                f"tpu: no memory left for the KV cache ({format_gib(used)} GiB in use of {format_gib(total)} GiB, "
                f"gpu_memory_utilization={self.cache_config.gpu_memory_utilization}); raise "
                "gpu_memory_utilization or set kv_cache_memory_bytes")
        logger.info("tpu: %s GiB for the KV cache", format_gib(available))
        return available

    def compile_or_warm_up_model(self) -> CompilationTimes:
        warm_up = getattr(self.model_runner, "warm_up", None)
        if warm_up is not None:
            warm_up()
        set_random_seed(self.model_config.seed)
        return CompilationTimes(language_model=self.compilation_config.compilation_time,
                                encoder=self.compilation_config.encoder_compilation_time)

    def sleep(self, level: int = 1) -> None:
        logger.warning("tpu: sleep mode is not supported, ignored")

    def wake_up(self, tags=None) -> None:
        logger.warning("tpu: sleep mode is not supported, ignored")
