"""Pinned host memory, non_blocking copies, pickling / torch.save, and layouts tpu refuses.

Every test compares with the same data on CPU PyTorch (or CUDA's documented behaviour) and runs in
each eager mode (the `mode` fixture)."""
import copy
import io
import os
import pickle
import subprocess
import sys
import warnings

import pytest
import torch
import torch_tpu

from conftest import assert_close


def host_stats():
    return torch_tpu._C._host_memory_stats()


# ---------------------------------------------------------------------------------------------
# Pinned memory


def test_pin_memory(mode):
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and not t.is_pinned()
    assert p.data_ptr() != t.data_ptr()
    assert p.data_ptr() % 4096 == 0  # page-aligned blocks
    torch.testing.assert_close(p, t)
    # Any address inside a live block answers, as with cudaHostAlloc'd memory.
    assert p[1:, 2:].is_pinned() and p.view(-1)[5:].is_pinned()
    # Pinning pinned memory returns it (PyTorch's pin_memory checks is_pinned first).
    assert p.pin_memory().data_ptr() == p.data_ptr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the device argument is deprecated in torch 2.13
        q = t.pin_memory("tpu")
        assert q.is_pinned("tpu")
    torch.testing.assert_close(q, t)


def test_factories_pin_memory(mode):
    e = torch.empty(3, 5, pin_memory=True)
    z = torch.zeros(3, 5, dtype=torch.int64, pin_memory=True)
    assert e.is_pinned() and z.is_pinned()
    torch.testing.assert_close(z, torch.zeros(3, 5, dtype=torch.int64))
    f = torch.full((7,), 2.5, pin_memory=True)
    assert f.is_pinned()
    torch.testing.assert_close(f, torch.full((7,), 2.5))
    assert not torch.empty(3).is_pinned()


def test_pinned_blocks_are_freed(mode):
    before = host_stats()
    p = torch.empty(1000).pin_memory()
    during = host_stats()
    assert during["pinned_blocks"] == before["pinned_blocks"] + 1
    assert during["pinned_bytes"] == before["pinned_bytes"] + 4000
    assert during["pinned_allocations"] == before["pinned_allocations"] + 1
    del p
    after = host_stats()
    assert after["pinned_blocks"] == before["pinned_blocks"]
    assert after["pinned_bytes"] == before["pinned_bytes"]


class _Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 10

    def __getitem__(self, i):
        return {"x": torch.full((3,), float(i)), "y": torch.tensor(i * i)}


@pytest.mark.parametrize("pin_memory_device", ["", "tpu"])
def test_dataloader_pin_memory(mode, pin_memory_device):
    plain = list(torch.utils.data.DataLoader(_Squares(), batch_size=4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pin_memory_device is deprecated in torch 2.13 (the accelerator is used)
        loader = torch.utils.data.DataLoader(_Squares(), batch_size=4, pin_memory=True,
                                             pin_memory_device=pin_memory_device)
        pinned = list(loader)
    assert len(pinned) == len(plain)
    for a, b in zip(pinned, plain):
        assert a["x"].is_pinned() and a["y"].is_pinned()
        torch.testing.assert_close(a["x"], b["x"])
        torch.testing.assert_close(a["y"], b["y"])
        # The usual training-loop step: non_blocking upload of the pinned batch.
        x = a["x"].to("tpu", non_blocking=True)
        assert_close(x * 2, b["x"] * 2)


# ---------------------------------------------------------------------------------------------
# non_blocking copies


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.bool])
def test_non_blocking_upload_from_pinned(mode, dtype):
    cpu = (torch.arange(60) % 7 - 3).to(dtype).reshape(6, 10)
    pinned = cpu.pin_memory()
    before = host_stats()["async_uploads"]
    t = pinned.to("tpu", non_blocking=True)
    assert host_stats()["async_uploads"] == before + 1  # the asynchronous path was taken
    torch.tpu.synchronize()
    assert_close(t, cpu)
    # Into part of an existing tensor (staging buffer + device copy), and with a dtype change.
    d = torch.zeros(8, 10, dtype=dtype, device="tpu")
    d[1:7].copy_(pinned, non_blocking=True)
    expected = torch.zeros(8, 10, dtype=dtype)
    expected[1:7] = cpu
    f = pinned.to("tpu", torch.float64, non_blocking=True)
    torch.tpu.synchronize()
    assert_close(d, expected)
    assert_close(f, cpu.to(torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool, torch.complex64, torch.float8_e4m3fn])
