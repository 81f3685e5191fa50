"""Where the calling thread's time goes in a replayed torch.compile training step (the small GPT of
benchmarks/compile.py: d128, 2 layers, seq 64, batch 8, AdamW, loss read every step).

    python benchmarks/compile_host.py [--steps 100] [--case small|large]

After warm-up, prints the step's wall time and the calling thread's CPU time (time.thread_time: Python,
Dynamo's guards, AOTAutograd's wrappers, our launches; not autograd's thread, which runs the backward
graph's launch, nor XLA:CPU's threads) and, per compiled graph (named by its argument count), the CPU
and wall time of its replay launch (`replay.Plans.run`). No thresholds; compare runs made on the same
quiet machine.
"""
import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile import CASES, training_step  # noqa: E402

from torch_tpu.compile import replay  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--case", default="small", choices=sorted(CASES))
    args = ap.parse_args()
    launches = collections.defaultdict(lambda: [0.0, 0.0, 0])  # args -> cpu, wall, calls
    run = replay.Plans.run

    def timed_run(self, a):
        n, c, w = len(a), time.thread_time(), time.perf_counter()
        try:
            return run(self, a)
        finally:
            entry = launches[n]
            entry[0] += time.thread_time() - c
            entry[1] += time.perf_counter() - w
            entry[2] += 1

    replay.Plans.run = timed_run
    step = training_step(CASES[args.case][1], "tpu", whole_step_compiled=True)
    for _ in range(5):
        step().item()
    launches.clear()
    c0, w0 = time.thread_time(), time.perf_counter()
    for _ in range(args.steps):
        step().item()
    cpu, wall = time.thread_time() - c0, time.perf_counter() - w0
    n = args.steps
    print(f"{CASES[args.case][0]}, compiled whole step, {n} steps after warm-up")
    print(f"step: wall {1e3 * wall / n:.2f} ms, calling thread {1e3 * cpu / n:.2f} ms ({100 * cpu / wall:.1f}%)")
    print("| graph | launches/step | launch cpu ms | launch wall ms |")
    print("| --- | ---: | ---: | ---: |")
    for size, (c, w, k) in sorted(launches.items()):
        print(f"| {size} arguments | {k / n:.0f} | {1e3 * c / k:.3f} | {1e3 * w / k:.3f} |")


if __name__ == "__main__":
    main()
