"""Python threads using tpu at once (issue 26 item 3), in every eager mode: 8 threads training their own
models (forward, backward, optimizer steps), 8 threads sharing one model for inference, a compiled
function called from several threads, and a DataLoader with worker processes feeding a tpu training
loop. No crash, no deadlock (every join is bounded), and each thread's result is close to CPU's and, in
Strict and Debug, bitwise the result the same work gives on one thread (the same programs run).
"""
import copy
import threading

import pytest
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

THREADS, STEPS, JOIN_S = 8, 15, 300


def run_threads(fn, n):
    """fn(i) in n threads at once; their results, or the first exception a thread raised."""
    results, errors = [None] * n, []
    start = threading.Barrier(n)

    def body(i):
        try:
            start.wait(timeout=JOIN_S)
            results[i] = fn(i)
        except BaseException as e:  # reported in the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=JOIN_S)
    assert not any(t.is_alive() for t in threads), "a thread is still running: deadlock or hang"
    if errors:
        raise errors[0]
    return results


def make_model(i):
    g = torch.Generator().manual_seed(100 + i)
    m = nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 3))
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    data = [(torch.randn(6, 12, generator=g), torch.randn(6, 3, generator=g)) for _ in range(STEPS)]
    return m, data


def train(model, data, dev, dtype=torch.float32):
    model = copy.deepcopy(model).to(dev, dtype)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for x, y in data:
        loss = ((model(x.to(dev, dtype)) - y.to(dev, dtype)) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return [p.detach().cpu() for p in model.parameters()] + [loss.detach().cpu()]


def assert_trains_like_cpu(got, model, data):
    """got within 4x of what float32 CPU training itself drifts from float64 on the same work."""
    cpu32, cpu64 = train(model, data, "cpu"), train(model, data, "cpu", torch.float64)
    for g, c32, c64 in zip(got, cpu32, cpu64):
        drift = (c32.double() - c64).abs().max().item()
        assert (g.double() - c64).abs().max().item() <= 4 * drift + 1e-6


def test_threads_train_their_own_models(mode):
    work = [make_model(i) for i in range(THREADS)]
    single = [train(m, d, "tpu") for m, d in work]
    threaded = run_threads(lambda i: train(*work[i], "tpu"), THREADS)
    # Fused mode records the threads' ops into shared graphs, cut differently than on one thread:
    # XLA fuses (and rounds) them differently, so only the CPU bound holds there.
    for i, (a, b) in enumerate(zip(threaded, single)):
        assert mode == "fused" or all(torch.equal(x, y) for x, y in zip(a, b)), f"thread {i} differs from the single-threaded run"
    for (m, d), got in zip(work, threaded):
        assert_trains_like_cpu(got, m, d)


def test_threads_share_one_model_for_inference(mode):
    model, _ = make_model(0)
    on_tpu = copy.deepcopy(model).to("tpu")
    g = torch.Generator().manual_seed(7)
    inputs = [torch.randn(5, 12, generator=g) for _ in range(THREADS)]

    def infer(i):
        with torch.no_grad():
            return [on_tpu(inputs[i].to("tpu")).cpu() for _ in range(STEPS)]

    single = [infer(i) for i in range(THREADS)]
    threaded = run_threads(infer, THREADS)
    for i in range(THREADS):
        assert all(torch.equal(a, b) for a, b in zip(threaded[i], single[i]))
        torch.testing.assert_close(threaded[i][0], model(inputs[i]).detach())


def test_a_compiled_function_called_from_threads(mode):
    torch._dynamo.reset()

    def f(x, w):
        return torch.softmax(x @ w, dim=-1).sum(0) + x.mean()

    fc = torch.compile(f, backend="tpu")
    g = torch.Generator().manual_seed(3)
    xs = [torch.randn(6, 8, generator=g) for _ in range(THREADS)]
    w = torch.randn(8, 4, generator=g)
    wt = w.to("tpu")
    fc(xs[0].to("tpu"), wt).cpu()  # compiled once here: the threads replay it
    got = run_threads(lambda i: [fc(xs[i].to("tpu"), wt).cpu() for _ in range(STEPS)], THREADS)
    for i in range(THREADS):
        for r in got[i]:
            torch.testing.assert_close(r, f(xs[i], w))


class Pairs(Dataset):
    """CPU samples built in the worker processes (workers never touch tpu, as with CUDA)."""

    def __len__(self):
        return 48

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(12, generator=g), torch.randn(3, generator=g)


def test_dataloader_workers_feed_a_tpu_training_loop(mode):
    model, _ = make_model(1)
    loader = DataLoader(Pairs(), batch_size=6, num_workers=2, timeout=JOIN_S, multiprocessing_context="spawn")
    data = list(loader)
    assert len(data) == 8
    assert_trains_like_cpu(train(model, data, "tpu"), model, [(x, y) for x, y in DataLoader(Pairs(), batch_size=6)])
