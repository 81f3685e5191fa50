"""torch.compile on tpu next to CPU PyTorch (eager and inductor) and our eager modes, in one run.

Rows: the GPT example, small (d128, 2 layers, seq 64, batch 8) and large (d512, 4 layers, seq 128, batch 8), AdamW,
loss read back every step. Columns, steps/s (median after warm-up): CPU eager, CPU inductor (torch.compile of
the model), tpu strict, tpu fused, tpu compiled model (torch.compile(model), backend "tpu": forward and backward
graphs), tpu compiled step (torch.compile of forward + backward + optimizer.step: Dynamo splits it at
loss.backward()), and XLA's own floor: the same step written in JAX as one jax.jit program, on jaxlib's XLA:CPU
client and on our PJRT plugin (benchmarks/jax_gpt.py). Ratios are against CPU eager measured in the same run; "first step" is the wall time of the
first compiled step (Dynamo + AOTAutograd + XLA, or the compile cache when it is warm).

Then the first compiled whole step of each case in a fresh process, with an empty compile cache (cold) and
again with the cache that run left (warm), and a PNG chart next to this script.

    python benchmarks/compile.py [--cases small,large] [--steps 5]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eager_modes  # noqa: E402
from eager_modes import gpt_case, seconds_per_step, set_mode  # noqa: E402
import jax_gpt  # noqa: E402

SIZES = {"small": ("gpt small (d128 L2 s64 b8)", (128, 2, 64, 8)), "large": ("gpt large (d512 L4 s128 b8)", (512, 4, 128, 8))}
CASES = {key: (name, lambda d, dims=dims: gpt_case(d, *dims)) for key, (name, dims) in SIZES.items()}


def compiled_model(case, backend):
    """The case with its module compiled in place (nn.Module.compile): forward and backward graphs."""
    def make(device):
        model, loss_fn = case(device)
        model.compile(backend=backend)
        return model, loss_fn
    return make


def timed_steps(step, warmup, steps, host=None):
    """(median seconds per step after warm-up, seconds of the first step); step() returns the loss.
    `host`, a dict, receives the median share of the step that the calling thread spent on its CPU
    (time.thread_time: Python, dispatch, tracing, launches; not the XLA:CPU worker threads that run the
    programs, nor the waits)."""
    times, cpu = [], []
    for _ in range(warmup + steps):
        t0, c0 = time.perf_counter(), time.thread_time()
        step().item()
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    measured = sorted(times[warmup:])
    if host is not None:
        shares = sorted(c / t for c, t in zip(cpu[warmup:], times[warmup:]))
        host["share"] = shares[len(shares) // 2]
    return measured[len(measured) // 2], times[0]


def training_step(case, device, whole_step_compiled=False):
    model, loss_fn = case(device)
    step = eager_modes.training_step(loss_fn, torch.optim.AdamW(model.parameters(), lr=1e-3))
    return torch.compile(step, backend="tpu") if whole_step_compiled else step


def first_compiled_step(key):
    """Run in a fresh process (--first-step KEY): prints the wall times of the first two compiled whole steps
    (the second compiles too: Dynamo recompiles the optimizer step once its state exists)."""
    _, case = CASES[key]
    step = training_step(case, "tpu", whole_step_compiled=True)
    seconds = []
    for _ in range(2):
        t0 = time.perf_counter()
        step().item()
        seconds.append(time.perf_counter() - t0)
    print("first-step-seconds " + " ".join(f"{x:.3f}" for x in seconds))


def first_step_cold_and_warm(key):
    """((first, second) step seconds cold, the same warm): a fresh process with an empty persistent cache,
    then one more with what it wrote."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache, TORCH_TPU_CACHE="1")
        out = []
        for _ in range(2):
            run = subprocess.run([sys.executable, os.path.abspath(__file__), "--first-step", key], env=env,
                                 capture_output=True, text=True, check=True)
            line = [x for x in run.stdout.splitlines() if x.startswith("first-step-seconds")][-1]
            out.append(tuple(float(x) for x in line.split()[1:]))
        return tuple(out)


