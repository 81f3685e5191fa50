"""Shared fixtures: every test compares tpu against the same computation on CPU."""
import os

import pytest
import torch

# Eager modes under test. Debug and Fused join this list when they land
# (issue 4); tests take the `mode` fixture so they run in each of them.
EAGER_MODES = ["strict"]


@pytest.fixture(params=EAGER_MODES)
def mode(request):
    yield request.param
    torch.tpu.synchronize()


@pytest.fixture(autouse=True)
def _no_cpu_fallback(monkeypatch):
    # A test passes only when the op ran natively on tpu.
    monkeypatch.delenv("TORCH_TPU_CPU_FALLBACK", raising=False)


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
