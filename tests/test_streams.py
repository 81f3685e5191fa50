"""Streams and events (torch.tpu.Stream / Event and the device-generic torch.Stream /
torch.Event through the tpu DeviceGuard), with CUDA's semantics where they mean something:
work on one stream is ordered, wait_stream orders two, an event's query() is False until
the work recorded before it has finished, synchronize() waits for it, elapsed_time
measures the recorded device work."""
import pytest
import torch

from conftest import assert_close


def big_matmuls(x, n=6):
    """n chained matmuls with x: each depends on the last (a long serial chain of device work)."""
    y = x
    for _ in range(n):
        y = torch.tanh(y @ x)
    return y


def long_work_input(mode):
    """Input for 24 chained matmuls that keep the device busy for seconds on the 2-core CPU plugin (about 2 s),
    so that `query()` right after the launch is False however long the host is descheduled in between (a 0.2 s
    chain could finish during a stall of a loaded machine). Debug mode waits after every op: small input."""
    n = 200 if mode == "debug" else 1600
    return torch.randn(n, n, device="tpu") / (n ** 0.5 * 1.06)  # gain 1/1.06: values shrink slowly, never blow up


LONG = 24


def test_current_and_default_streams(mode):
    s = torch.tpu.current_stream()
    assert isinstance(s, torch.tpu.Stream) and isinstance(s, torch.Stream)
    assert s == torch.tpu.default_stream() and s.stream_id == 0
    side = torch.tpu.Stream()
    assert side != s and side.device_index == torch.tpu.current_device()
    with torch.tpu.stream(side):
        assert torch.tpu.current_stream() == side
    assert torch.tpu.current_stream() == s
    torch.tpu.set_stream(side)
    try:
        assert torch.tpu.current_stream() == side
        assert torch.accelerator.current_stream() == side  # the generic API sees the same
    finally:
        torch.tpu.set_stream(s)
    if torch.tpu.device_count() > 1:
        s1 = torch.tpu.Stream(device=1)
        assert s1.device_index == 1
        with torch.tpu.stream(s1):  # current on tpu:1, current device unchanged
            assert torch.tpu.current_device() == 0
            assert torch.tpu.current_stream(1) == s1
            assert torch.tpu.current_stream(0).stream_id == 0
        assert torch.tpu.default_stream(1).device_index == 1


def test_side_stream_results_after_wait_stream(mode):
    a = torch.randn(64, 64)
    x = a.to("tpu")
    side = torch.tpu.Stream()
    main = torch.tpu.current_stream()
    side.wait_stream(main)
    with torch.tpu.stream(side):
        y = torch.relu(x @ x) + 1
        z = y.sum(1)
    main.wait_stream(side)
    w = z * 2 - y[:, 0]
    y.record_stream(main)  # accepted: PJRT keeps buffers alive while programs read them
    ref_y = torch.relu(a @ a) + 1
    assert_close(w, ref_y.sum(1) * 2 - ref_y[:, 0], atol=1e-3, rtol=1e-4)
    side.synchronize()
    assert side.query()


def test_event_query_and_synchronize(mode):
    x = long_work_input(mode)
    torch.tpu.synchronize()
    done = torch.tpu.Event()
    assert done.query()  # never recorded: True, as CUDA
    y = big_matmuls(x, LONG)
    done.record()
    # Debug mode waits after every op; strict and fused launch and return.
    if mode != "debug":
        assert not done.query()
    done.synchronize()
    assert done.query()
    assert_close(y, big_matmuls(x.cpu(), LONG), atol=1e-4, rtol=1e-4)


def test_stream_query_waits_for_its_work(mode):
    x = long_work_input(mode)
    torch.tpu.synchronize()
    side = torch.tpu.Stream()
    with torch.tpu.stream(side):
        y = big_matmuls(x, LONG)
    if mode != "debug":
        assert not side.query()
    assert torch.tpu.current_stream().query()  # nothing was launched on the default stream
    side.synchronize()
    assert side.query()
    del y


