"""TorchRec on tpu (docs/torchrec.md): torch_tpu's tpu kernels for the fbgemm ops TorchRec calls.

fbgemm_gpu defines its ops (schemas and CPU kernels) when it is imported; the tpu kernels
(csrc/aten/JaggedKernels.cpp) are registered right after that import finishes, by a meta-path hook that
`install()` puts in place when torch_tpu loads (or at once, if fbgemm_gpu is already imported). Registering
them only then keeps `import fbgemm_gpu` safe with an fbgemm release whose kernel signatures differ from the
tested one: the dispatcher's signature check then raises here, and the kernels are left out with a warning,
instead of aborting the process while fbgemm's library loads. Each op is registered on its own: one refused op
does not take the others with it.

torchrec's own ops for its `unfused_tpu` compute kernel (torchrec::embedding_pooled_lookup_offset, ...,
csrc/aten/ShardedEmbeddingKernels.cpp) are defined in Python by `torchrec.experimental.torch_tpu.pallas.ops`,
which torchrec imports when it builds a sharded table; the same hook registers their tpu kernels right after that
module runs. The sharded path's other pieces (docs/torchrec.md, "Sharding") are in `torch_tpu.torchrec.sharding`,
installed when torchrec's `torchrec.distributed.batched_embedding_kernel` is imported.
"""
import importlib.abc
import importlib.machinery
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
_AFTER_IMPORT = {_MODULE: register_kernels, _TORCHREC_OPS: register_torchrec_kernels, _KERNELS: _install_sharding}


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, name):
        self.loader = loader
        self.name = name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        _AFTER_IMPORT[self.name]()

    def __getattr__(self, name):  # get_source, get_resource_reader, ...: the file loader's own
        return getattr(self.loader, name)


class _FbgemmFinder(importlib.abc.MetaPathFinder):
    """Finds fbgemm_gpu (torchrec's ops module) with the other finders and registers the tpu kernels right after
    it runs."""

    def find_spec(self, name, path, target=None):
        if name not in _AFTER_IMPORT:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, name)
        return spec


def install() -> None:
    """Registers the kernels now if fbgemm_gpu is loaded, else when it is imported (idempotent)."""
    if _MODULE in sys.modules:
        register_kernels()
    if _TORCHREC_OPS in sys.modules:
        register_torchrec_kernels()
    if _KERNELS in sys.modules:
        _install_sharding()
    if not any(isinstance(f, _FbgemmFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _FbgemmFinder())
