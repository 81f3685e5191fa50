"""Where a training step's time goes, per op, in one eager mode (GPT small: d128, 2 layers, seq 64, batch 8,
AdamW, loss read every step), and the host cost of one fused op against CPU eager's own dispatch.

    python benchmarks/host_breakdown.py --mode strict|fused|debug [--steps 20]
    TORCH_TPU_FUSED_REPLAY=0 python benchmarks/host_breakdown.py --mode fused   # trace every graph

Prints steps/s, ops per step, wall time per op, the calling thread's CPU time per op (time.thread_time:
Python, dispatch, our executor; not autograd's thread) and the process's CPU time per op (adds the XLA:CPU
threads running the programs). For a profile of the steady state, attach `perf record -p PID` once the
script prints "steady state" (see docs/performance.md). No thresholds.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eager_modes import CASES  # noqa: E402

import torch_tpu  # noqa: E402


def inplace_op_cost(device, n=200, reps=30):
    """Calling-thread CPU microseconds of one `s.mul_(c)` on 128 floats (best of reps)."""
    s = torch.ones(128).to(device)
    best = float("inf")
    for r in range(reps):
        t0 = time.thread_time()
        for _ in range(n):
            s.mul_(1.0001)
        t1 = time.thread_time()
        s.sum().item()
        if r >= 3:
            best = min(best, (t1 - t0) / n)
    return best * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="strict", choices=torch_tpu.available_eager_modes())
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch_tpu.set_eager_mode(args.mode)
    model, loss_fn = CASES["gpt small (d128 L2 s64 b8)"]("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        loss = loss_fn()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(4):
        step()
    torch.tpu.synchronize()
    ops0 = torch.tpu.executor_stats()["ops"]
    print(f"steady state (pid {os.getpid()})", flush=True)
    t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
    for _ in range(args.steps):
        step()
    t1, c1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
    ops = torch.tpu.executor_stats()["ops"] - ops0
    print(f"{args.mode}: {args.steps / (t1 - t0):.2f} steps/s, {ops / args.steps:.0f} ops/step, "
          f"wall/op {(t1 - t0) / ops * 1e6:.1f} us, calling thread cpu/op {(c1 - c0) / ops * 1e6:.1f} us, "
          f"process cpu/op {(p1 - p0) / ops * 1e6:.1f} us")
    f = torch_tpu._C._fused_stats()
    print(f"fused stats: eager_replays {f['eager_replays']}, replay_fallbacks {f['replay_fallbacks']}, "
          f"compiles {f['compiles']}")
    print(f"one in-place op (mul_ on 128 floats), calling thread: cpu eager {inplace_op_cost('cpu'):.2f} us, "
          f"tpu {args.mode} {inplace_op_cost('tpu'):.2f} us")


if __name__ == "__main__":
    main()
