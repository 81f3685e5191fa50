"""torch_tpu: PyTorch on XLA devices (TPU, GPU, CPU) through PJRT, as device "tpu".

`import torch` loads this package through the `torch.backends` entry point, so
`torch.randn(3, device="tpu")` works without importing it explicitly.
"""
import atexit
import os
import sys
import warnings

from . import _plugins

__version__ = "0.1.0"

_registered = False
# The message of _torch_mismatch() once it found one (then nothing is registered).
_mismatch = None


def _torch_mismatch(torch_version: str, torch_abi: bool, built_version: str, built_abi: bool):
    """None when _C, compiled against torch `built_version` with CXX11 ABI `built_abi`, can load into
    torch `torch_version` / `torch_abi`; else why not and what to do. Versions are compared on
    major.minor.patch: the local label (+cpu, +cu130) of one release does not change its C++ ABI."""
    def base(v):
        return str(v).split("+", 1)[0]
    if base(torch_version) == base(built_version) and bool(torch_abi) == bool(built_abi):
        return None
    return (f"torch_tpu {__version__} was built against torch {built_version} (CXX11 ABI={int(built_abi)}), "
            f"but this Python has torch {torch_version} (CXX11 ABI={int(torch_abi)}); its extension (_C) is "
            "compiled against one torch's C++ API and cannot load into another. Either install the torch it "
            f"was built for (CPU build: pip install torch=={base(built_version)} --index-url "
            "https://download.pytorch.org/whl/cpu), or rebuild torch_tpu against this torch (in a checkout: "
            "pip install --no-build-isolation --no-deps --force-reinstall . , or make build). "
            "python -m torch_tpu.doctor shows both builds.")


def _check_torch() -> None:
    """Raises ImportError when the running torch is not the one _C was compiled against
    (torch_tpu/_build_info.py, written by tools/configure.py)."""
    global _mismatch
    try:
        from . import _build_info
    except ImportError:  # a checkout configured before build info existed: nothing to compare with
        return
    import torch
    _mismatch = _torch_mismatch(torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI,
                                _build_info.torch_version, _build_info.torch_cxx11_abi)
    if _mismatch:
        raise ImportError(_mismatch)