def chart(rows, cols, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no chart)")
        return
    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / len(cols)
    for i, c in enumerate(cols):
        ratios = [r["cpu eager"] / r[c] for _, r, _, _ in rows]
        ax.bar([k + i * width for k in range(len(rows))], ratios, width, label=c)
    ax.set_xticks([k + width * (len(cols) - 1) / 2 for k in range(len(rows))], [row[0] for row in rows])
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_ylabel("steps/s relative to CPU eager")
    ax.set_title(f"torch.compile on {torch.tpu.get_device_name()}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    print(f"chart: {path}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--png", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "compile.png"))
    parser.add_argument("--first-step", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.first_step:
        return first_compiled_step(args.first_step)
    print(f"platform: {torch.tpu.get_device_name()}; loss read back every step")
    rows = []
    for key in args.cases.split(","):
        name, case = CASES[key]
        torch._dynamo.reset()
        r, first = {}, {}
        r["cpu eager"] = seconds_per_step(case, "cpu", args.warmup, args.steps)
        r["cpu inductor"], first["cpu inductor"] = timed_steps(
            training_step(compiled_model(case, "inductor"), "cpu"), args.warmup, args.steps)
        host = {}
        for mode in ("strict", "fused"):
            set_mode(mode)
            host[mode] = {}
            r[mode], _ = timed_steps(training_step(case, "tpu"), args.warmup, args.steps, host[mode])
        set_mode("strict")
        torch._dynamo.reset()
        host["compiled model"], host["compiled step"] = {}, {}
        r["compiled model"], first["compiled model"] = timed_steps(
            training_step(compiled_model(case, "tpu"), "tpu"), args.warmup, args.steps, host["compiled model"])
        torch._dynamo.reset()
        r["compiled step"], first["compiled step"] = timed_steps(
            training_step(case, "tpu", whole_step_compiled=True), args.warmup, args.steps, host["compiled step"])
        # XLA's floor: the same step hand-written in JAX, one jax.jit program (benchmarks/jax_gpt.py).
        for platform in ("cpu", "plugin"):
            sps = jax_gpt.steps_per_second(*SIZES[key][1], platform, args.warmup, args.steps)
            r[f"jax.jit {platform}"] = 1 / sps if sps else float("nan")
        rows.append((name, r, first, host))
    cols = ["cpu eager", "cpu inductor", "strict", "fused", "compiled model", "compiled step", "jax.jit cpu",
            "jax.jit plugin"]
    header = f"{'model':<30}" + "".join(f"{c:>16}" for c in cols)
    print("steps/s (ratio to cpu eager)")
    print(header)
    print("-" * len(header))
    for name, r, _, _ in rows:
        print(f"{name:<30}" + "".join(f"{1 / r[c]:>9.2f} ({r['cpu eager'] / r[c]:.2f}x)" for c in cols))
    print("\nhost share of the step (calling thread's CPU time / wall time)")
    for name, _, _, host in rows:
        print(f"{name:<30}" + "".join(f"{c}: {h['share'] * 100:.0f}%   " for c, h in host.items()))
    print("\nfirst step, seconds (compile included)")
    for name, _, first, _ in rows:
        print(f"{name:<30}" + "".join(f"{c}: {s:.2f}   " for c, s in first.items()))
    print("\nfirst compiled whole step in a fresh process, seconds (Dynamo + AOTAutograd + XLA)")
    for key in args.cases.split(","):
        cold, warm = first_step_cold_and_warm(key)
        print(f"{CASES[key][0]:<30}cold cache: {cold[0]:.2f} (2nd step {cold[1]:.2f})   "
              f"warm cache: {warm[0]:.2f} (2nd step {warm[1]:.2f})")
    chart(rows, cols, args.png)


if __name__ == "__main__":
    main()
