"""torch.compile for tpu tensors (DESIGN.md §4: the fourth client of the fused-graph machinery).

`torch.compile(fn, backend="tpu")` (and plain `torch.compile(fn)` on tpu inputs) runs
Dynamo → AOTAutograd → our kernels traced into one fused graph per FX graph → one
StableHLO module → the two compile-cache tiers. See backend.py.

Importing torch._dynamo costs about a second, and `import torch` loads this package
(the autoload entry point), so nothing here imports Dynamo: `install()` registers the
backend, the Dynamo device interface and the default-backend choice right after
torch._dynamo is first imported (torch_tpu._import_hooks), or at once when it
already is.
"""
import sys

_installed = False


def install() -> None:
    """Called by torch_tpu._register; cheap, imports nothing heavy."""
    global _installed
    if _installed:
        return
    _installed = True
    if "torch._dynamo" in sys.modules and hasattr(sys.modules["torch._dynamo"], "optimize"):
        _on_dynamo_imported()
    else:
        from .._import_hooks import after_import
        after_import("torch._dynamo", _on_dynamo_imported)


def _on_dynamo_imported(module=None) -> None:
    from . import registration
    registration.register_all()
