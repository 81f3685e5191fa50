"""tests/compile: torch.compile on tpu.

Fixtures of tests/conftest.py (`mode`, the CPU-fallback guard) apply here as pytest
collects every conftest.py from the rootdir down. Its helpers are imported by name as
`from conftest import ...`, and in this folder `conftest` is this module (pytest's
prepend import mode puts each conftest's folder first on sys.path), so they are
re-exported here from tests/conftest.py, loaded by path under another module name.
"""
import importlib.util
import os

import pytest
import torch

_spec = importlib.util.spec_from_file_location(
    "_tpu_tests_conftest", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conftest.py"))
_parent = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_parent)
assert_close = _parent.assert_close
to_tpu = _parent.to_tpu
nonfinite_ok = _parent.nonfinite_ok
EAGER_MODES = _parent.EAGER_MODES


def assert_within_cpu_error(got, want, exact, floor=1e-5, rtol=1e-5, msg=None):
    """got (tpu) against exact (CPU in float64): within floor plus 4x the error CPU float32 (want) makes."""
    assert got.device.type == "tpu" and got.shape == want.shape and got.dtype == want.dtype
    if not want.is_floating_point():
        assert torch.equal(got.cpu(), want)
        return
    tol = 4 * (want.double() - exact).abs().max().item() + floor
    torch.testing.assert_close(got.detach().cpu().double(), exact.detach(), atol=tol, rtol=rtol, msg=msg)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    # Each test compiles its own functions from scratch: no cached frames or guards
    # from a previous test (and its eager mode) are reused.
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
