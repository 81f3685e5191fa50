"""Quickstart: train a small GPT on device "tpu" (no `import torch_tpu` needed)."""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import train  # noqa: E402


def main():
    print(f"torch {torch.__version__}; tpu available: {torch.tpu.is_available()}")
    print(f"platform: {torch.tpu.get_device_name()}")
    start = [time.perf_counter()]
    times = []

    def on_step(step, loss):
        now = time.perf_counter()
        times.append(now - start[0])
        start[0] = now
        print(f"step {step:3d}  loss {loss:.4f}  ({1.0 / times[-1]:.2f} steps/s)")

    losses = train("tpu", steps=20, on_step=on_step)
    steady = times[2:] or times
    print(f"final loss {losses[-1]:.4f} (from {losses[0]:.4f}); "
          f"{len(steady) / sum(steady):.2f} steps/s after warm-up (first step includes compilation: {times[0]:.1f}s)")


if __name__ == "__main__":
    main()
