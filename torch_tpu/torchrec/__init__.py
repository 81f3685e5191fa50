"""TorchRec on tpu (docs/torchrec.md): torch_tpu's tpu kernels for the fbgemm ops TorchRec calls.

fbgemm_gpu defines its ops (schemas and CPU kernels) when it is imported; the tpu kernels
(csrc/aten/JaggedKernels.cpp) are registered right after that import finishes, by a meta-path hook that
`install()` puts in place when torch_tpu loads (or at once, if fbgemm_gpu is already imported). Registering
them only then keeps `import fbgemm_gpu` safe with an fbgemm release whose kernel signatures differ from the
tested one: the dispatcher's signature check then raises here, and the kernels are left out with a warning,
instead of aborting the process while fbgemm's library loads. Each op is registered on its own: one refused op
does not take the others with it.
"""
import importlib.abc
import importlib.machinery
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


class _Loader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        register_kernels()

    def __getattr__(self, name):  # get_source, get_resource_reader, ...: the file loader's own
        return getattr(self.loader, name)


class _FbgemmFinder(importlib.abc.MetaPathFinder):
    """Finds fbgemm_gpu with the other finders and registers the tpu kernels right after it runs."""

    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Registers the kernels now if fbgemm_gpu is loaded, else when it is imported (idempotent)."""
    if _MODULE in sys.modules:
        register_kernels()
    if not any(isinstance(f, _FbgemmFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _FbgemmFinder())
