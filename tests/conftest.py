"""Shared fixtures: every test compares tpu against the same computation on CPU."""
import contextlib
import os

import pytest
import torch
import torch_tpu

# Eager modes under test (DESIGN.md §4); Fused joins this list when it lands.
# Tests take the `mode` fixture, so each runs once per mode, in that mode.
EAGER_MODES = ["strict", "debug", "fused"]


@pytest.fixture(params=EAGER_MODES)
def mode(request):
    with torch_tpu.eager_mode(request.param):
        yield request.param
        # Pending work (and any error found on the device) belongs to this test.
        torch.tpu.synchronize()


@pytest.fixture(autouse=True)
def _no_cpu_fallback(monkeypatch):
    # A test passes only when the op ran natively on tpu.
    monkeypatch.delenv("TORCH_TPU_CPU_FALLBACK", raising=False)


@contextlib.contextmanager
def nonfinite_ok():
    """For code that produces NaN/Inf from finite inputs on purpose (0/0 as on
    CPU): debug mode's non-finite check is off inside the block."""
    old = os.environ.get("TORCH_TPU_DEBUG_NONFINITE")
    os.environ["TORCH_TPU_DEBUG_NONFINITE"] = "off"
    try:
        yield
    finally:
        if old is None:
            del os.environ["TORCH_TPU_DEBUG_NONFINITE"]
        else:
            os.environ["TORCH_TPU_DEBUG_NONFINITE"] = old


def to_tpu(*tensors):
    return [t.to("tpu") if isinstance(t, torch.Tensor) else t for t in tensors]


def assert_close(actual, expected, **kwargs):
    """actual: tpu tensor (or nested), expected: CPU tensor; same dtype and shape."""
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, **kwargs)
        return
    if isinstance(expected, torch.Tensor):
        assert actual.device.type == "tpu", f"result is on {actual.device}, expected tpu"
        torch.testing.assert_close(actual.cpu(), expected, **kwargs)
    else:
        assert actual == pytest.approx(expected)
