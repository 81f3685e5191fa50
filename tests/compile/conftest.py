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


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    # Each test compiles its own functions from scratch: no cached frames or guards
    # from a previous test (and its eager mode) are reused.
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
