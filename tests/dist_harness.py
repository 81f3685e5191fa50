"""Launches multiprocess tpu_dist scenarios (tests/dist_worker.py) with a hard time bound.

Each rank is its own `python tests/dist_worker.py` process; they meet through a FileStore in a
temporary folder (no ports to collide) unless the scenario sets up its own TCPStore. Every rank
must exit 0; on a failure or a timeout all ranks are killed and their output is shown.
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKER = os.path.join(HERE, "dist_worker.py")


def skip_unless_full(mode):
    """The heaviest multiprocess tests run in strict mode under `make test` (the distributed suite
    then takes ~2 minutes on a loaded 2-core machine) and in every mode under `make test-dist`
    (TORCH_TPU_DIST_ALL_MODES=1)."""
    import pytest
    if mode != "strict" and os.environ.get("TORCH_TPU_DIST_ALL_MODES", "0") in ("", "0"):
        pytest.skip("strict only under make test; make test-dist runs every mode")


def _env(mode, extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["TORCH_TPU_EAGER_MODE"] = mode
    env.pop("TORCH_TPU_CPU_FALLBACK", None)  # a test passes only when ops ran on tpu
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra or {})
    return env


def launch(scenario, world, mode, tmp_path, timeout=100, env=None, args=()):
    """Runs `scenario` on `world` ranks in eager mode `mode`; returns each rank's stdout."""
    init = f"file://{tmp_path}/store-{scenario}-{mode}-{time.monotonic_ns()}"
    procs = []
    for rank in range(world):
        cmd = [sys.executable, WORKER, scenario, str(rank), str(world), init, *map(str, args)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                      env=_env(mode, env), cwd=ROOT))
    return _collect(procs, scenario, timeout)


def _collect(procs, what, timeout):
    deadline = time.monotonic() + timeout
    outputs = [None] * len(procs)
    timed_out = False
    for i, p in enumerate(procs):
        try:
            outputs[i], _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            break
    if timed_out:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for i, p in enumerate(procs):
            out, _ = p.communicate()
            outputs[i] = (outputs[i] or "") + (out or "")
    failed = [i for i, p in enumerate(procs) if p.returncode != 0]
    if timed_out or failed:
        report = "\n".join(f"--- rank {i} (exit {p.returncode}) ---\n{outputs[i][-4000:]}"
                           for i, p in enumerate(procs))
        why = f"timed out after {timeout} s" if timed_out else f"ranks {failed} failed"
        raise AssertionError(f"{what}: {why}\n{report}")
    return outputs


def launch_commands(commands, mode, timeout=100, env=None):
    """Runs arbitrary commands (e.g. two torchrun node groups) in parallel with the same bound."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(mode, env),
                              cwd=ROOT) for c in commands]
    return _collect(procs, " ".join(commands[0][:4]), timeout)
