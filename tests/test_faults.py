"""Faults (issue 26 item 4): what a failure on the device, in the compile cache's folder or from
another rank does, and that the process survives it with correct results afterwards.

- Device out of memory (an allocation of 2**50 bytes, beyond any device: fails at once): raises
  torch.OutOfMemoryError naming the bytes and the op (or the fused graph), in every eager mode,
  also in the middle of a fused graph, in a backward pass and in a compiled graph; after it the
  tensors are freed and new ops match CPU. A value the failed graph should have produced is never
  read back silently wrong.
- A device-side error (an out-of-range index) inside a fused graph, a replayed fused step and a
  replayed torch.compile program: raised at the next synchronization, naming the op, and later
  work is right. (torch_tpu has no fault-injection hooks: these are the errors a device can make.)
- A process killed while writing a compile cache entry (SIGXFSZ cuts the write at chosen bytes,
  SIGKILL at fixed delays into its writing) never leaves an entry that is read back; an entry cut off at any
  byte (what a non-atomic writer would leave) is never loaded; the next process is right.
- A full disk (RLIMIT_FSIZE, a tiny tmpfs) and a read-only folder degrade the persistent tier to
  the in-memory one with exactly one warning; the process keeps compiling and computing.
- tpu_dist: malformed fingerprints from another rank in the collective check, ranks that disagree
  on the check itself (TORCH_TPU_DIST_CHECK on one rank only, another fingerprint layout) and
  all_to_all splits the ranks disagree on: a clear error, never a crash.

Child processes are bounded by timeouts; the cache tests run no `mode` (the cache sits below the
eager modes), the device tests take the `mode` fixture.
"""
import functools
import json
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import time

import pytest
import torch
import torch.nn.functional as F
import torch_tpu
from torch_tpu import _C
from torch_tpu import cache as cache_cli

import dist_harness
from conftest import assert_close

DEV = "tpu"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIG = 2**50  # bytes: beyond any device and the host's address space, so the allocation fails at once
OOM = re.compile(rf"{BIG} bytes")
NAMED = re.compile(r"aten::fill_|fused graph|compiled graph")  # the op, or the graph it ran in
WARNING = "[torch_tpu] warning:"


def T(t):
    return t.to(DEV)


def fail_big(kept=None):
    """Writes a never-allocated 2**50-byte tensor: the device cannot allocate it."""
    big = torch.empty(BIG, dtype=torch.uint8, device=DEV)  # no device memory until written
    big.fill_(1)
    if kept is not None:
        kept.append(big)  # alive at the flush: a fused graph must materialise it
    return big


# ---- device out of memory -------------------------------------------------------------------
# tests/test_modes.py::test_allocation_failure_names_op_and_bytes: the error itself in strict and
# debug. Here: fused mode too, and what the process can do afterwards.


def test_out_of_memory_then_free_and_continue(mode):
    X = torch.randn(32, 32, generator=torch.Generator().manual_seed(0))
    x = T(X)
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    for attempt in range(2):  # the second failure behaves like the first
        with pytest.raises(torch.OutOfMemoryError, match=OOM) as info:
            big = fail_big()
            torch.tpu.synchronize()
        assert NAMED.search(str(info.value)), str(info.value)
    del info
    big = None
    assert torch.tpu.memory_allocated() == base  # nothing of the failed allocation is held
    # The process goes on: new tensors, new programs, downloads, all right.
    y = T(torch.ones(1000)) * 3
    assert_close(x @ x.t() + 1, X @ X.t() + 1, rtol=1e-5, atol=1e-4)
    assert_close(y.sum(), torch.tensor(3000.0))
    assert_close(F.softmax(x, dim=1).amax(0), F.softmax(X, dim=1).amax(0))
    del y
    assert torch.tpu.memory_allocated() == base


