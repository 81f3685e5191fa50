"""Host-side cost per op in Strict mode, next to CPU PyTorch eager in the same run.

"dispatch" is the time the Python thread spends per op (tpu programs run asynchronously);
"end-to-end" also waits for the results. Prints a table; no thresholds.
"""
import argparse
import time

import torch


def bench(fn, iters, sync):
    for _ in range(20):  # warm-up: compile and cache
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    t1 = time.perf_counter()
    sync()
    t2 = time.perf_counter()
    return (t1 - t0) / iters * 1e6, (t2 - t0) / iters * 1e6


def cases(device):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 64, generator=g).to(device)
    b = torch.randn(64, 64, generator=g).to(device)
    s = torch.randn(128, generator=g).to(device)
    return {
        "add (128)": lambda: s + s,
        "mul scalar (128)": lambda: s * 0.5,
        "exp (128)": lambda: s.exp(),
        "add_ in-place (128)": lambda: s.add_(1e-3),
        "gt (128)": lambda: s > 0,
        "add (64x64)": lambda: a + b,
        "mm (64x64)": lambda: a @ b,
        "add transposed view (64x64)": lambda: a.t() + b,
    }


def behind_busy_device(rounds):
    """Launches `rounds` times a long matmul then the op 8 times, keeping every result, and returns per op the
    host's launch time as a fraction of the time until the device is done. An in-place op donates its buffer;
    it must run ahead of the device as an out-of-place one does (the fraction near 1: every launch waited).
    On a loaded 2-core machine the host also shares the cores with the matmul: compare the two rows."""
    big = torch.randn(768, 768, device="tpu")
    s = torch.zeros(4096, device="tpu")
    ops = {"add (4096)": lambda: s + 1, "add_ in-place (4096)": lambda: s.add_(1)}
    out = {}
    for name, fn in ops.items():
        fn(), big @ big
        torch.tpu.synchronize()
        kept = []
        t = time.perf_counter()
        for _ in range(rounds):
            kept.append(big @ big)
            kept += [fn() for _ in range(8)]
        host = time.perf_counter() - t
        torch.tpu.synchronize()
        out[name] = host / (time.perf_counter() - t)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=2000)
    args = parser.parse_args()
    print(f"platform: {torch.tpu.get_device_name()}")
    cpu = {k: bench(f, args.iters, lambda: None) for k, f in cases("cpu").items()}
    tpu = {k: bench(f, args.iters, torch.tpu.synchronize) for k, f in cases("tpu").items()}
    header = f"{'op':<30}{'cpu eager us':>14}{'tpu dispatch us':>17}{'tpu end-to-end us':>19}{'dispatch/cpu':>14}"
    print(header)
    print("-" * len(header))
    for k in cpu:
        c, (d, e) = cpu[k][1], tpu[k]
        print(f"{k:<30}{c:>14.1f}{d:>17.1f}{e:>19.1f}{d / c:>13.1f}x")
    print()
    for k, frac in behind_busy_device(max(args.iters // 200, 8)).items():
        print(f"{k + ' behind a busy device':<45} host launch time / time to done: {frac:.2f}")


if __name__ == "__main__":
    main()