def _importing(name: str) -> bool:
    """Whether module `name` is being imported right now (its body is running)."""
    spec = getattr(sys.modules.get(name), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


def _register() -> None:
    global _registered
    if _registered:
        return
    # When torch_tpu is imported before torch (`python -m torch_tpu.cache`), this
    # import runs the entry point (_autoload) itself, which registers everything.
    import torch

    if _registered:
        return
    _check_torch()  # before _C: loading it into another torch fails on a symbol, or worse
    from . import _C  # loads the extension: allocator, guard, hooks, kernels
    from . import device as device_module

    _C._configure_plugins(_plugins.candidates())
    torch.utils.rename_privateuse1_backend("tpu")
    torch._register_device_module("tpu", device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
    # Frames inside these packages are not "the user's line" in debug-mode errors.
    _C._set_internal_dirs([os.path.dirname(torch.__file__) + os.sep, os.path.dirname(__file__) + os.sep])
    _init_eager_mode_from_env()
    # accelerate's default device and device_map memory (see _integrations.py): adapted when accelerate
    # is imported; starts nothing here.
    from . import _integrations
    _integrations.install()
    # TorchRec: the tpu kernels of fbgemm's jagged ops, registered once fbgemm_gpu is imported (torchrec/).
    from . import torchrec as _torchrec
    _torchrec.install()
    # torch.compile: backend "tpu", Dynamo's device interface, the default backend for tpu
    # graphs; registered once torch._dynamo is imported (compile/__init__.py).
    from . import compile as _compile
    _compile.install()
    # A torch.optim step on tpu parameters as one program in Strict mode (optim.py).
    from . import optim as _optim
    _optim.install()
    # torch.distributed backend "tpu_dist" for device "tpu" (distributed/__init__.py).
    from . import distributed as _distributed
    _distributed.register()
    # Compile cache entries still being written (on the cache's writer thread) land before exit.
    atexit.register(_C._compile_cache_drain)
    # Autograd's tpu device threads must finish starting before the interpreter
    # finalizes (see _settle_autograd_threads).
    atexit.register(_C._settle_autograd_threads)
    # Registered last, so it runs first: queued work and its device errors are
    # settled while everything else is still alive.
    atexit.register(_C._report_unsynchronized_errors)
    _registered = True


# --- eager modes (DESIGN.md §4) ---------------------------------------------
#
# strict (default): ops launch asynchronously; errors found on the device (an
#     out-of-range index) raise at the next synchronization (.cpu(), .item(),
#     torch.tpu.synchronize()).
# debug: waits after every op and checks it: non-finite outputs from finite
#     inputs (TORCH_TPU_DEBUG_NONFINITE=raise|warn|off), out-of-range indices
#     and device failures raise at the op, naming it and the Python line.
# fused: ops are deferred into one graph, run when a value is needed on the
#     host, on synchronize(), every 1000 ops, or on a mode change.


def available_eager_modes() -> list:
    """The eager modes this build implements."""
    return list(_C._available_eager_modes())


def _check_mode(mode) -> str:
    if not isinstance(mode, str):
        raise TypeError(f"torch_tpu: eager mode must be a str, got {type(mode).__name__}")
    if mode not in available_eager_modes():
        raise ValueError(
            f"torch_tpu: unknown eager mode {mode!r}; available modes: "
            + ", ".join(repr(m) for m in available_eager_modes()))
    return mode


def get_eager_mode() -> str:
    """The current eager mode: 'strict', 'debug' or 'fused'."""
    return _C._get_eager_mode()


def set_eager_mode(mode: str) -> None:
    """Selects the eager mode for the whole process ('strict', 'debug' or 'fused').

    Work launched under the old mode is synchronized first, so its pending
    errors are raised under the mode that launched it.
    """
    mode = _check_mode(mode)
    if mode != get_eager_mode():
        _C._synchronize()
        _C._set_eager_mode(mode)


class eager_mode:
    """`with torch_tpu.eager_mode("debug"):` runs the block in `mode`, then
    restores the previous mode (synchronizing at each switch). The name is
    checked when the object is made."""

    def __init__(self, mode: str):
        self.mode = _check_mode(mode)
        self.previous = []

    def __enter__(self) -> str:
        self.previous.append(get_eager_mode())
        set_eager_mode(self.mode)
        return self.mode

    def __exit__(self, *exc) -> bool:
        set_eager_mode(self.previous.pop())
        return False


def _init_eager_mode_from_env() -> None:
    """TORCH_TPU_EAGER_MODE=strict|debug|fused; TPU_LAUNCH_BLOCKING=1 means debug,
    TORCH_TPU_DEFER_AND_FUSE=1 fused."""
    name = os.environ.get("TORCH_TPU_EAGER_MODE", "").strip().lower()
    if not name and os.environ.get("TPU_LAUNCH_BLOCKING", "") not in ("", "0"):
        name = "debug"
    if not name and os.environ.get("TORCH_TPU_DEFER_AND_FUSE", "") not in ("", "0"):
        name = "fused"
    if not name:
        return
    try:
        _check_mode(name)
    except ValueError as exc:  # import torch must not raise: say so, run strict
        warnings.warn(f"{exc}; using 'strict'", RuntimeWarning)
        return
    _C._set_eager_mode(name)


def collect_env(integrations: bool = True) -> dict:
    """The report `python -m torch_tpu.doctor` prints, as a dict (see torch_tpu/doctor.py)."""
    from ._collect_env import collect_env as collect  # imported on use: it is not needed to run
    return collect(integrations)


def _autoload() -> None:
    """Entry point run inside `import torch`: must never raise."""
    try:
        _register()
    except Exception as exc:  # a broken install must not break `import torch`
        if _mismatch is None:
            warnings.warn(f"torch_tpu could not register device 'tpu': {exc}", RuntimeWarning)
        elif not _importing(__name__):
            # The entry point's call, after this module finished importing inside `import torch`: warn
            # (raising would make `import torch` itself fail), and forget the module, so that an explicit
            # `import torch_tpu` runs it again and raises the ImportError below.
            warnings.warn(f"torch_tpu did not register device 'tpu': {_mismatch}", RuntimeWarning, stacklevel=2)
            sys.modules.pop(__name__, None)
        # else: this module's own body is running; its last lines decide.


# Importing this module happens inside `import torch` (the entry point), so it must not raise
# there. Imported any other way, a torch it was not built for is an ImportError, except under
# `python -m torch_tpu.doctor`, which reports it.
_autoload()
if _mismatch and not _importing("torch") and sys.orig_argv[1:3] != ["-m", "torch_tpu.doctor"]:
    raise ImportError(_mismatch)
