"""What accelerate needs to see tpu as the accelerator, without overriding a user's explicit choice.

transformers (5.x) finds tpu by itself through `torch.accelerator` (`is_torch_tpu_available()`:
`current_accelerator().type == "tpu"`), which the PrivateUse1 hooks answer. accelerate (written against
1.15) has a fixed device list (mps, mlu, sdaa, musa, npu, hpu, cuda, xpu, neuron, else cpu) in two places
and no registry for an out-of-tree device:

- `PartialState.default_device`, the device when nobody chose one. It is consulted only after
  `ACCELERATE_TORCH_DEVICE`, `Accelerator(cpu=True)`, `TrainingArguments(use_cpu=True)` and
  `accelerate launch --cpu` (`ACCELERATE_USE_CPU`), so answering tpu there keeps every explicit choice.
  (An `ACCELERATE_TORCH_DEVICE=tpu` default, used before, won over `cpu=True`.)
- `accelerate.utils.modeling.get_max_memory`, which `device_map="auto"/"balanced"/"sequential"` and
  `infer_auto_device_map` start from: it lists no tpu memory, so everything went to the CPU.

Both are replaced when the module defining them is imported (_import_hooks: `import torch` runs
before accelerate's modules, and nothing of accelerate is imported on its behalf), and only answer for tpu
when tpu is torch's current accelerator; otherwise they call accelerate's own code.
`TORCH_TPU_ACCELERATE=0` leaves accelerate untouched.
"""
import logging
import os
import sys
import warnings

import torch

from . import _import_hooks

OPT_OUT_VAR = "TORCH_TPU_ACCELERATE"
TESTED_ACCELERATE = "1.15"

_log = logging.getLogger("torch_tpu.integrations")


def _opted_out() -> bool:
    return os.environ.get(OPT_OUT_VAR, "").strip().lower() in ("0", "false", "no", "off")


def tpu_is_accelerator() -> bool:
    """The same test transformers makes: tpu is the device torch.accelerator reports."""
    acc = torch.accelerator.current_accelerator(check_available=True)
    return acc is not None and acc.type == "tpu"


# --- accelerate.state -----------------------------------------------------------------------------
def _patch_state(state) -> None:
    cls = state.PartialState
    original = cls.__dict__.get("default_device")
    if not isinstance(original, property) or getattr(original.fget, "_torch_tpu", False):
        return

    def default_device(self):
        return torch.device("tpu") if tpu_is_accelerator() else original.fget(self)

    default_device._torch_tpu = True
    default_device.__doc__ = original.__doc__
    cls.default_device = property(default_device)


# --- accelerate.utils.modeling --------------------------------------------------------------------
def _tpu_max_memory(original, max_memory):
    """accelerate's get_max_memory with integer keys meaning tpu devices (as they mean CUDA devices there)."""
    import psutil
    count = torch.tpu.device_count()
    if max_memory is None:
        found = {i: torch.tpu.mem_get_info(i)[0] for i in range(count)}
        found["cpu"] = psutil.virtual_memory().available
        return found
    if not isinstance(max_memory, dict):
        raise TypeError(f"max_memory must be a dict of device -> size, got {type(max_memory).__name__}")
    from accelerate.utils import convert_file_size_to_int
    # In place, as accelerate does: transformers compares its own sizes with the caller's dict afterwards.
    for key, value in max_memory.items():
        if isinstance(value, str):
            max_memory[key] = convert_file_size_to_int(value)
    devices = sorted(k for k in max_memory if isinstance(k, int))
    for d in devices:
        if not 0 <= d < count:
            warnings.warn(f"max_memory: tpu device {d} does not exist; this process has tpu:0..tpu:{count - 1}",
                          stacklevel=3)
    # accelerate checks integer keys against CUDA's device count, so it sees only the other keys; it still
    # validates them (a key like "tpu" is a ValueError) and orders them (mps, cpu, disk).
    rest = original({k: v for k, v in max_memory.items() if not isinstance(k, int)})
    return {**{d: max_memory[d] for d in devices}, **rest}


def _patch_modeling(modeling) -> None:
    original = modeling.get_max_memory
    if getattr(original, "_torch_tpu", False):
        return

    def get_max_memory(max_memory=None):
        if not tpu_is_accelerator():
            return original(max_memory)
        return _tpu_max_memory(original, max_memory)

    get_max_memory._torch_tpu = True
    get_max_memory.__doc__ = original.__doc__
    modeling.get_max_memory = get_max_memory  # modeling's own callers (get_balanced_memory, ...) look it up here
    # Re-exports that already copied the old function (only when the adapter came after the import).
    for name, attr in (("accelerate.utils", "get_max_memory"),
                       ("transformers.integrations.accelerate", "accelerate_max_memory")):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, attr, None) is original:
            setattr(mod, attr, get_max_memory)


PATCHES = {"accelerate.state": _patch_state, "accelerate.utils.modeling": _patch_modeling}


def _adapt(module) -> None:
    try:
        PATCHES[module.__name__](module)
    except Exception as exc:  # a changed accelerate must not break importing it: say so, leave it alone
        _log.warning("torch_tpu: could not adapt %s (tested with accelerate %s): %s",
                     module.__name__, TESTED_ACCELERATE, exc)


def install() -> None:
    """Adapts accelerate now if it is loaded, else when it is imported (idempotent)."""
    if _opted_out():
        return
    for name in PATCHES:
        if name in sys.modules:
            _adapt(sys.modules[name])
        else:
            _import_hooks.after_import(name, _adapt)