def test_uploads_into_ranges_of_a_small_buffer_share_one_program(mode, dtype):
    # vLLM copies a batch's first n rows into fixed per-request buffers with n changing every step: into a
    # small storage, any contiguous range is one merge program (bounds as operands), not one per n.
    import torch_tpu.device as tpu_device

    values = (torch.arange(40) % 5).to(dtype)
    dev = torch.zeros(40, dtype=dtype, device="tpu")
    expected = torch.zeros(40, dtype=dtype)
    torch.tpu.synchronize()
    for n in (3, 4, 5, 9, 17, 33):  # the first two as warm-up (Fused: a step's graph, then its replay)
        dev[:n].copy_(values[:n].pin_memory(), non_blocking=True)
        expected[:n] = values[:n]
        dev[n - 2:n].copy_(values[:2])  # another range, from pageable memory
        expected[n - 2:n] = values[:2]
        torch.tpu.synchronize()
        if n == 4:
            tpu_device.reset_compile_cache_stats()
    assert torch.equal(dev.cpu().view(torch.uint8), expected.view(torch.uint8))
    assert tpu_device.compile_cache_stats()["memory"]["misses"] == 0


def test_non_blocking_upload_keeps_source_alive(mode):
    # A large pinned source dropped right after the call: the transfer still reads valid memory.
    cpu = torch.randn(4 * 1024 * 1024)  # 16 MiB
    expected = cpu.clone()
    pinned = cpu.pin_memory()
    d = torch.empty(cpu.shape, device="tpu")
    d.copy_(pinned, non_blocking=True)
    del pinned
    torch.tpu.synchronize()
    assert host_stats()["pending_transfers"] == 0
    assert_close(d, expected)
    assert_close(d.sum(), expected.sum(), rtol=1e-4, atol=1e-2)


def test_pageable_and_blocking_uploads_stay_synchronous(mode):
    cpu = torch.randn(5, 5)
    before = host_stats()["async_uploads"]
    a = cpu.to("tpu", non_blocking=True)  # pageable: synchronous, as on CUDA
    b = cpu.pin_memory().to("tpu")  # pinned but blocking
    assert host_stats()["async_uploads"] == before
    assert_close(a, cpu)
    assert_close(b, cpu)


def test_non_blocking_download_to_pinned(mode):
    cpu = torch.randn(7, 9)
    x = cpu.to("tpu") * 3 - 1  # pending in fused mode: the download flushes it
    before = host_stats()["async_downloads"]
    h = x.to("cpu", non_blocking=True)
    # As on CUDA, a non_blocking device->host copy lands in pinned memory.
    assert h.is_pinned()
    assert host_stats()["async_downloads"] == before + 1
    torch.tpu.synchronize()
    torch.testing.assert_close(h, cpu * 3 - 1)
    # Into an existing pinned buffer, and a transposed (strided) source.
    p = torch.empty(9, 7).pin_memory()
    p.copy_(x.t(), non_blocking=True)
    torch.tpu.synchronize()
    torch.testing.assert_close(p, (cpu * 3 - 1).t())
    # Into pageable memory: synchronous, the values are there at once.
    q = torch.empty(7, 9)
    q.copy_(x, non_blocking=True)
    torch.testing.assert_close(q, cpu * 3 - 1)


