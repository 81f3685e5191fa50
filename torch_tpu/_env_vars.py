"""The environment variables that change what torch_tpu (or the plugin under it) does, for the doctor.

tests/test_doctor.py checks that every TORCH_TPU_* name in torch_tpu/ and csrc/ is listed here,
so a new variable cannot be left out of the report.
"""
import os
from typing import Dict, List

# name -> what it changes (the default in brackets where it matters).
KNOWN: Dict[str, str] = {
    # plugin and device
    "TORCH_TPU_PJRT_PLUGIN": "the only PJRT plugin tried (path to a .so)",
    "TORCH_TPU_CPU_FALLBACK": "1: ops without a tpu lowering run on the CPU (slow) instead of raising",
    "TORCH_TPU_MAX_MAP_COUNT": "memory-mapping budget planned for [/proc/sys/vm/max_map_count]",
    # eager modes
    "TORCH_TPU_EAGER_MODE": "eager mode at start: strict | debug | fused [strict]",
    "TPU_LAUNCH_BLOCKING": "1: debug eager mode (when TORCH_TPU_EAGER_MODE is unset)",
    "TORCH_TPU_DEFER_AND_FUSE": "1: fused eager mode (when TORCH_TPU_EAGER_MODE is unset)",
    "TORCH_TPU_DEBUG_NONFINITE": "debug mode on NaN/Inf from finite inputs: raise | warn | off",
    "TORCH_TPU_FUSED_MAX_OPS": "ops after which a fused graph is cut [1000]",
    "TORCH_TPU_FUSED_REPLAY": "0: trace every fused graph (no replay of a recorded step)",
    "TORCH_TPU_FOREACH_PROGRAMS": "0: foreach ops run one program per tensor in strict mode (read at load)",
    "TORCH_TPU_OPTIMIZER_PROGRAMS": "0: a torch.optim step in strict mode runs one program per op, not one per step "
                                    "(read at import)",
    "TORCH_TPU_MEMORY_CACHE_MAX": "compiled programs kept loaded in memory [4096]",
    "TORCH_TPU_CPU_DEVICES": "devices of a CPU plugin (XLA's thread pools grow with them) [the plugin's: 4]",
    "TORCH_TPU_HOST_MALLOC": "keep (one glibc arena) or system (glibc's defaults) on the CPU plugins "
                             "[cache: the plugin's large blocks stay mapped for reuse]",
    "TORCH_TPU_LOG": "logs: compile, cache, hlo, fused, fused_ops, recompile, all (comma-separated)",
    # compile cache
    "TORCH_TPU_CACHE": "0/off: no persistent compile cache",
    "TORCH_TPU_CACHE_DIR": "compile cache folder [$XDG_CACHE_HOME/torch_tpu or ~/.cache/torch_tpu]",
    "TORCH_TPU_CACHE_MAX_BYTES": "compile cache size bound (bytes, or 500M, 10G) [10G]",
    "TORCH_TPU_CACHE_LOCK_TIMEOUT": "seconds to wait for another process's cache lock [300]",
    "TORCH_TPU_CACHE_KEY_FILE": "file holding the team key that seals (HMAC-SHA256) and verifies cache entries",
    "TORCH_TPU_CACHE_KEY": "the team key itself (when TORCH_TPU_CACHE_KEY_FILE is unset)",
    "TORCH_TPU_CACHE_TRUST_SHARED": "1: load unsealed entries from a folder other users can write (unsafe)",
    "XDG_CACHE_HOME": "parent of the default compile cache folder",
    # torch.compile
    "TORCH_TPU_COMPILE_BUCKETS": "0: torch.compile graphs keep exact shapes (no shape buckets)",
    "TORCH_TPU_COMPILE_REPLAY": "0: torch.compile graphs are not replayed from a recorded plan",
    "TORCH_LOGS": "PyTorch's logs; wins over TORCH_TPU_LOG=recompile",
    # integrations
    "TORCH_TPU_ACCELERATE": "0: accelerate is left untouched (no tpu default device / device_map memory)",
    "TORCH_TPU_DIST_CHECK": "0: no per-collective fingerprint check in torch.distributed",
    "TORCH_TPU_VLLM": "0: the vLLM platform plugin is off",
    "TORCH_TPU_VLLM_DEVICE": "cpu: the vLLM plugin runs on CPU PyTorch (serving baseline)",
    "TORCH_TPU_VLLM_BUCKETS": "0: vLLM steps are not padded to fixed shapes",
    "TORCH_TPU_VLLM_WARM_UP": "0: no vLLM warm-up over the shape buckets",
    "TORCH_TPU_VLLM_STEP_GRAPHS": "0: vLLM's forward runs its model code every step (no step-graph replay)",
    "TORCH_TPU_VLLM_ASYNC_SCHEDULING": "1/0: vLLM's async scheduling kept/off on tpu (default: off on CPU plugins)",
    # read by the PJRT plugins, not by torch_tpu
    "XLA_FLAGS": "XLA compiler flags (every XLA plugin)",
    "LIBTPU_INIT_ARGS": "libtpu flags",
    "TPU_VISIBLE_CHIPS": "TPU chips libtpu may use",
    "CUDA_VISIBLE_DEVICES": "GPUs the CUDA plugin may use",
}

# Secrets: reported as set, never with their value (doctor output gets pasted into bug reports).
_SECRET = ("TORCH_TPU_CACHE_KEY",)

# Prefixes whose unknown names are reported: a misspelt variable is silently ignored otherwise.
_PREFIXES = ("TORCH_TPU_",)


def report(environ=None) -> Dict[str, object]:
    """{"set": {name: {"value", "meaning"}}, "unknown": [names with our prefix that nothing reads]}."""
    environ = os.environ if environ is None else environ
    found = {name: {"value": "<set, not shown>" if name in _SECRET else environ[name], "meaning": meaning}
             for name, meaning in KNOWN.items() if name in environ}
    unknown: List[str] = sorted(n for n in environ if n.startswith(_PREFIXES) and n not in KNOWN)
    return {"set": found, "unknown": unknown}
