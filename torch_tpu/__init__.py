"""torch_tpu: PyTorch on XLA devices (TPU, GPU, CPU) through PJRT, as device "tpu".

`import torch` loads this package through the `torch.backends` entry point, so
`torch.randn(3, device="tpu")` works without importing it explicitly.
"""
import atexit
import warnings

from . import _plugins

__version__ = "0.1.0"

_registered = False


def _register() -> None:
    global _registered
    if _registered:
        return
    # When torch_tpu is imported before torch (`python -m torch_tpu.cache`), this
    # import runs the entry point (_autoload) itself, which registers everything.
    import torch

    if _registered:
        return
    from . import _C  # loads the extension: allocator, guard, hooks, kernels
    from . import device as device_module

    _C._configure_plugins(_plugins.candidates())
    torch.utils.rename_privateuse1_backend("tpu")
    torch._register_device_module("tpu", device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
    # Autograd's tpu device threads must finish starting before the interpreter
    # finalizes (see _settle_autograd_threads).
    atexit.register(_C._settle_autograd_threads)
    _registered = True


def _autoload() -> None:
    """Entry point run inside `import torch`: must never raise."""
    try:
        _register()
    except Exception as exc:  # a broken install must not break `import torch`
        warnings.warn(f"torch_tpu could not register device 'tpu': {exc}", RuntimeWarning)


# Importing this module happens inside `import torch` (the entry point), so it
# must not raise either.
_autoload()
