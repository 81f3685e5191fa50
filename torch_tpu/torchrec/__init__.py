"""TorchRec on tpu (docs/torchrec.md): torch_tpu's tpu kernels for the fbgemm ops TorchRec calls.

fbgemm_gpu defines its ops (schemas and CPU kernels) when it is imported; the tpu kernels
(csrc/aten/JaggedKernels.cpp) are registered right after that import finishes (torch_tpu._import_hooks; at
once if fbgemm_gpu is already imported). Registering them only then keeps `import fbgemm_gpu` safe with an fbgemm release whose kernel signatures differ from the
tested one: the dispatcher's signature check then raises here, and the kernels are left out with a warning,
instead of aborting the process while fbgemm's library loads. Each op is registered on its own: one refused op
does not take the others with it.
"""
import sys
import warnings

TESTED_FBGEMM = "1.8.0"
_MODULE = "fbgemm_gpu"


def register_kernels() -> bool:
    """Registers the tpu kernels of fbgemm's ops (idempotent); fbgemm_gpu must be imported. False (with a
    warning naming them) when the dispatcher refuses some."""
    from .. import _C

    if _MODULE not in sys.modules:
        raise RuntimeError("torch_tpu.torchrec.register_kernels: import fbgemm_gpu first (it defines the ops)")
    error = _C._register_fbgemm_kernels()
    if error:
        version = getattr(sys.modules.get(_MODULE), "__version__", "unknown")
        warnings.warn(f"torch_tpu: fbgemm_gpu {version} (tested: {TESTED_FBGEMM}): these ops get no tpu kernel "
                      f"(they raise NotImplementedError on tpu): {error}", RuntimeWarning, stacklevel=2)
        return False
    return True


def _registered(module) -> None:
    register_kernels()


def install() -> None:
    """Registers the kernels now if fbgemm_gpu is loaded, else when it is imported (idempotent)."""
    if _MODULE in sys.modules:
        register_kernels()
    else:
        from .._import_hooks import after_import
        after_import(_MODULE, _registered)
