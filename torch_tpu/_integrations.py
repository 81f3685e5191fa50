"""What third-party libraries need to see tpu as the accelerator, set up at registration.

transformers (5.x) finds tpu by itself through `torch.accelerator` (`is_torch_tpu_available()`:
`current_accelerator().type == "tpu"`), which the PrivateUse1 hooks answer. accelerate (1.15) picks its
device from a fixed list (mps, mlu, sdaa, musa, npu, hpu, cuda, xpu, neuron, else cpu) and has no path for
an out-of-tree device; its one generic lever is the `ACCELERATE_TORCH_DEVICE` environment variable, which
`PartialState` reads when it is first made. We set it to "tpu" unless the user chose otherwise, so
`Accelerator().device` (and the Trainer's accelerator, which moves the model and the batches) is tpu.
"""
import os

from . import _plugins

ACCELERATE_DEVICE_VAR = "ACCELERATE_TORCH_DEVICE"
# TORCH_TPU_ACCELERATE=0 leaves accelerate's own choice alone.
OPT_OUT_VAR = "TORCH_TPU_ACCELERATE"


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def configure_accelerate() -> None:
    """Makes tpu accelerate's default device when a plugin is installed and nobody chose a device.

    Left alone: an explicit ACCELERATE_TORCH_DEVICE, TORCH_TPU_ACCELERATE=0, ACCELERATE_USE_CPU=1
    (`accelerate launch --cpu`). Only the plugin files are looked for: starting one here would claim the
    chips inside `import torch`. accelerate lets the variable win over `Accelerator(cpu=True)` and
    `TrainingArguments(use_cpu=True)`; a CPU run in a process with tpu sets ACCELERATE_TORCH_DEVICE=cpu.
    """
    if ACCELERATE_DEVICE_VAR in os.environ or _flag("ACCELERATE_USE_CPU"):
        return
    if os.environ.get(OPT_OUT_VAR, "").strip().lower() in ("0", "false", "no", "off"):
        return
    if not _plugins.candidates():
        return
    os.environ[ACCELERATE_DEVICE_VAR] = "tpu"