def test_out_of_memory_in_the_middle_of_a_graph(mode):
    # Fused mode records all three ops into one graph, which fails as a whole at the
    # synchronization; strict and debug raise at the fill. Either way the graph's inputs, a
    # parameter updated in place (a donated buffer in a fused graph) included, stay usable.
    X = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))
    x, w = T(X), T(torch.ones(8))
    torch.tpu.synchronize()
    with pytest.raises(torch.OutOfMemoryError, match=OOM) as info:
        before = (x * 2).sum(0)
        w.add_(1)  # in place: fused mode donates w's buffer to the graph
        big = fail_big()
        after = x.exp()
        torch.tpu.synchronize()
    assert NAMED.search(str(info.value)), str(info.value)
    del info
    big = before = after = None
    assert_close(x, X)
    w_now = w.cpu()
    assert w_now.tolist() in ([1.0] * 8, [2.0] * 8), w_now  # before or after the add_, never garbage
    assert_close(w * 3 + x.sum(0), w_now * 3 + X.sum(0))
    assert_close(x.exp().sum(0), X.exp().sum(0))


class _HugeInBackward(torch.autograd.Function):
    """Doubles in forward; its backward allocates 2**50 bytes (kept alive) before it returns."""
    kept = []

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        fail_big(_HugeInBackward.kept)
        return g * 2


@pytest.fixture(autouse=True)
def _drop_kept():
    yield
    _HugeInBackward.kept.clear()  # also when a test failed before it let go


def test_out_of_memory_in_backward_then_training_continues(mode):
    W = torch.randn(4, 3, generator=torch.Generator().manual_seed(2))
    w = T(W).requires_grad_()
    torch.tpu.synchronize()
    with pytest.raises(torch.OutOfMemoryError, match=OOM) as info:
        (_HugeInBackward.apply(w) ** 2).sum().backward()
        torch.tpu.synchronize()
    assert NAMED.search(str(info.value)), str(info.value)
    del info
    _HugeInBackward.kept.clear()
    w.grad = None
    # A plain training step afterwards: the gradient and the update match CPU.
    wc = W.clone().requires_grad_()
    for p in (w, wc):
        loss = (p.tanh() * 3).sum()
        loss.backward()
        with torch.no_grad():
            p -= 0.1 * p.grad
    assert_close(w.grad, wc.grad)
    assert_close(w.detach(), wc.detach())


@pytest.mark.parametrize("case", ["fresh_tensor", "gradient"])
def test_a_failed_fused_graph_never_reads_back_wrong_values(case):
    # Fused mode: ops recorded before the failing one never ran. Reading what they should have
    # produced must raise, or give the right value; never the zeros of never-written memory.
    X = torch.arange(4.0)
    x = T(X)
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("fused"):
        w = x.clone().requires_grad_()
        torch.tpu.synchronize()
        lost = None
        with pytest.raises(torch.OutOfMemoryError):
            if case == "fresh_tensor":
                lost, expected = x * 2 + 1, X * 2 + 1
                big = fail_big()
            else:
                expected = 8 * X  # d/dw (2w)^2
                (_HugeInBackward.apply(w) ** 2).sum().backward()
            torch.tpu.synchronize()
        if case == "gradient":
            lost = w.grad  # None is right too: the backward did not finish
        _HugeInBackward.kept.clear()
        big = None
        if lost is not None:
            try:
                got = lost.cpu()
            except RuntimeError:
                pass  # raising is right: its value was lost
            else:
                assert torch.equal(got, expected), f"read back {got}, expected {expected} or an error"
        torch.tpu.synchronize()


# ---- device-side errors inside fused graphs and replays --------------------------------------

X12 = torch.arange(12.0).reshape(3, 4)
GOOD, BAD = torch.tensor([0, 2]), torch.tensor([0, 3])  # 3 is out of range for dim 0 (size 3)


