"""The persistent compile cache, across processes: each test runs small programs in fresh Python
processes on a temporary TORCH_TPU_CACHE_DIR and compares their results with CPU PyTorch.

These tests do not take the `mode` fixture: the cache sits below the eager modes (it stores the
programs whatever asked for them) and every test here starts processes of its own.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

import torch_tpu
from torch_tpu import _C, _plugins
from torch_tpu import cache as cache_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A handful of distinct programs (each op is one program in Strict mode).
CHILD = r"""
import json, os, sys, time
import torch
barrier = os.environ.get("TEST_BARRIER")  # "folder:count": start computing together
if barrier:
    folder, count = barrier.rsplit(":", 1)
    open(os.path.join(folder, "ready-%d" % os.getpid()), "w").close()
    while len([f for f in os.listdir(folder) if f.startswith("ready-")]) < int(count):
        time.sleep(0.002)
x = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("tpu")
y = ((x * 0.5 + 1).exp().sum(dim=0) - x.t().matmul(x).amax(dim=1)).neg()
print("RESULT " + json.dumps({"result": y.cpu().tolist(), "stats": torch.tpu.compile_cache_stats()}), flush=True)
"""

WARNING = "[torch_tpu] warning:"


def expected():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    return ((x * 0.5 + 1).exp().sum(dim=0) - x.t().matmul(x).amax(dim=1)).neg().tolist()


def child_env(directory, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TORCH_TPU_CACHE") and k not in ("TORCH_TPU_LOG", "XLA_FLAGS", "TEST_BARRIER")}
    env["TORCH_TPU_CACHE_DIR"] = str(directory)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def parse(stdout, stderr):
    lines = [l for l in stdout.splitlines() if l.startswith("RESULT ")]
    assert lines, f"no result; stderr:\n{stderr[-3000:]}"
    out = json.loads(lines[-1][len("RESULT "):])
    out["stderr"] = stderr
    return out


def run_child(directory, **extra):
    p = subprocess.run([sys.executable, "-c", CHILD], env=child_env(directory, **extra), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return parse(p.stdout, p.stderr)


def start_child(directory, **extra):
    return subprocess.Popen([sys.executable, "-c", CHILD], env=child_env(directory, **extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def check_result(out):
    torch.testing.assert_close(torch.tensor(out["result"]), torch.tensor(expected()))


def entries(directory):
    return sorted(f for f in os.listdir(directory) if f.endswith(".bin"))


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    """One cold run (TORCH_TPU_LOG=cache) into a directory that later tests copy."""
    directory = tmp_path_factory.mktemp("cold")
    out = run_child(directory, TORCH_TPU_LOG="cache")
    out["dir"] = str(directory)
    return out


def copy_of(cold, tmp_path, name="cache"):
    target = tmp_path / name
    shutil.copytree(cold["dir"], target)
    return target


def test_cold_run_compiles_writes_and_logs_misses(cold):
    check_result(cold)
    s = cold["stats"]
    assert s["compiles"] >= 6
    assert s["disk"]["misses"] == s["compiles"] == s["disk"]["writes"]
    assert s["memory"]["misses"] == s["compiles"] + s["disk"]["hits"]
    assert s["disk"]["entries"] == len(entries(cold["dir"])) == s["compiles"]
    assert s["disk"]["bytes"] > 0 and s["disk"]["corrupt_entries"] == 0
    assert WARNING not in cold["stderr"]
    # TORCH_TPU_LOG=cache: one line per in-memory miss, naming the op.
    misses = [l for l in cold["stderr"].splitlines() if "cache: memory miss" in l]
    assert len(misses) == s["memory"]["misses"]
    assert sum("disk miss, compiled" in l for l in misses) == s["compiles"]
    assert any("memory miss aten::" in l for l in misses) and any("memory miss amax" in l for l in misses), misses


def test_warm_run_loads_everything_and_compiles_nothing(cold, tmp_path):
    warm_dir = copy_of(cold, tmp_path)
    out = run_child(warm_dir)
    check_result(out)
    s = out["stats"]
    assert s["compiles"] == 0 and s["compile_seconds"] == 0
    assert s["disk"]["hits"] == s["memory"]["misses"] == cold["stats"]["memory"]["misses"]
    assert s["disk"]["misses"] == 0 and s["disk"]["writes"] == 0
    assert WARNING not in out["stderr"]


def test_memory_tier_is_bounded_and_reloads_what_it_dropped(cold, tmp_path):
    # Loaded programs hold memory mappings (XLA:CPU: several each); an unbounded in-memory
    # tier crashed long OpInfo runs at vm.max_map_count. With a bound of 2, the run keeps at
    # most 2 loaded, evicts the rest, and results stay exact.
    out = run_child(copy_of(cold, tmp_path), TORCH_TPU_MEMORY_CACHE_MAX=2)
    check_result(out)
    s = out["stats"]
    assert s["memory"]["entries"] <= 2
    assert s["memory"]["evictions"] >= cold["stats"]["memory"]["misses"] - 2
    assert s["compiles"] == 0  # dropped programs come back from the directory


def test_a_different_plugin_never_reuses_an_entry(cold, tmp_path):
    cache_dir = copy_of(cold, tmp_path)
    # A second CPU plugin (another XLA build: PJRT API 0.115 instead of 0.81) when installed;
    # else other XLA_FLAGS, which are part of the key as well.
    other = _plugins._package_file("lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so")
    extra = {"TORCH_TPU_PJRT_PLUGIN": other} if other else {"XLA_FLAGS": "--xla_backend_optimization_level=2"}
    out = run_child(cache_dir, **extra)
    check_result(out)
    s = out["stats"]
    assert s["compiles"] == cold["stats"]["compiles"]  # nothing of the other build reused
    assert s["disk"]["hits"] == cold["stats"]["disk"]["hits"]  # only its own duplicates
    assert len(entries(cache_dir)) == 2 * len(entries(cold["dir"]))


def test_bad_entries_are_recompiled_replaced_and_reported(cold, tmp_path):
    cache_dir = copy_of(cold, tmp_path)
    names = entries(cache_dir)
    assert len(names) >= 6
    paths = [os.path.join(cache_dir, n) for n in names]
    good = [open(p, "rb").read() for p in paths]
    with open(paths[0], "wb") as f:  # truncated
        f.write(good[0][: len(good[0]) // 2])
    flipped = bytearray(good[1])  # one bit of the payload
    flipped[len(flipped) // 2 + 50] ^= 0x10
    with open(paths[1], "wb") as f:
        f.write(flipped)
    with open(paths[2], "wb") as f:  # wrong header
        f.write(b"XXXXXXXX" + good[2][8:])
    open(paths[3], "wb").close()  # zero length
    with open(paths[4], "wb") as f:  # another program's (valid) entry under this name
        f.write(good[5])
    os.remove(paths[5])  # unreadable: not a file
    os.mkdir(paths[5])
    out = run_child(cache_dir)
    check_result(out)
    s = out["stats"]
    assert s["disk"]["corrupt_entries"] == 6
    assert s["compiles"] == 6
    warnings = [l for l in out["stderr"].splitlines() if l.startswith(WARNING)]
    assert len(warnings) == 6, warnings
    assert all("ignoring compile cache entry" in w and "recompiling" in w for w in warnings)
    # Everything was replaced by valid entries.
    info = _C._cache_dir_inspect(str(cache_dir), True)
    assert info["invalid_entries"] == 0 and info["entries"] == len(names)
    assert info["temporary_files"] == 0


def test_unwritable_directory_degrades_to_memory_with_one_warning(tmp_path):
    if os.geteuid() != 0:
        cache_dir = tmp_path / "ro"
        cache_dir.mkdir()
        cache_dir.chmod(0o555)
    else:  # permission bits do not stop root: a path below a regular file cannot be created
        (tmp_path / "file").write_text("x")
        cache_dir = tmp_path / "file" / "cache"
    try:
        out = run_child(cache_dir)
    finally:
        if os.geteuid() != 0:
            cache_dir.chmod(0o755)
    check_result(out)
    s = out["stats"]
    assert s["disk"]["writable"] is False and s["disk"]["writes"] == 0
    assert s["compiles"] >= 6
    warnings = [l for l in out["stderr"].splitlines() if l.startswith(WARNING)]
    assert len(warnings) == 1 and "not usable for writing" in warnings[0], warnings


def test_racing_processes_compile_once_and_leave_valid_entries(cold, tmp_path):
    cache_dir, barrier = tmp_path / "shared", tmp_path / "barrier"
    barrier.mkdir()
    n = 3
    procs = [start_child(cache_dir, TEST_BARRIER=f"{barrier}:{n}") for _ in range(n)]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr[-3000:]
        outs.append(parse(stdout, stderr))
    for out in outs:
        check_result(out)
        assert WARNING not in out["stderr"]
    # Each program was compiled by exactly one of the processes; the others loaded it.
    assert sum(o["stats"]["compiles"] for o in outs) == cold["stats"]["compiles"]
    info = _C._cache_dir_inspect(str(cache_dir), True)
    assert info["entries"] == len(entries(cold["dir"]))
    assert info["invalid_entries"] == 0 and info["temporary_files"] == 0 and info["lock_files"] == 0


def test_eviction_keeps_the_directory_within_the_bound(cold, tmp_path):
    total = sum(os.path.getsize(os.path.join(cold["dir"], n)) for n in entries(cold["dir"]))
    bound = total // 3
    cache_dir = tmp_path / "small"
    out = run_child(cache_dir, TORCH_TPU_CACHE_MAX_BYTES=bound)
    check_result(out)
    assert out["stats"]["disk"]["evictions"] > 0
    info = _C._cache_dir_inspect(str(cache_dir), True)
    assert 0 < info["bytes"] <= bound and info["invalid_entries"] == 0


def test_cli_warm_stats_prune_clear(tmp_path, capfd):
    script = tmp_path / "program.py"
    script.write_text(CHILD)
    cache_dir = tmp_path / "cli"
    env = child_env(cache_dir)
    old_pythonpath = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    try:
        assert cache_cli.main(["--dir", str(cache_dir), "warm", str(script)]) == 0
    finally:
        if old_pythonpath is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old_pythonpath
    out = capfd.readouterr().out
    check_result(parse(out, ""))
    n = len(entries(cache_dir))
    assert n >= 6 and f"+{n} entries" in out

    assert cache_cli.main(["--dir", str(cache_dir), "stats", "--verify"]) == 0
    out = capfd.readouterr().out
    assert f"entries:          {n}" in out and "platform cpu" in out and torch_tpu.__version__ in out

    sizes = sorted(os.path.getsize(os.path.join(cache_dir, e)) for e in entries(cache_dir))
    keep = sum(sizes[:2])
    assert cache_cli.main(["--dir", str(cache_dir), "prune", "--max-bytes", str(keep)]) == 0
    out = capfd.readouterr().out
    remaining = sum(os.path.getsize(os.path.join(cache_dir, e)) for e in entries(cache_dir))
    assert 0 < len(entries(cache_dir)) < n and remaining <= keep and "removed" in out

    assert cache_cli.main(["--dir", str(cache_dir), "clear"]) == 0
    assert entries(cache_dir) == []
    with pytest.raises(SystemExit):
        cache_cli.main(["--dir", str(cache_dir), "prune", "--max-bytes", "lots"])


def test_python_api_in_this_process():
    assert _C._compile_cache_config()["torch_tpu_version"] == torch_tpu.__version__
    stats = torch.tpu.compile_cache_stats()
    for tier in ("memory", "disk"):
        assert {"hits", "misses"} <= set(stats[tier])
    assert {"bytes", "entries", "evictions", "corrupt_entries", "directory", "enabled"} <= set(stats["disk"])
    assert {"compiles", "compile_seconds"} <= set(stats)
    x = torch.arange(5.0, device="tpu")
    (x * 3).cpu()
    assert torch.tpu.executor_stats()["cached_executables"] > 0
    torch.tpu.clear_compile_cache()  # the in-memory tier only
    assert torch.tpu.executor_stats()["cached_executables"] == 0
    torch.testing.assert_close((x * 3).cpu(), torch.arange(5.0) * 3)
