"""Dynamo's device interface for "tpu" (torch._dynamo.device_interface), after
CudaInterface / CpuInterface: device index, count and switching, synchronize, streams,
events, properties. torch ships a TpuInterface for Google's TorchTPU package that checks
for its JAX/Pallas stack; registration.py replaces it with this one.

A tpu device runs one stream (PJRT orders programs per device; the device guard hands out
stream 0 only), so the stream API accepts that stream and nothing else, and an event is a
host timestamp taken once the device has finished the work queued before it.
"""
import contextlib
import time
from collections import namedtuple
from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface

from .. import device as tpu

_Properties = namedtuple("TpuProperties", ["name", "platform", "multi_processor_count", "total_memory"])


def _properties(device=None):
    p = tpu.get_device_properties(device)
    return _Properties(p["name"], p["platform"], 1, 0)


def _default_stream(device=None) -> torch.Stream:
    # The device guard's stream (torch.Stream(device="tpu") cannot make new ones).
    return torch.accelerator.current_stream(torch.device("tpu", tpu._index(device)))


def _check_stream(stream) -> None:
    if stream is None:
        return
    if stream.device_type != _default_stream().device_type or stream.stream_id != 0:
        raise RuntimeError(f"tpu runs one stream per device (stream 0); got {stream}")


class TpuInterface(DeviceInterface):
    device = tpu.device

    class Event(torch.Event):
        """Host-side timing event: record() waits for the device, then reads the clock."""

        def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
            return super().__new__(cls, device="tpu", enable_timing=enable_timing)

        def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
            self.time = None

        def record(self, stream=None) -> None:
            _check_stream(stream)
            tpu.synchronize()
            self.time = time.perf_counter()

        def query(self) -> bool:
            return True

        def synchronize(self) -> None:
            pass  # record() already waited

        def wait(self, stream=None) -> None:
            _check_stream(stream)

        def elapsed_time(self, end: "TpuInterface.Event") -> float:
            if self.time is None or end.time is None:
                raise RuntimeError("both events must be recorded before elapsed_time")
            return (end.time - self.time) * 1000.0

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            tpu.set_device(device)

        @staticmethod
        def current_device() -> int:
            return tpu.current_device()

        @staticmethod
        def get_device_properties(device=None) -> Any:
            return _properties(device)

    @staticmethod
    def current_device() -> int:
        return tpu.current_device()

    @staticmethod
    def set_device(device) -> None:
        tpu.set_device(device)

    @staticmethod
    def exchange_device(device: int) -> int:
        previous = tpu.current_device()
        if device != previous:
            tpu.set_device(device)
        return previous

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return TpuInterface.exchange_device(device) if device >= 0 else tpu.current_device()

    @staticmethod
    def device_count() -> int:
        return tpu.device_count()

    @staticmethod
    def is_available() -> bool:
        return tpu.is_available()

    @staticmethod
    def stream(stream) -> Any:
        _check_stream(stream)
        return contextlib.nullcontext()

    @staticmethod
    def current_stream() -> torch.Stream:
        return _default_stream()

    @staticmethod
    def set_stream(stream) -> None:
        _check_stream(stream)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        if stream_id != 0:
            raise RuntimeError(f"tpu runs one stream per device (stream 0); got stream {stream_id}")

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return 0

    @staticmethod
    def synchronize(device=None) -> None:
        tpu.synchronize(device)

    @staticmethod
    def get_compute_capability(device=None) -> str:
        return tpu.get_device_capability(device)["platform"]

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @classmethod
    def is_dtype_supported(cls, dtype: torch.dtype, including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def memory_allocated(device=None) -> int:
        return tpu.memory_allocated(device)

    @staticmethod
    def is_triton_capable(device=None) -> bool:
        return False