def test_index_error_inside_a_fused_graph_keeps_the_rest_of_it():
    # The out-of-range op is one of several in the graph: the graph runs, the error is raised at
    # the synchronization naming the op, and the graph's other results are right.
    x = T(X12)
    torch.tpu.synchronize()
    with torch_tpu.eager_mode("fused"):
        a = x * 5
        r = x[T(BAD)]
        b = a.sum(1) + x.amax(0).sum()
        with pytest.raises(IndexError, match=r"index out of range in aten::index\.Tensor.*synchronization"):
            torch.tpu.synchronize()
        del r
        assert_close(a, X12 * 5)
        assert_close(b, (X12 * 5).sum(1) + X12.amax(0).sum())
        assert_close(x[T(GOOD)].exp(), X12[GOOD].exp())


def test_index_error_in_a_replayed_fused_step():
    # The same step again and again is replayed without a trace (FusedRecording); a bad index in
    # one replayed step is reported like a traced one, and the next steps replay correctly.
    x = T(X12)
    torch.tpu.synchronize()

    def step(i):
        return (x[i] * 2 + 1).sum(0)

    def expected(i):
        return (X12[i] * 2 + 1).sum(0)

    with torch_tpu.eager_mode("fused"):
        for _ in range(3):
            assert_close(step(T(GOOD)), expected(GOOD))
        replays = _C._fused_stats()["eager_replays"]
        r = step(T(BAD))
        with pytest.raises(IndexError, match=r"index out of range in aten::index\.Tensor"):
            r.cpu()
        assert _C._fused_stats()["eager_replays"] == replays + 1  # the bad step was a replay
        for i in (torch.tensor([1, 2]), GOOD):
            assert_close(step(T(i)), expected(i))
        assert _C._fused_stats()["eager_replays"] == replays + 3


def test_index_error_in_a_replayed_compiled_graph(mode):
    # tests/compile/test_semantics.py: an error in a traced compiled graph. Here the graph is
    # replayed (FusedGraph::replay, no trace) when the bad index comes.
    torch._dynamo.reset()

    def f(x, i):
        return (x[i] * 2 + 1).sum(0)

    fc = torch.compile(f, backend="tpu")
    x = T(X12)
    for _ in range(3):
        assert_close(fc(x, T(GOOD)), f(X12, GOOD))
    replays = _C._fused_stats()["replays"]
    r = fc(x, T(BAD))
    assert _C._fused_stats()["replays"] == replays + 1
    with pytest.raises(IndexError, match=r"index out of range in aten::index\.Tensor"):
        r.cpu()
    del r
    for i in (torch.tensor([2, 1]), GOOD):
        assert_close(fc(x, T(i)), f(X12, i))
    assert_close(x.amax(1), X12.amax(1))  # eager work too


def test_out_of_memory_in_a_compiled_graph(mode):
    # The allocation fails when the compiled graph's program is launched.
    torch._dynamo.reset()

    def g(a, big):
        big.fill_(1)
        return a * 3 + 1

    gc = torch.compile(g, backend="tpu")
    A = torch.arange(6.0)
    a = T(A)
    big = torch.empty(BIG, dtype=torch.uint8, device=DEV)
    with pytest.raises(torch.OutOfMemoryError, match=OOM) as info:
        gc(a, big).cpu()
    assert NAMED.search(str(info.value)), str(info.value)
    del info, big
    small = torch.empty(10, dtype=torch.uint8, device=DEV)
    assert_close(gc(a, small), A * 3 + 1)
    assert_close(small, torch.ones(10, dtype=torch.uint8))
    assert_close(a.sin(), A.sin())


# ---- compile cache: killed writers, full disk, read-only folder ------------------------------

# `n` distinct programs and more (arange, mul, add, exp, sum at n sizes), then the disk stats.
CACHE_CHILD = r"""
import json, os, signal, sys
if os.environ.get("TEST_SIGXFSZ_KILLS"):
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python starts with it ignored
import torch
from torch_tpu import _C
n = int(sys.argv[1])
out = [(torch.arange(k + 1.0, device="tpu") * 0.5 + 1).exp().sum().item() for k in range(n)]
stats = torch.tpu.compile_cache_stats()
info = _C._cache_dir_inspect(stats["disk"]["directory"], True)
print("RESULT " + json.dumps({"result": out, "stats": stats, "dir": info}), flush=True)
"""


