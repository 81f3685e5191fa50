"""Strict buffer donation: an in-place write (a KV cache's index_put_, an optimizer's add_) whose old
buffer only its storage holds donates it to the program, so XLA updates it where it is instead of
writing a whole new copy. Values equal CPU in every mode; a buffer that anything else still holds (a
pending non_blocking download) or that is host memory on loan (tpu_dist's staging) is never donated."""
import os

import pytest
import torch
import torch.distributed as dist
import torch_tpu
from torch_tpu import _C

from conftest import assert_close


def donated():
    return _C._executor_stats()["donated_buffers"]


def kv_writes(cache, steps, dev):
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        slots = torch.randperm(cache.shape[0], generator=g)[:8]
        rows = torch.randn(8, cache.shape[1], generator=g)
        cache.index_put_((slots.to(dev),), rows.to(dev))
        cache.mul_(0.5)
        cache[3:7] += 1
    return cache


def test_in_place_writes_equal_cpu(mode):
    expected = kv_writes(torch.zeros(256, 16), 20, "cpu")
    before = donated()
    got = kv_writes(torch.zeros(256, 16, device="tpu"), 20, "tpu")
    assert_close(got, expected, rtol=0, atol=0)  # copies, halvings and +1 are exact in float32
    if mode != "fused":  # fused mode runs one graph per sync point; strict and debug donate per op
        assert donated() - before >= 3 * 20 - 3  # every write after the first few (the buffer is new)


def test_views_see_the_donated_write(mode):
    base = torch.zeros(4, 6, device="tpu")
    row, col = base[1], base[:, 2]
    base.add_(1)
    base[1].mul_(3)
    expected = torch.zeros(4, 6).add_(1)
    expected[1].mul_(3)
    assert_close(row, expected[1], rtol=0, atol=0)
    assert_close(col, expected[:, 2], rtol=0, atol=0)
    assert_close(base, expected, rtol=0, atol=0)


def test_clone_keeps_the_old_value(mode):
    x = torch.arange(10.0, device="tpu")
    y = x.clone()
    x.add_(1)
    assert_close(y, torch.arange(10.0), rtol=0, atol=0)
    assert_close(x, torch.arange(10.0) + 1, rtol=0, atol=0)


def test_pending_download_is_not_donated():
    n = 1 << 20
    with torch_tpu.eager_mode("strict"):
        x = torch.arange(n, dtype=torch.float32, device="tpu")
        x.add_(0)  # x's buffer is now a program's result
        host = torch.empty(n, pin_memory=True)
        for _ in range(5):
            host.copy_(x, non_blocking=True)  # the download holds x's buffer until it lands
            before = donated()
            x.add_(1)  # must not reuse the buffer being downloaded
            assert donated() == before
            torch.tpu.synchronize()
            torch.testing.assert_close(host, x.cpu() - 1, rtol=0, atol=0)
        before = donated()
        x.add_(1)  # nothing holds it any more
        assert donated() == before + 1


def test_graph_still_running_does_not_decide_donation():
    # A compiled graph that reads w may still run when the optimizer's in-place add comes. Its hold on
    # w only says how far the device has got: donation (part of the add's program) must not depend on it.
    def chain(w, x):
        for _ in range(8):
            x = torch.tanh(x @ w)
        return x.sum()

    with torch_tpu.eager_mode("strict"):
        compiled = torch.compile(chain, backend="tpu")
        w = torch.randn(384, 384, device="tpu") * 0.05
        x = torch.randn(384, 384, device="tpu")
        w.add_(0)  # w's buffer is now a program's result
        expected = w.cpu()
        for step in range(4):
            compiled(w, x)
            before = donated()
            w.add_(1)  # the graph above is most likely still running
            assert donated() == before + 1, f"step {step}: the add did not donate w's buffer"
            expected += 1
        torch.testing.assert_close(w.cpu(), expected, rtol=0, atol=0)


def test_lent_staging_buffer_is_not_donated(tmp_path):
    # A one-rank tpu_dist group: all_reduce's result is host staging memory lent to the storage.
    dist.init_process_group("tpu_dist", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        with torch_tpu.eager_mode("strict"):
            t = torch.arange(4096.0, device="tpu") + 0
            for step in range(3):
                dist.all_reduce(t)
                before = donated()
                t.add_(1)
                assert donated() == before, "a lent buffer was donated"
                assert_close(t, torch.arange(4096.0) + step + 1, rtol=0, atol=0)
            t.mul_(2)  # t's buffer is now its own program result: donated
            assert donated() == before + 1
    finally:
        dist.destroy_process_group()
