"""`torch.tpu`: the device module, registered under the name "tpu"."""
from typing import Any, Dict, Optional, Union

import torch

from . import _C

_DeviceLike = Union[int, str, torch.device, None]


def _index(device: _DeviceLike) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "tpu":
        raise ValueError(f"expected a tpu device, got {device}")
    return current_device() if device.index is None else device.index


def is_available() -> bool:
    return _C._is_available()


def is_initialized() -> bool:
    return _C._is_available()


def _lazy_init() -> None:
    _C._init()


def init() -> None:
    _C._init()


def device_count() -> int:
    return _C._device_count()


def current_device() -> int:
    return _C._current_device()


def set_device(device: _DeviceLike) -> None:
    _C._set_device(_index(device))


class device:
    """Context manager that makes `device` the current tpu device."""

    def __init__(self, device: _DeviceLike):
        self.idx = _index(device)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx != self.prev:
            set_device(self.idx)

    def __exit__(self, *exc: Any):
        if self.prev != self.idx:
            set_device(self.prev)
        return False


def synchronize(device: _DeviceLike = None) -> None:
    """Waits for every program launched on tpu (on every device, which includes `device`'s)."""
    _C._synchronize()


# --- streams and events (torch_tpu/streams.py) ----------------------------

from .streams import Event, Stream  # noqa: E402


def current_stream(device: _DeviceLike = None) -> Stream:
    """This thread's current stream on `device` (default: the current device)."""
    index = _index(device)
    return streams._wrap(_C._current_stream(index), index)


def default_stream(device: _DeviceLike = None) -> Stream:
    return streams._wrap(0, _index(device))


def set_stream(stream: Optional[torch.Stream]) -> None:
    """Makes `stream` the current stream of its device (the current device is unchanged)."""
    if stream is None:
        return
    if stream.device_type != _C._device_type_id:
        raise ValueError(f"expected a tpu stream, got {stream}")
    _C._set_stream(stream.stream_id, stream.device_index)


class StreamContext:
    """`with torch.tpu.stream(s):` makes `s` current on its device for the block, as torch.cuda.StreamContext."""

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = stream
        self.prev = None

    def __enter__(self):
        if self.stream is None:
            return None
        self.prev = current_stream(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc: Any):
        if self.stream is not None:
            set_stream(self.prev)
        return False


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    return StreamContext(stream)


from . import streams  # noqa: E402


def get_device_name(device: _DeviceLike = None) -> str:
    """The platform really running the ops, e.g. 'cpu (XLA:CPU via PJRT, plugin cpu)'."""
    return _C._device_description()


def get_device_capability(device: _DeviceLike = None) -> Dict[str, Any]:
    return {"platform": _C._platform_name(), "platform_version": _C._platform_version()}


class DeviceProperties:
    """What torch.tpu.get_device_properties returns: attributes, as torch.cuda's properties object has
    (`props.name`, `props.total_memory`, `props.multi_processor_count`, which libraries such as
    TorchTitan's memory monitor read), and the same fields by key (`props["name"]`)."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __getitem__(self, key):
        return self.__dict__[key]

    def keys(self):
        return self.__dict__.keys()

    def __repr__(self):
        return "TpuDeviceProperties(" + ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items()) + ")"


def get_device_properties(device: _DeviceLike = None) -> DeviceProperties:
    major, minor = _C._pjrt_api_version()
    return DeviceProperties(
        name=get_device_name(device),
        platform=_C._platform_name(),
        platform_version=_C._platform_version(),
        plugin=_C._plugin_path(),
        pjrt_api_version=f"{major}.{minor}",
        total_memory=mem_get_info(device)[1],  # bytes, as mem_get_info's total
        # One PJRT device is one core of the program (XLA:CPU's threads serve all devices).
        multi_processor_count=1,
    )


# --- random numbers -------------------------------------------------------

def _generator(device: _DeviceLike = None) -> torch.Generator:
    return _C._default_generator(_index(device))


def _is_in_bad_fork() -> bool:
    """torch.manual_seed seeds tpu only when the device module has this (and manual_seed_all)."""
    return False


def manual_seed(seed: int) -> None:
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for i in range(max(device_count(), 1)):
        _C._default_generator(i).manual_seed(int(seed))


def seed() -> None:
    _generator().seed()


def seed_all() -> None:
    for i in range(max(device_count(), 1)):
        _C._default_generator(i).seed()


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device: _DeviceLike = None) -> torch.Tensor:
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = None) -> None:
    _generator(device).set_state(new_state)


def get_rng_state_all():
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(states) -> None:
    for i, state in enumerate(states):
        set_rng_state(state, i)


# --- autocast -------------------------------------------------------------

def get_amp_supported_dtype():
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


# --- memory ---------------------------------------------------------------

def memory_stats(device: _DeviceLike = None) -> Dict[str, Any]:
    raw = _C._memory_stats(_index(device))
    flat: Dict[str, Any] = {}
    for name, values in raw.items():
        for kind, value in values.items():
            flat[f"{name}.all.{kind}"] = value
    return flat


def memory_allocated(device: _DeviceLike = None) -> int:
    return _C._memory_stats(_index(device))["allocated_bytes"]["current"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    return _C._memory_stats(_index(device))["allocated_bytes"]["peak"]


def memory_reserved(device: _DeviceLike = None) -> int:
    return _C._memory_stats(_index(device))["reserved_bytes"]["current"]


def max_memory_reserved(device: _DeviceLike = None) -> int:
    return _C._memory_stats(_index(device))["reserved_bytes"]["peak"]


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    _C._reset_peak_memory_stats(_index(device))


def mem_get_info(device: _DeviceLike = None):
    """(free, total) bytes of `device`. From PJRT_Device_MemoryStats where the plugin reports a
    limit; the XLA CPU plugin does not, and its devices live in host memory: then total is the
    host's physical memory and free is min(available host memory, total - bytes tpu holds there)."""
    return tuple(_C._mem_get_info(_index(device)))


def empty_cache() -> None:
    """Device buffers are freed as soon as no tensor holds them. On the CPU plugins, the large blocks kept
    mapped for reuse (TORCH_TPU_HOST_MALLOC=cache, the default) are given back to the system."""
    _C._host_block_cache_trim()


# --- executable cache -----------------------------------------------------

def executor_stats() -> Dict[str, Any]:
    """Ops run, executable cache hits/misses and compile seconds of this process."""
    return _C._executor_stats()


def reset_executor_stats() -> None:
    _C._reset_executor_stats()


# --- compile cache --------------------------------------------------------

def compile_cache_stats() -> Dict[str, Any]:
    """Hits and misses of both compile cache tiers, compiles, and the directory's size.

    `memory`: the in-process executable cache (hits, misses, entries). `disk`: the persistent
    directory (TORCH_TPU_CACHE_DIR): hits, misses, writes, evictions, corrupt entries seen,
    bytes and entries now on disk. `compiles` / `compile_seconds`: programs XLA compiled.
    """
    return _C._compile_cache_stats(True)


def reset_compile_cache_stats() -> None:
    _C._reset_compile_cache_stats()


def clear_compile_cache(persistent: bool = False) -> None:
    """Drops the in-memory executables; with persistent=True also every entry of the cache directory."""
    _C._clear_compile_cache(bool(persistent))


from .precision import precision  # noqa: E402,F401  torch.tpu.precision("medium"|"high"|"highest")