def test_events_on_a_stream_are_ordered(mode):
    x = long_work_input(mode)
    torch.tpu.synchronize()
    side = torch.tpu.Stream()
    with torch.tpu.stream(side):
        first = big_matmuls(x, LONG)
        e1 = side.record_event()
        e2 = side.record_event()  # no work in between: done only when e1 is
    if mode != "debug":
        assert not e2.query()
    e2.synchronize()
    assert e1.query() and e2.query()
    # An event on another stream that waited for e1 completes after it too.
    other = torch.tpu.Stream()
    with torch.tpu.stream(other):
        second = big_matmuls(x, LONG)
    other.wait_event(side.record_event())
    e3 = other.record_event()
    e3.synchronize()
    assert side.query() and other.query()
    assert_close(second, first.cpu())


def test_elapsed_time_reflects_device_work(mode):
    x = torch.randn(1000, 1000, device="tpu") / 32
    torch.tpu.synchronize()
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    start.record()
    y = big_matmuls(x, 8)
    end.record()
    end.synchronize()
    busy = start.elapsed_time(end)
    e3, e4 = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    e3.record()
    e4.record()
    e4.synchronize()
    idle = e3.elapsed_time(e4)
    assert busy > 0 and idle >= 0
    assert busy > idle
    del y


def test_elapsed_time_needs_timing_and_records(mode):
    a, b = torch.tpu.Event(), torch.tpu.Event()
    a.record()
    b.record()
    b.synchronize()
    with pytest.raises(ValueError, match="enable_timing=True"):
        a.elapsed_time(b)
    c, d = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    c.record()
    with pytest.raises(ValueError, match="recorded"):
        c.elapsed_time(d)


def test_generic_torch_stream_and_event(mode):
    s = torch.Stream(device="tpu")
    assert s.device_type == torch.tpu.current_stream().device_type and s.stream_id != 0
    e = torch.Event(device="tpu", enable_timing=True)
    f = torch.Event(device="tpu", enable_timing=True)
    a = torch.randn(300, 300)
    x = a.to("tpu")
    with torch.tpu.stream(s):
        e.record(s)
        y = x @ x
        f.record(s)
    torch.tpu.current_stream().wait_event(f)
    f.synchronize()
    assert e.query() and f.query() and s.query()
    assert e.elapsed_time(f) >= 0
    s.synchronize()
    assert_close(y + 1, a @ a + 1, atol=1e-3, rtol=1e-4)
    with torch.Stream(device="tpu") as t:  # torch.Stream's own context manager
        assert torch.accelerator.current_stream() == t


def test_events_on_a_second_device(mode):
    if torch.tpu.device_count() < 2:
        pytest.skip("needs two tpu devices")
    a = torch.randn(500, 500)
    x = a.to("tpu:1") / 25
    torch.tpu.synchronize()
    s1 = torch.tpu.Stream(device=1)
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    start.record(s1)
    with torch.tpu.stream(s1):
        y = big_matmuls(x, 4)
    end.record(s1)
    end.synchronize()
    assert end.query() and start.elapsed_time(end) > 0
    assert y.device.index == 1
    assert_close(y, big_matmuls(a / 25, 4), atol=1e-4, rtol=1e-4)
    with pytest.raises(RuntimeError, match="device index"):
        start.record(torch.tpu.Stream(device=0))  # an event stays on the device it was recorded on


def test_mem_get_info(mode):
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total
    before = torch.tpu.mem_get_info(1 if torch.tpu.device_count() > 1 else 0)[1]
    assert before == total or torch.tpu.device_count() == 1 or before > 0


def test_non_blocking_download_is_work_of_its_stream(mode):
    """torch.distributed.checkpoint's pattern: a side stream waits for the current one, downloads
    non_blocking (into pinned memory) and synchronizes that stream alone before reading the host copy.
    The copy is work of the stream it was issued on, as on CUDA, so that synchronize covers it."""
    x = long_work_input(mode)
    y = big_matmuls(x, 4)  # still running on the default stream when the copy is issued
    side = torch.tpu.Stream()
    side.wait_stream(torch.tpu.current_stream())
    with torch.tpu.stream(side):
        host = y.to("cpu", non_blocking=True)
        copied = torch.tpu.Event()
        copied.record()
    assert host.is_pinned()
    side.synchronize()
    assert copied.query()
    assert torch.equal(host, y.cpu())
    # An event recorded after a non_blocking upload on the default stream covers it too.
    src = torch.randn(1600, 1600).pin_memory()
    z = torch.empty(1600, 1600, device="tpu")
    z.copy_(src, non_blocking=True)
    uploaded = torch.tpu.Event()
    uploaded.record()
    uploaded.synchronize()
    assert torch.equal(z.cpu(), src)
