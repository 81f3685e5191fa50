"""Training steps per second in each eager mode, next to CPU PyTorch eager in the same run.

Models: a 4-layer MLP and the GPT example in two sizes. Each row: median seconds per step (forward,
backward, AdamW step, loss read back every step or every `--read-every` steps) after warm-up; the ratio
column is Fused/Strict steps per second; `jax.jit/cpu` is XLA's own floor for the GPT (the same step
hand-written in JAX, one jax.jit program on the same PJRT plugin: benchmarks/jax_gpt.py) against CPU eager.
`host %` is the median share of a tpu step's wall time that the calling thread spent on its CPU
(time.thread_time: Python, dispatch, tracing or replay binding, launches; not autograd's device thread,
nor the XLA:CPU threads that run the programs, nor the waits).
TORCH_TPU_FUSED_REPLAY=0 in the environment makes Fused trace every graph (to compare with replay).
Writes a PNG bar chart next to this script when matplotlib is installed.
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from gpt import GPT, batches, load_text  # noqa: E402

import jax_gpt  # noqa: E402  (benchmarks/, this script's folder)
import torch_tpu  # noqa: E402

MODES = ["strict", "fused", "debug"]


def set_mode(mode):
    torch_tpu.set_eager_mode(mode)


def mlp_case(device):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(4) for m in (torch.nn.Linear(256, 256), torch.nn.ReLU())],
                                torch.nn.Linear(256, 10)).to(device)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 256, generator=g).to(device)
    y = torch.randint(0, 10, (64,), generator=g).to(device)
    return model, lambda: torch.nn.functional.cross_entropy(model(x), y)


def gpt_case(device, d_model, n_layers, seq, batch):
    data, vocab = load_text()
    torch.manual_seed(0)
    model = GPT(vocab, d_model=d_model, n_layers=n_layers, max_len=seq).to(device)
    x, y = next(batches(data, 1, batch, seq))
    x, y = x.to(device), y.to(device)
    return model, lambda: model(x, y)[1]


GPT_SIZES = {"gpt small (d128 L2 s64 b8)": (128, 2, 64, 8), "gpt large (d512 L4 s128 b8)": (512, 4, 128, 8)}
CASES = {"mlp 4x256": lambda d: mlp_case(d),
         **{name: (lambda d, dims=dims: gpt_case(d, *dims)) for name, dims in GPT_SIZES.items()}}


def training_step(loss_fn, opt):
    """One training step: the loss, its gradients (zeroed first) and the optimizer's update; returns the loss."""
    def step():
        loss = loss_fn()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def seconds_per_step(case, device, warmup, steps, read_every=1, host=None):
    model, loss_fn = case(device)
    step = training_step(loss_fn, torch.optim.AdamW(model.parameters(), lr=1e-3))
    times, cpu = [], []
    # The loss is read back every `read_every` steps (1: every step, as a loop printing each loss); a
    # block of that many steps is timed and divided, so a mode may overlap the host with the device.
    for i in range(warmup + steps):
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(read_every):
            loss = step()
        loss.item()
        if i >= warmup:
            times.append((time.perf_counter() - t0) / read_every)
            cpu.append((time.thread_time() - c0) / read_every)
    if host is not None:
        host["share"] = statistics.median(c / t for c, t in zip(cpu, times))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--read-every", type=int, default=1, help="read the loss back every N steps (default 1)")
    parser.add_argument("--png", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "eager_modes.png"))
    args = parser.parse_args()
    print(f"platform: {torch.tpu.get_device_name()}; loss read back every {args.read_every} step(s)")
    rows = []
    for name in args.cases.split(","):
        result = {"cpu eager": seconds_per_step(CASES[name], "cpu", args.warmup, args.steps, args.read_every)}
        shares = {}
        for mode in MODES:
            set_mode(mode)
            host = {}
            result[mode] = seconds_per_step(CASES[name], "tpu", args.warmup, args.steps, args.read_every, host)
            shares[mode] = host["share"]
        set_mode("strict")
        # XLA's floor for the GPT: the same step as one jax.jit program on our plugin (benchmarks/jax_gpt.py).
        sps = jax_gpt.steps_per_second(*GPT_SIZES[name], "plugin", args.warmup, args.steps) if name in GPT_SIZES else None
        result["jax.jit"] = 1 / sps if sps else float("nan")
        rows.append((name, result, shares))
    cols = ["cpu eager"] + MODES
    header = (f"{'model':<30}" + "".join(f"{c + ' steps/s':>18}" for c in cols) + f"{'fused/strict':>14}"
              + f"{'strict/cpu':>12}{'fused/cpu':>11}{'jax.jit/cpu':>13}" + "".join(f"{m + ' host %':>15}" for m in MODES))
    print(header)
    print("-" * len(header))
    for name, r, sh in rows:
        print(f"{name:<30}" + "".join(f"{1 / r[c]:>18.2f}" for c in cols) + f"{r['strict'] / r['fused']:>13.2f}x"
              + f"{r['cpu eager'] / r['strict']:>11.2f}x{r['cpu eager'] / r['fused']:>10.2f}x"
              + (f"{r['cpu eager'] / r['jax.jit']:>12.2f}x" if r["jax.jit"] == r["jax.jit"] else f"{'-':>13}")
              + "".join(f"{100 * sh[m]:>14.0f}%" for m in MODES))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no chart)")
        return
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(cols)
    for i, c in enumerate(cols):
        ax.bar([k + i * width for k in range(len(rows))], [1 / r[c] for _, r, _ in rows], width, label=c)
    ax.set_xticks([k + width * (len(cols) - 1) / 2 for k in range(len(rows))], [n for n, _, _ in rows])
    ax.set_ylabel("training steps / s")
    ax.set_yscale("log")
    ax.set_title(f"Eager modes on {torch.tpu.get_device_name()}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.png)
    print(f"chart: {args.png}")


if __name__ == "__main__":
    main()
