"""Run a function right after a module is first imported (a post-import hook): torch.compile's registration
after torch._dynamo (compile/__init__.py), accelerate's adaptations (_integrations.py), the tpu kernels of
fbgemm's ops after fbgemm_gpu (torchrec/__init__.py).

`import torch` loads torch_tpu before those modules, and nothing should import them on its behalf. A finder
placed first on sys.meta_path answers only for the watched names: it asks the other finders for the real
spec and wraps that spec's loader, so the module is imported exactly as before and the callbacks run once
its code has run.
"""
import importlib.abc
import sys
import threading
import warnings

_callbacks: dict[str, list] = {}  # module name -> functions of the module, run once
_lock = threading.Lock()


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _callbacks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            original(module)
            with _lock:
                callbacks = _callbacks.pop(fullname, [])
                if not _callbacks and _finder in sys.meta_path:
                    sys.meta_path.remove(_finder)  # nothing left to watch
            for fn in callbacks:
                try:
                    fn(module)
                except Exception as exc:  # importing the module must not fail because of us
                    warnings.warn(f"torch_tpu: setting up {fullname} for tpu failed: {exc!r}", RuntimeWarning)

        # Wrapping the loader of this one spec only: other modules keep their loaders untouched.
        loader.exec_module = exec_module
        return spec


_finder = _Finder()


def after_import(name: str, fn) -> None:
    """fn(module) right after `name` is first imported (callers handle a module that is loaded already)."""
    with _lock:
        if fn not in _callbacks.setdefault(name, []):
            _callbacks[name].append(fn)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