def cache_expected(n):
    return [(torch.arange(k + 1.0) * 0.5 + 1).exp().sum().item() for k in range(n)]


def cache_env(directory, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TORCH_TPU_CACHE") and k not in ("TORCH_TPU_LOG", "XLA_FLAGS", "TORCH_TPU_EAGER_MODE")}
    env["TORCH_TPU_CACHE_DIR"] = str(directory)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the only files a child writes are the cache's
    env.update({k: str(v) for k, v in extra.items()})
    return env


def parse(p):
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    assert p.returncode == 0 and lines, f"exit {p.returncode}; stderr:\n{p.stderr[-3000:]}"
    out = json.loads(lines[-1][len("RESULT "):])
    out["warnings"] = [l for l in p.stderr.splitlines() if l.startswith(WARNING)]
    out["stderr"] = p.stderr
    return out


def run_cache_child(directory, n, preexec_fn=None, **extra):
    p = subprocess.run([sys.executable, "-c", CACHE_CHILD, str(n)], env=cache_env(directory, **extra),
                       capture_output=True, text=True, timeout=240, preexec_fn=preexec_fn)
    return p


def check(out, n):
    assert out["result"] == pytest.approx(cache_expected(n), rel=1e-6)


def entry_names(directory):
    return sorted(f for f in os.listdir(directory) if f.endswith(".bin"))


def limit_file_size(nbytes):
    """preexec_fn: files may not grow beyond nbytes. The write that crosses the limit fails with
    EFBIG (a full disk, as the writer sees it), or, with TEST_SIGXFSZ_KILLS=1, the kernel kills
    the process with SIGXFSZ there (a writer killed mid-entry, at a chosen byte)."""
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return apply


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    """A folder with the entries of CACHE_CHILD 4 (and their count), copied by later tests."""
    directory = tmp_path_factory.mktemp("cold")
    out = parse(run_cache_child(directory, 4))
    check(out, 4)
    assert out["warnings"] == [] and out["stats"]["disk"]["writes"] == out["stats"]["compiles"] >= 8
    return directory, out["stats"]["compiles"]


def test_writer_killed_mid_entry_leaves_nothing_that_is_read_back(tmp_path):
    cache_dir = tmp_path / "cache"
    cuts = (1, 88, 2000)  # bytes written when killed: in the magic, right after the header, in the payload
    for cut in cuts:
        p = run_cache_child(cache_dir, 4, preexec_fn=limit_file_size(cut), TEST_SIGXFSZ_KILLS=1)
        assert p.returncode == -signal.SIGXFSZ, (p.returncode, p.stderr[-2000:])  # died in its first write
    info = _C._cache_dir_inspect(str(cache_dir), True)
    # Entries are written to a temporary file and renamed: each cut-off one is only a temporary file.
    assert info["entries"] == 0 and info["invalid_entries"] == 0 and entry_names(cache_dir) == []
    tmp = sorted(f for f in os.listdir(cache_dir) if f.startswith(".tmp-"))
    assert info["temporary_files"] == len(tmp) == len(cuts)
    assert sorted(os.path.getsize(cache_dir / f) for f in tmp) == list(cuts)
    # A fresh process: right results, nothing corrupt loaded or reported, no wait on the dead
    # writers' lock, valid entries for everything.
    out = parse(run_cache_child(cache_dir, 4))
    check(out, 4)
    disk = out["stats"]["disk"]
    assert disk["hits"] == 0 and disk["corrupt_entries"] == 0 and disk["lock_waits"] == 0
    assert disk["writes"] == out["stats"]["compiles"] and out["warnings"] == []
    assert out["dir"]["invalid_entries"] == 0 and out["dir"]["lock_files"] == 0
    assert out["dir"]["entries"] == disk["writes"]
    # The dead writers' temporary files are no entries; prune removes them once stale (an hour old).
    old = time.time() - 7200
    for f in tmp:
        os.utime(cache_dir / f, (old, old))
    assert cache_cli.main(["--dir", str(cache_dir), "prune", "--max-bytes", "10G"]) == 0
    assert not [f for f in os.listdir(cache_dir) if f.startswith(".tmp-")]


@pytest.mark.parametrize("delay", [0.0, 0.2, 0.45])
def test_writer_killed_while_writing_entries(delay, tmp_path):
    # SIGKILL `delay` s after its first entry appeared, while it compiles and writes the rest: where it
    # stands then depends on the machine, and every moment must leave only complete entries.
    cache_dir = tmp_path / "cache"
    p = subprocess.Popen([sys.executable, "-c", CACHE_CHILD, "40"], env=cache_env(cache_dir),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while p.poll() is None and time.monotonic() < deadline:  # writing has begun
            if cache_dir.exists() and any(f.endswith(".bin") for f in os.listdir(cache_dir)):
                break
            time.sleep(0.005)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
    finally:
        p.kill()
        p.communicate(timeout=60)
    assert p.returncode == -signal.SIGKILL, (delay, p.returncode)  # killed while it compiled and wrote
    info = _C._cache_dir_inspect(str(cache_dir), True)
    assert info["invalid_entries"] == 0, (delay, info)  # every entry name holds a complete entry
    out = parse(run_cache_child(cache_dir, 40))
    check(out, 40)
    disk = out["stats"]["disk"]
    assert disk["corrupt_entries"] == 0 and disk["lock_waits"] == 0 and out["warnings"] == [], (delay, out["stderr"])
    assert disk["hits"] == info["entries"], (delay, disk, info)  # every entry it left is loaded
    assert out["dir"]["invalid_entries"] == 0


def test_entry_cut_off_at_any_byte_is_never_loaded(cold, tmp_path):
    # What a writer without temporary file + rename would leave when killed: the entry's own
    # name holding its first bytes. Each entry is cut at another point; a temporary file of a
    # dead writer holding a complete entry is never an entry either.
    src, programs = cold
    cache_dir = tmp_path / "cache"
    shutil.copytree(src, cache_dir)
    names = entry_names(cache_dir)
    whole = {n: (cache_dir / n).read_bytes() for n in names}
    info_len = {n: struct.unpack("<I", b[12:16])[0] for n, b in whole.items()}
    cuts = [lambda b, i: 0, lambda b, i: 7, lambda b, i: 50, lambda b, i: 88, lambda b, i: 88 + i // 2,
            lambda b, i: 88 + i + 1, lambda b, i: len(b) // 2, lambda b, i: len(b) - 1]
    cut_names = names[:len(cuts)]
    for n, cut in zip(cut_names, cuts):
        (cache_dir / n).write_bytes(whole[n][:cut(whole[n], info_len[n])])
    (cache_dir / (".tmp-" + names[0][:16] + "-99999-0")).write_bytes(whole[names[0]])
    out = parse(run_cache_child(cache_dir, 4))
    check(out, 4)
    disk = out["stats"]["disk"]
    assert disk["corrupt_entries"] == len(cut_names) == out["stats"]["compiles"]
    assert disk["hits"] == programs - len(cut_names)
    assert len(out["warnings"]) == len(cut_names), out["warnings"]
    assert all("ignoring compile cache entry" in w for w in out["warnings"])
    assert out["dir"]["invalid_entries"] == 0 and out["dir"]["entries"] == programs  # all replaced


def test_full_disk_by_file_size_limit_degrades_with_one_warning(tmp_path):
    # Every write fails with EFBIG (RLIMIT_FSIZE, SIGXFSZ ignored): a disk with no room at all.
    cache_dir = tmp_path / "cache"
    out = parse(run_cache_child(cache_dir, 6, preexec_fn=limit_file_size(1000)))
    check(out, 6)  # every program compiled and ran: 6 sizes, several ops each
    disk = out["stats"]["disk"]
    assert disk["writable"] is False and disk["writes"] == 0 and out["stats"]["compiles"] >= 12
    assert len(out["warnings"]) == 1, out["warnings"]
    assert "not usable for writing" in out["warnings"][0] and "File too large" in out["warnings"][0]
    assert entry_names(cache_dir) == [] and os.listdir(cache_dir) == []  # no temporary file, no lock left


@functools.lru_cache(maxsize=None)
def mount_namespace_problem():
    """Why a private mount namespace (tmpfs, read-only bind mounts) is unavailable; "" when it works."""
    if shutil.which("unshare") is None:
        return "no unshare(1)"
    probe = f"/tmp/torch_tpu_faults_probe_{os.getpid()}"
    os.makedirs(probe, exist_ok=True)
    try:
        p = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=4k tmpfs {probe}"],
                           capture_output=True, text=True, timeout=30)
    finally:
        os.rmdir(probe)
    return "" if p.returncode == 0 else f"cannot mount in a private namespace: {p.stderr.strip()}"


def run_in_mount_namespace(cache_dir, mounts, runs, n):
    """CACHE_CHILD n, `runs` times one after the other, in a private mount namespace after `mounts`
    (gone with it: each run reports what it sees of the folder)."""
    work = cache_dir.parent
    (work / "child.py").write_text(CACHE_CHILD)
    script = " && ".join(mounts) + " && " + " ; ".join(
        f'"{sys.executable}" "{work}/child.py" {n} >"{work}/out{i}" 2>"{work}/err{i}"; echo $? >"{work}/rc{i}"'
        for i in range(runs))
    p = subprocess.run(["unshare", "-m", "sh", "-c", script], env=cache_env(cache_dir), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return [parse(subprocess.CompletedProcess([], int((work / f"rc{i}").read_text()), (work / f"out{i}").read_text(),
                                              (work / f"err{i}").read_text())) for i in range(runs)]


def test_disk_filling_up_degrades_with_one_warning(tmp_path):
    # A 16 KiB tmpfs: the first entries fit, then writes fail with ENOSPC. The entries written
    # stay valid and are read by the next process, which also warns once and keeps working.
    if mount_namespace_problem():
        pytest.skip(mount_namespace_problem())
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    first, second = run_in_mount_namespace(cache_dir, [f"mount -t tmpfs -o size=16k,mode=0755 tmpfs {cache_dir}"],
                                           2, 6)
    for out in (first, second):
        check(out, 6)
        assert out["stats"]["disk"]["writable"] is False
        assert len(out["warnings"]) == 1, out["warnings"]
        assert "not usable for writing" in out["warnings"][0] and "No space left on device" in out["warnings"][0]
        assert out["dir"]["invalid_entries"] == 0 and out["dir"]["temporary_files"] == 0
    written = first["stats"]["disk"]["writes"]
    assert 0 < written < first["stats"]["compiles"] and first["dir"]["entries"] == written
    assert second["stats"]["disk"]["hits"] == written and second["stats"]["disk"]["corrupt_entries"] == 0
    assert second["stats"]["compiles"] == first["stats"]["compiles"] - written


def test_read_only_folder_with_entries_degrades_with_one_warning(cold, tmp_path):
    # Its entries are still loaded; new programs stay in memory, with one warning.
    src, programs = cold
    cache_dir = tmp_path / "cache"
    shutil.copytree(src, cache_dir)
    before = {n: (cache_dir / n).read_bytes() for n in entry_names(cache_dir)}
    if os.geteuid() != 0:
        cache_dir.chmod(0o555)
        try:
            out = parse(run_cache_child(cache_dir, 6))
        finally:
            cache_dir.chmod(0o755)
        why = "Permission denied"
    else:  # permission bits do not stop root: a read-only bind mount does
        if mount_namespace_problem():
            pytest.skip("root, and " + mount_namespace_problem())
        (out,) = run_in_mount_namespace(cache_dir, [f"mount --bind -o ro {cache_dir} {cache_dir}"], 1, 6)
        why = "Read-only file system"
    check(out, 6)
    disk = out["stats"]["disk"]
    assert disk["hits"] == programs and out["stats"]["compiles"] > 0 and disk["writes"] == 0
    assert disk["writable"] is False
    assert len(out["warnings"]) == 1 and why in out["warnings"][0], out["warnings"]
    assert {n: (cache_dir / n).read_bytes() for n in entry_names(cache_dir)} == before


# ---- tpu_dist: malformed fingerprints from another rank --------------------------------------
# The decoder (csrc/distributed/Fingerprint.cpp, describe/mismatchMessage) is C++ only: it is fed
# through a real 2-process group. Rank 1 runs with TORCH_TPU_DIST_CHECK=0: its all_gather_into_tensor
# of int64 words is the same gloo all-gather as rank 0's fingerprint exchange, so rank 0 receives
# rank 1's words as rank 1's fingerprint (any bytes a faulty or foreign peer could send).
DIST_CHILD = r"""
import datetime, os, sys
case, rank, world, init = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if rank == 1 and case in ("garbage", "check_differs"):
    os.environ["TORCH_TPU_DIST_CHECK"] = "0"
import warnings
warnings.simplefilter("ignore")
import torch, torch.distributed as dist
import torch_tpu.distributed as td
if rank == 1 and case == "garbage":  # a faulty peer: claims the check at creation, then sends any words
    real_token = td._check_token
    td._check_token = lambda check, ext: real_token(True, ext)
if rank == 1 and case == "layout_differs":  # another build's fingerprint layout
    td._check_token = lambda check, ext: f"check=1 fingerprint_words={2 * ext.FINGERPRINT_WORDS}"
dev = torch.device("tpu", 0)
try:
    dist.init_process_group("cpu:gloo,tpu:tpu_dist", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=20))
    if case in ("check_differs", "layout_differs"):
        dist.all_reduce(torch.ones(4, device=dev))  # where a lazily created backend would raise
except RuntimeError as e:
    assert case in ("check_differs", "layout_differs"), e
    assert "disagree on the collective check" in str(e) and "rank 1: check=" in str(e), e
    print("clear error: " + str(e).splitlines()[0], flush=True)
    print(f"rank {rank} ok", flush=True)
    os._exit(0)
WORDS = 16
MARK = 0x74707564  # the valid-row marker, word 15
payloads = [
    [0] * WORDS,
    torch.randint(-2**62, 2**62, (WORDS,), generator=torch.Generator().manual_seed(1)).tolist(),
    [999, -5, 127, 2**40, -1, 2**62, 1, 2, 3, 4, 5, 6, -7, -2**63, 3, MARK],  # nonsense with the marker
    [-2**63, 2**63 - 1, -128, -1, -1, -3, -1, -1, -1, -1, -1, -1, 0, -2**63 + 5, 3, MARK],
    [1, 1, 100, 1, 4, 1, 4, -1, -1, -1, -1, -1, 0, 0, 1, MARK],  # all_reduce #1 of an unknown dtype
    [1, 1, 6, 1, 4, 1, 2**62, -1, -1, -1, -1, -1, 0, 0, 1, MARK],  # one dim of size 2**62
]

def send(words):
    out = torch.empty(world * len(words), dtype=torch.int64, device=dev)
    dist.all_gather_into_tensor(out, torch.tensor(words, dtype=torch.int64, device=dev))

def expect_clear_error(fn):
    try:
        fn()
    except RuntimeError as e:
        msg = str(e)
        mismatch = "tpu_dist" in msg and "rank 0: all_reduce" in msg and "rank 1: " in msg
        assert mismatch, msg
        assert "frame #" not in msg, msg
        print("clear error: " + msg.splitlines()[-1], flush=True)
    else:
        raise AssertionError("no error for a malformed fingerprint")

def done():  # the peer may be gone (see the tests): leave without a teardown that waits for it
    print(f"rank {rank} ok", flush=True)
    os._exit(0)

if case == "garbage":
    for words in payloads:
        if rank == 0:
            expect_clear_error(lambda: dist.all_reduce(torch.ones(4, device=dev)))
        else:
            send(words)
    # Afterwards: a new group, with the check on every rank, computes right.
    os.environ["TORCH_TPU_DIST_CHECK"] = "1"
    group = dist.new_group()
    t = torch.full((3,), float(rank + 1), device=dev)
    dist.all_reduce(t, group=group)
    assert t.cpu().tolist() == [float(sum(range(1, world + 1)))] * 3, t.cpu()
    t = torch.arange(4.0, device=dev) * (rank + 1)
    dist.all_reduce(t, group=group)
    assert t.cpu().tolist() == [0.0, 3.0, 6.0, 9.0], t.cpu()
    done()
elif case == "all_to_all":
    # Both ranks check. Rank 1 sends 4 elements to rank 0, which expects 3: each rank's splits are
    # consistent with its own tensors, and the fingerprint (dtype and count only, for uneven
    # splits) agrees.
    try:
        if rank == 0:
            dist.all_to_all_single(torch.empty(5, device=dev), torch.arange(5.0, device=dev), [2, 3], [2, 3])
        else:
            dist.all_to_all_single(torch.empty(4, device=dev), torch.arange(5.0, device=dev), [3, 1], [4, 1])
    except RuntimeError as e:
        assert "all_to_all_single" in str(e) and "frame #" not in str(e), e
        print("clear error: " + str(e).splitlines()[0], flush=True)
    done()
"""


def launch_dist(case, tmp_path, timeout=90):
    """(exit codes, outputs) of the 2 ranks; a rank still running after `timeout` s is killed."""
    init = f"file://{tmp_path}/store-{case}-{time.monotonic_ns()}"
    env = dist_harness._env("strict", None)
    procs = [subprocess.Popen([sys.executable, "-c", DIST_CHILD, case, str(rank), "2", init], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in range(2)]
    deadline = time.monotonic() + timeout
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "\n<killed: timed out>"
        outs.append(out)
    return [p.returncode for p in procs], outs


def report(codes, outs):
    return "\n".join(f"--- rank {r} (exit {c}) ---\n{o[-3000:]}" for r, (c, o) in enumerate(zip(codes, outs)))


def test_garbage_fingerprints_from_a_peer_give_a_clear_error(tmp_path):
    codes, outs = launch_dist("garbage", tmp_path)
    assert codes == [0, 0], report(codes, outs)
    assert outs[0].count("clear error:") == 6, report(codes, outs)
    assert "rank 1: <no collective>" in outs[0] and "unknown collective" in outs[0]
    assert all(f"rank {r} ok" in o for r, o in enumerate(outs))


@pytest.mark.parametrize("case", ["check_differs", "layout_differs"])
def test_ranks_that_disagree_on_the_check_get_a_clear_error_at_creation(case, tmp_path):
    # TORCH_TPU_DIST_CHECK=0 on one rank only, or another fingerprint layout: the first collective
    # would pair one rank's fingerprint exchange with another size (gloo aborts the process), so
    # the group's creation raises on every rank instead.
    codes, outs = launch_dist(case, tmp_path)
    assert codes == [0, 0], report(codes, outs)
    assert all("clear error:" in o and f"rank {r} ok" in o for r, o in enumerate(outs)), report(codes, outs)


def test_all_to_all_splits_the_ranks_disagree_on_give_a_clear_error(tmp_path):
    codes, outs = launch_dist("all_to_all", tmp_path)
    assert codes == [0, 0], report(codes, outs)
    assert any("clear error:" in o for o in outs), report(codes, outs)
