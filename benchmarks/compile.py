"""torch.compile on tpu next to CPU PyTorch (eager and inductor) and our eager modes, in one run.

Rows: the GPT example, small (d128, 2 layers, seq 64, batch 8) and large (d512, 4 layers, seq 128, batch 8), AdamW,
loss read back every step. Columns, steps/s (median after warm-up): CPU eager, CPU inductor (torch.compile of
the model), tpu strict, tpu fused, tpu compiled model (torch.compile(model), backend "tpu": forward and backward
graphs), tpu compiled step (torch.compile of forward + backward + optimizer.step: Dynamo splits it at
loss.backward()). Ratios are against CPU eager measured in the same run; "first step" is the wall time of the
first compiled step (Dynamo + AOTAutograd + XLA, or the compile cache when it is warm).

    python benchmarks/compile.py [--cases small,large] [--steps 5]
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eager_modes import gpt_case, seconds_per_step, set_mode  # noqa: E402

CASES = {
    "small": ("gpt small (d128 L2 s64 b8)", lambda d: gpt_case(d, 128, 2, 64, 8)),
    "large": ("gpt large (d512 L4 s128 b8)", lambda d: gpt_case(d, 512, 4, 128, 8)),
}


def compiled_model(case, backend):
    """The case with its module compiled in place (nn.Module.compile): forward and backward graphs."""
    def make(device):
        model, loss_fn = case(device)
        model.compile(backend=backend)
        return model, loss_fn
    return make


def timed_steps(step, warmup, steps):
    """(median seconds per step after warm-up, seconds of the first step); step() returns the loss."""
    times = []
    for _ in range(warmup + steps):
        t0 = time.perf_counter()
        step().item()
        times.append(time.perf_counter() - t0)
    measured = sorted(times[warmup:])
    return measured[len(measured) // 2], times[0]


def training_step(case, device, whole_step_compiled=False):
    model, loss_fn = case(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        loss = loss_fn()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return torch.compile(step, backend="tpu") if whole_step_compiled else step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    print(f"platform: {torch.tpu.get_device_name()}; loss read back every step")
    rows = []
    for key in args.cases.split(","):
        name, case = CASES[key]
        torch._dynamo.reset()
        r, first = {}, {}
        r["cpu eager"] = seconds_per_step(case, "cpu", args.warmup, args.steps)
        r["cpu inductor"], first["cpu inductor"] = timed_steps(
            training_step(compiled_model(case, "inductor"), "cpu"), args.warmup, args.steps)
        for mode in ("strict", "fused"):
            set_mode(mode)
            r[mode] = seconds_per_step(case, "tpu", args.warmup, args.steps)
        set_mode("strict")
        torch._dynamo.reset()
        r["compiled model"], first["compiled model"] = timed_steps(
            training_step(compiled_model(case, "tpu"), "tpu"), args.warmup, args.steps)
        torch._dynamo.reset()
        r["compiled step"], first["compiled step"] = timed_steps(
            training_step(case, "tpu", whole_step_compiled=True), args.warmup, args.steps)
        rows.append((name, r, first))
    cols = ["cpu eager", "cpu inductor", "strict", "fused", "compiled model", "compiled step"]
    header = f"{'model':<30}" + "".join(f"{c:>16}" for c in cols)
    print("steps/s (ratio to cpu eager)")
    print(header)
    print("-" * len(header))
    for name, r, _ in rows:
        print(f"{name:<30}" + "".join(f"{1 / r[c]:>9.2f} ({r['cpu eager'] / r[c]:.2f}x)" for c in cols))
    print("\nfirst step, seconds (compile included)")
    for name, _, first in rows:
        print(f"{name:<30}" + "".join(f"{c}: {s:.2f}   " for c, s in first.items()))
    print(f"compile cache: {torch.tpu.compile_cache_stats()}")


if __name__ == "__main__":
    main()
