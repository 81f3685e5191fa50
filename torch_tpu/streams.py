"""`torch.tpu.Stream` and `torch.tpu.Event`, shaped like `torch.cuda.Stream` / `torch.cuda.Event`.

Both subclass the device-generic `torch.Stream` / `torch.Event`, whose methods go through the
tpu DeviceGuard (csrc/aten/Streams.cpp). PJRT buffers are immutable and PJRT runs each program
after the producers of its inputs, so streams never need to order memory accesses; a stream is
an identity (0 = the default stream, 1..32 = the per-device pool, as CUDA's) that remembers the
programs launched while it was current. An event recorded on a stream completes when those
programs, the stream's earlier events and the events the stream was told to wait for have
completed; `elapsed_time` measures between the completion times of the recorded work.
"""
from __future__ import annotations

import torch

from . import _C


def _device_index(device) -> int:
    from .device import _index

    return _index(device)


class Stream(torch.Stream):
    """A tpu stream. `device` None (or negative) means the current device; `priority` is
    accepted for compatibility and ignored (PJRT has no stream priorities)."""

    def __new__(cls, device=None, priority=0, **kwargs):
        if "stream_id" in kwargs and "device_index" in kwargs:
            return super().__new__(cls, priority=priority, **kwargs)
        index = _device_index(None if isinstance(device, int) and device < 0 else device)
        return super().__new__(cls, device=torch.device("tpu", index), priority=priority)

    def wait_event(self, event) -> None:
        """Makes work submitted to this stream from now on wait for `event` (does not block)."""
        event.wait(self)

    def wait_stream(self, stream) -> None:
        """Makes work submitted to this stream from now on wait for the work submitted to `stream` so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        if event is None:
            event = Event()
        event.record(self)
        return event

    def query(self) -> bool:
        """True once every program launched on this stream has finished."""
        return super().query()

    def synchronize(self) -> None:
        """Waits for every program launched on this stream."""
        super().synchronize()

    def __eq__(self, o) -> bool:
        if isinstance(o, torch.Stream):
            return (self.stream_id, self.device_index, self.device_type) == (o.stream_id, o.device_index, o.device_type)
        return False

    def __hash__(self):
        return hash((self.stream_id, self.device_index, self.device_type))

    def __repr__(self):
        return f"<torch.tpu.Stream device=tpu:{self.device_index} stream_id={self.stream_id}>"


class Event(torch.Event):
    """A tpu event. `enable_timing=True` allows `elapsed_time`; `blocking` and `interprocess` are
    accepted for compatibility (waits always block the calling thread; no IPC handles)."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        event = super().__new__(cls, device="tpu", enable_timing=enable_timing, blocking=blocking,
                                interprocess=interprocess)
        event._enable_timing = bool(enable_timing)
        return event

    def record(self, stream=None) -> None:
        """Records the work launched on `stream` (default: the current stream) so far."""
        if stream is None:
            from .device import current_stream

            stream = current_stream()
        super().record(stream)

    def wait(self, stream=None) -> None:
        """Makes work submitted to `stream` (default: the current stream) from now on wait for this event."""
        if stream is None:
            from .device import current_stream

            stream = current_stream()
        super().wait(stream)

    def query(self) -> bool:
        """True once the recorded work has finished (True for an event never recorded)."""
        return super().query()

    def elapsed_time(self, end_event) -> float:
        """Milliseconds between the completion of this event's work and of `end_event`'s."""
        if not isinstance(end_event, Event):
            return super().elapsed_time(end_event)
        # torch.Event.elapsed_time accepts exactly torch.Event as `end_event`, not a subclass:
        # the same checks as c10::Event, then the guard's elapsedTime on the two events.
        if not (self._enable_timing and end_event._enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if self.event_id == 0 or end_event.event_id == 0:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        if not (self.query() and end_event.query()):
            raise RuntimeError("Both events must be completed before calculating elapsed time.")
        return _C._event_elapsed_time(self.event_id, end_event.event_id)

    def synchronize(self) -> None:
        """Waits for the recorded work."""
        super().synchronize()

    def __repr__(self):
        return f"<torch.tpu.Event device={self.device} recorded={self.event_id != 0}>"


def _wrap(stream_id: int, device_index: int) -> Stream:
    return Stream(stream_id=stream_id, device_index=device_index, device_type=_C._device_type_id)
