"""Dynamo's device interface for "tpu" (torch._dynamo.device_interface), after
CudaInterface / CpuInterface: device index, count and switching, synchronize, streams and
events (torch.tpu.Stream / torch.tpu.Event, streams.py), properties. torch ships a
TpuInterface for Google's TorchTPU package that checks for its JAX/Pallas stack;
registration.py replaces it with this one.
"""
from typing import Any

import torch
from torch._dynamo.device_interface import DeviceInterface

from .. import _C
from .. import device as tpu
from .. import streams

def _properties(device=None):
    return tpu.get_device_properties(device)


class TpuInterface(DeviceInterface):
    device = tpu.device
    Stream = streams.Stream
    Event = streams.Event

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
        return tpu.stream(stream)

    @staticmethod
    def current_stream() -> torch.Stream:
        return tpu.current_stream()

    @staticmethod
    def set_stream(stream) -> None:
        tpu.set_stream(stream)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        _C._set_stream(stream_id, device_index)

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return tpu.current_stream(device_idx).stream_id

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
