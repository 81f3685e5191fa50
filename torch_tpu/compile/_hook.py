"""Run a function right after a module is first imported (a post-import hook).

A finder placed first on sys.meta_path answers only for the watched name: it asks
the other finders for the real spec and wraps its loader's exec_module, so the
module is imported exactly as before and the callback runs once it is complete.
"""
import importlib.abc
import importlib.machinery
import sys
import threading
import warnings

_callbacks = {}
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
                    fn()
                except Exception as exc:  # an import of torch._dynamo must not fail because of us
                    warnings.warn(f"torch_tpu: setting up torch.compile for tpu failed: {exc!r}", RuntimeWarning)

        # Wrapping the loader of this one spec only: other modules keep their loaders untouched.
        loader.exec_module = exec_module
        return spec


_finder = _Finder()


def after_import(name: str, fn) -> None:
    with _lock:
        _callbacks.setdefault(name, []).append(fn)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