def test_non_blocking_copies_stay_in_order(mode):
    # Round trips through the same pinned buffer without synchronizing in between give what
    # CUDA's stream order gives: every copy sees the one before it.
    a_cpu, b_cpu = torch.randn(1000), torch.randn(1000)
    a, b = a_cpu.to("tpu"), b_cpu.to("tpu")
    p = torch.empty(1000).pin_memory()
    p.copy_(a, non_blocking=True)  # tpu -> pinned (pending)
    y = p.to("tpu", non_blocking=True)  # pinned -> tpu reads it after it landed
    z = p.to("tpu", torch.float64, non_blocking=True)  # host-side conversion also waits
    p.copy_(b, non_blocking=True)  # overwrites p only after the uploads read it
    w = p.to("tpu", non_blocking=True)
    torch.tpu.synchronize()
    assert_close(y, a_cpu)
    assert_close(z, a_cpu.to(torch.float64))
    assert_close(w, b_cpu)
    torch.testing.assert_close(p, b_cpu)
    # A blocking CPU read of a pending non_blocking download target sees the new data once the
    # copy that wrote it is awaited by the next copy through that memory.
    q = torch.empty(1000).pin_memory()
    q.copy_(b, non_blocking=True)
    r = torch.empty(1000)
    r.copy_(q.to("tpu"))
    torch.testing.assert_close(r.to("tpu").cpu(), b_cpu)


# ---------------------------------------------------------------------------------------------
# pickle, torch.save / torch.load


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16, torch.bool])
def test_pickle_tensor(mode, dtype):
    cpu = (torch.arange(12) % 5).to(dtype).reshape(3, 4)
    t = cpu.to("tpu") + torch.zeros((), dtype=dtype, device="tpu")  # a computed (pending) value
    r = pickle.loads(pickle.dumps(t))
    assert r.device == t.device and r.dtype == dtype
    assert_close(r, cpu)
    r2 = copy.deepcopy(t)
    assert_close(r2, cpu)
    assert r2.data_ptr() != t.data_ptr()


def test_pickle_views_and_autograd_flags(mode):
    cpu = torch.arange(30, dtype=torch.float32).reshape(5, 6)
    t = cpu.to("tpu")
    views = [t[1:, ::2], t.t(), t[2], t.view(-1)[7:20]]
    cpu_views = [cpu[1:, ::2], cpu.t(), cpu[2], cpu.view(-1)[7:20]]
    loaded = pickle.loads(pickle.dumps(views))
    expected = pickle.loads(pickle.dumps(cpu_views))
    for r, v, e in zip(loaded, views, expected):
        assert r.shape == e.shape and r.stride() == e.stride() and r.storage_offset() == e.storage_offset()
        assert_close(r, v.cpu())
    leaf = torch.randn(4).to("tpu").requires_grad_()
    r = pickle.loads(pickle.dumps(leaf))
    assert r.requires_grad and r.is_leaf
    assert_close(r.detach(), leaf.detach().cpu())


def test_pickle_module(mode):
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    model = copy.deepcopy(cpu_model).to("tpu")
    r = pickle.loads(pickle.dumps(model))
    for (n, p), (_, q) in zip(r.named_parameters(), cpu_model.named_parameters()):
        assert p.device.type == "tpu" and isinstance(p, torch.nn.Parameter), n
        assert_close(p.detach(), q.detach())
    x = torch.randn(3, 4)
    assert_close(r(x.to("tpu")).detach(), cpu_model(x).detach())


@pytest.mark.parametrize("zipfile", [True, False])
def test_save_load(mode, zipfile):
    cpu = torch.randn(4, 5)
    t = cpu.to("tpu") * 2
    obj = {"t": t, "view": t[1:, 2:], "n": 3}
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=zipfile)
    for location, device in [(None, "tpu"), ("cpu", "cpu"), ("tpu", "tpu"), (torch.device("tpu:0"), "tpu")]:
        buf.seek(0)
        r = torch.load(buf, map_location=location)
        assert r["t"].device.type == device and r["view"].device.type == device and r["n"] == 3
        torch.testing.assert_close(r["t"].cpu(), cpu * 2)
        torch.testing.assert_close(r["view"].cpu(), (cpu * 2)[1:, 2:])
    # A CPU checkpoint loaded straight onto tpu.
    buf = io.BytesIO()
    torch.save({"w": cpu}, buf, _use_new_zipfile_serialization=zipfile)
    buf.seek(0)
    r = torch.load(buf, map_location="tpu")
    assert_close(r["w"], cpu)


