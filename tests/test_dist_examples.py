"""examples/ray_ddp.py (Ray actors training DDP over tpu_dist) end to end, when Ray is installed.

Ray is an optional example dependency (requirements-examples.txt, `make examples-dist`); without it
this test is skipped. The example itself checks that both ranks report the same losses and
parameters, that the loss decreases and that the losses are within 1e-5 of one CPU process training
the whole batch; it exits non-zero otherwise.
"""
import importlib.util
import os
import subprocess
import sys

import pytest

import dist_harness

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                reason="ray is not installed (optional: pip install -r requirements-examples.txt)")


def test_ray_ddp_example(mode):
    dist_harness.skip_unless_full(mode)  # one Ray start per mode is ~20 s here; make test-dist runs all
    script = os.path.join(dist_harness.ROOT, "examples", "ray_ddp.py")
    try:
        proc = subprocess.run([sys.executable, script, "--steps", "5"], capture_output=True, text=True,
                              timeout=150, env=dist_harness._env(mode, None), cwd=dist_harness.ROOT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"examples/ray_ddp.py timed out after 150 s:\n{(e.stdout or '')[-4000:]}\n{(e.stderr or '')[-4000:]}")
    assert proc.returncode == 0 and "ray_ddp ok" in proc.stdout, proc.stdout[-4000:] + proc.stderr[-4000:]
