"""Profiles GPT training steps on tpu (examples/gpt.py) with torch.profiler (CPU + PrivateUse1) and prints
the top device spans: program executions, compiles / cache loads, transfers. Writes the chrome trace.

    python benchmarks/profile_gpt.py [--mode strict|debug|fused] [--steps 3] [--trace build/gpt_trace.json]
"""
import argparse
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import gpt  # noqa: E402
import torch_tpu  # noqa: E402
from torch_tpu import profiler as tpu_profiler  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="strict", choices=torch_tpu.available_eager_modes())
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2, help="steps before profiling (compiles happen there)")
    ap.add_argument("--trace", default=os.path.join("build", "gpt_trace.json"))
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    torch_tpu.set_eager_mode(args.mode)
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])

    def on_step(step, loss):
        if step + 1 == args.warmup:
            torch.tpu.synchronize()
            prof.start()
        elif step + 1 == args.warmup + args.steps:
            torch.tpu.synchronize()
            prof.stop()

    with record_function("gpt training"):
        gpt.train("tpu", steps=args.warmup + args.steps, on_step=on_step)
    os.makedirs(os.path.dirname(args.trace) or ".", exist_ok=True)
    prof.export_chrome_trace(args.trace)
    print(f"GPT (d_model 64, 2 layers, batch 8 x 32), {args.steps} profiled steps after {args.warmup}, "
          f"eager mode {args.mode}; trace: {args.trace}")
    print(tpu_profiler.summary(args.trace, top=args.top))


if __name__ == "__main__":
    main()