def test_state_dict_round_trip(mode):
    torch.manual_seed(1)
    cpu_model = torch.nn.Linear(6, 3)
    model = copy.deepcopy(cpu_model).to("tpu")
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    fresh = torch.nn.Linear(6, 3).to("tpu")
    fresh.load_state_dict(torch.load(buf))
    x = torch.randn(2, 6)
    assert_close(fresh(x.to("tpu")).detach(), cpu_model(x).detach())


# ---------------------------------------------------------------------------------------------
# Layouts and dtypes tpu does not run: refused at the door


SPARSE = [
    ("to_sparse", lambda a: a.to_sparse(), "sparse COO"),
    ("to_sparse_csr", lambda a: a.to_sparse_csr(), "sparse CSR"),
    ("to_sparse_csc", lambda a: a.to_sparse_csc(), "sparse CSC"),
    ("to_sparse_bsr", lambda a: a.to_sparse_bsr((2, 2)), "sparse BSR"),
    ("to_sparse_bsc", lambda a: a.to_sparse_bsc((2, 2)), "sparse BSC"),
]


@pytest.mark.parametrize("name,convert,what", SPARSE, ids=[s[0] for s in SPARSE])
def test_sparse_to_tpu_refused(mode, name, convert, what):
    a = torch.randn(4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
        s = convert(a)
        with pytest.raises(NotImplementedError, match=f"{what}.*tpu supports strided|tpu supports strided.*{what}"):
            s.to("tpu")
        with pytest.raises(NotImplementedError, match=what):
            s.tpu()
        # CPU sparse tensors are untouched: conversions on the CPU still work as before.
        torch.testing.assert_close(s.to(torch.float64).to_dense(), a.to(torch.float64))


def test_nested_to_tpu_refused(mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype
        n = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    with pytest.raises(NotImplementedError, match="strided.*nested"):
        n.to("tpu")


def test_quantized_to_tpu_refused(mode):
    q = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8)
    with pytest.raises(NotImplementedError, match="strided.*quantized"):
        q.to("tpu")


@pytest.mark.parametrize("factory", ["empty", "zeros"])
@pytest.mark.parametrize("layout,what", [(torch.sparse_coo, "sparse COO"), (torch.sparse_csr, "sparse CSR")])
def test_sparse_factories_refused(mode, factory, layout, what):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NotImplementedError, match=f"tpu supports strided.*{what}"):
            getattr(torch, factory)(2, 2, layout=layout, device="tpu")


def test_sparse_coo_tensor_refused(mode):
    with pytest.raises(NotImplementedError, match="sparse COO"):
        torch.sparse_coo_tensor(torch.tensor([[0, 1], [1, 0]]), torch.tensor([1.0, 2.0]), (2, 2), device="tpu")


def test_complex32_refused(mode):
    # complex64/complex128 are supported (tests/test_complex.py); complex32 (chalf) is not.
    with pytest.raises(TypeError, match="not supported on tpu"):
        torch.randn(3, dtype=torch.complex64).to(torch.complex32).to("tpu")
    with pytest.raises(TypeError, match="not supported on tpu"):
        torch.zeros(3, dtype=torch.complex32, device="tpu")


def test_dense_after_refusals(mode):
    # A refusal leaves nothing behind: dense work carries on.
    with pytest.raises(NotImplementedError):
        torch.randn(3, 3).to_sparse().to("tpu")
    cpu = torch.randn(3, 3)
    assert_close(cpu.to("tpu") @ cpu.to("tpu"), cpu @ cpu)


