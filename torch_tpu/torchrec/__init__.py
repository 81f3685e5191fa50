"""TorchRec on tpu (docs/torchrec.md): torch_tpu's tpu kernels for the fbgemm ops TorchRec calls.

fbgemm_gpu defines its ops (schemas and CPU kernels) when it is imported; the tpu kernels
(csrc/aten/JaggedKernels.cpp) are registered right after that import finishes (torch_tpu._import_hooks; at
once if fbgemm_gpu is already imported). Registering them only then keeps `import fbgemm_gpu` safe with an
fbgemm release whose kernel signatures differ from the tested one: the dispatcher's signature check then
raises here, and the kernels are left out with a warning, instead of aborting the process while fbgemm's
library loads. Each op is registered on its own: one refused op
does not take the others with it.

torchrec's own ops for its `unfused_tpu` compute kernel (torchrec::embedding_pooled_lookup_offset, ...,
csrc/aten/ShardedEmbeddingKernels.cpp) are defined in Python by `torchrec.experimental.torch_tpu.pallas.ops`,
which torchrec imports when it builds a sharded table; the same hook registers their tpu kernels right after that
module runs. The sharded path's other pieces (docs/torchrec.md, "Sharding") are in `torch_tpu.torchrec.sharding`,
installed when torchrec's `torchrec.distributed.batched_embedding_kernel` is imported.
"""
import sys
import warnings

TESTED_FBGEMM = "1.8.0"
_MODULE = "fbgemm_gpu"
_TORCHREC_OPS = "torchrec.experimental.torch_tpu.pallas.ops"


def register_kernels() -> bool:
    """Registers the tpu kernels of fbgemm's ops (idempotent); fbgemm_gpu must be imported. False (with a
    warning naming them) when the dispatcher refuses some."""
    from .. import _C

    if _MODULE not in sys.modules:
        raise RuntimeError("torch_tpu.torchrec.register_kernels: import fbgemm_gpu first (it defines the ops)")
    error = _C._register_fbgemm_kernels()
    from . import sharding

    sharding.install_fbgemm_errors()
    if error:
        version = getattr(sys.modules.get(_MODULE), "__version__", "unknown")
        warnings.warn(f"torch_tpu: fbgemm_gpu {version} (tested: {TESTED_FBGEMM}): these ops get no tpu kernel "
                      f"(they raise NotImplementedError on tpu): {error}", RuntimeWarning, stacklevel=2)
        return False
    return True


def register_torchrec_kernels() -> bool:
    """Registers the tpu kernels of torchrec's unfused_tpu ops (idempotent); their module must be imported. False
    (with a warning naming them) when the dispatcher refuses some."""
    from .. import _C

    if _TORCHREC_OPS not in sys.modules:
        raise RuntimeError(f"torch_tpu.torchrec.register_torchrec_kernels: import {_TORCHREC_OPS} first")
    error = _C._register_torchrec_kernels()
    if error:
        warnings.warn(f"torch_tpu: these torchrec ops get no tpu kernel (they raise NotImplementedError on tpu): "
                      f"{error}", RuntimeWarning, stacklevel=2)
        return False
    return True


def _install_sharding() -> None:
    from . import sharding

    sharding.install()


_KERNELS = "torchrec.distributed.batched_embedding_kernel"
# module -> what runs right after it is imported (or at once, if it already is)
_AFTER_IMPORT = {_MODULE: register_kernels, _TORCHREC_OPS: register_torchrec_kernels, _KERNELS: _install_sharding}


def _run(module) -> None:
    _AFTER_IMPORT[module.__name__]()


def install() -> None:
    """Registers the kernels and the sharding pieces now for the modules already loaded, else when each is
    imported (idempotent)."""
    from .._import_hooks import after_import

    for name, fn in _AFTER_IMPORT.items():
        if name in sys.modules:
            fn()
        else:
            after_import(name, _run)