def test_accelerator_empty_host_cache_on_tpu():
    # It used to dereference PrivateUse1's unregistered host allocator and kill the process (vLLM calls it
    # at shutdown). Pinned memory stays usable afterwards.
    import subprocess
    import sys
    code = ("import torch\n"
            "x = torch.ones(4).pin_memory(); y = x.to('tpu')\n"
            "torch.accelerator.empty_host_cache()\n"
            "print(y.cpu().sum().item(), torch.ones(2).pin_memory().is_pinned())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["4.0", "True"]


# ---------------------------------------------------------------------------------------------
# How host memory serves the CPU plugins' large blocks (csrc/runtime/HostMemoryPolicy.h)

_FAULTS_PER_RUN = """
import resource, torch
x = torch.ones(1 << 20, device="tpu")
def run():  # 64 4-MiB products and their 256 MiB concatenation, inside the program (Fused) or as op results
    torch.cat([x * i for i in range(64)]).sum().item()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):  # Fused: traced, then replayed
    run()
per_run = []
for _ in range(7):
    before = faults()
    run()
    per_run.append(faults() - before)
stats = torch_tpu._C._host_block_cache_stats()
print(torch_tpu._C._host_memory_policy().split()[0], min(per_run), stats["reuses"] if stats else -1)
"""


def _run_policy(policy, eager_mode, code):
    env = dict(os.environ, TORCH_TPU_HOST_MALLOC=policy, TORCH_TPU_EAGER_MODE=eager_mode)
    out = subprocess.run([sys.executable, "-c", "import torch_tpu\n" + code], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


@pytest.mark.parametrize("eager_mode", ["strict", "fused"])
def test_large_blocks_stay_mapped_between_runs(eager_mode):
    # "cache" (the default: the plugin's blocks from 1 MiB come from LargeBlockCache) and "keep" (one glibc
    # arena) reuse the 4 MiB products and the 256 MiB block once a run has mapped them, so a run touches pages
    # it already has. "system" (glibc's defaults) maps the large ones afresh each run: thousands of new pages,
    # each a page fault (measured per run after warm-up: cache 0-5, keep 0-2k now and then, system 65k Fused
    # and 93-118k Strict). The fewest faults of 7 runs: keep still maps a block afresh now and then (when the
    # program frees its temporaries after the host has started the next run), system every run. Each policy
    # in its own process: it is set before the plugin starts.
    if torch_tpu._C._platform_name() != "cpu":
        pytest.skip("the policy applies to the CPU plugins only")
    faults, reuses = {}, {}
    for policy in ("cache", "keep", "system"):
        reported, count, reused = _run_policy(policy, eager_mode, _FAULTS_PER_RUN)[-3:]
        assert reported == policy
        faults[policy], reuses[policy] = float(count), int(reused)
    assert faults["cache"] * 10 < faults["system"], faults
    assert faults["keep"] * 10 < faults["system"], faults
    assert faults["system"] > 256 * 1024 * 1024 // 4096 // 2, faults  # the block really was mapped afresh
    assert reuses["cache"] >= 7 and reuses["keep"] == reuses["system"] == -1, reuses


_TRIM = """
import torch
x = torch.ones(4 << 20, device="tpu")  # 16 MiB
y = (x * 2).sum().item()
del x
stats = torch_tpu._C._host_block_cache_stats
kept = stats()["cached_bytes"]
torch.tpu.empty_cache()
print(kept, stats()["cached_bytes"], stats()["live_bytes"], y)
"""


def test_empty_cache_gives_kept_blocks_back():
    if torch_tpu._C._platform_name() != "cpu":
        pytest.skip("the policy applies to the CPU plugins only")
    for mode in ("strict", "fused"):
        kept, after, live, y = _run_policy("cache", mode, _TRIM)[-4:]
        assert int(kept) >= 16 << 20 and int(after) == 0, (mode, kept, after, live)
        assert float(y) == 2.0 * (4 << 20)


def test_host_malloc_policy_refuses_unknown_values():
    env = dict(os.environ, TORCH_TPU_HOST_MALLOC="bogus")
    out = subprocess.run([sys.executable, "-c", "import torch; print(hasattr(torch, 'tpu'))"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert "TORCH_TPU_HOST_MALLOC=bogus is not a host malloc policy: use cache" in out.stderr, out.stderr[-2000:]
