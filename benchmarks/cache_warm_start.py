"""Warm start: process start to the end of the first GPT training step, cold versus warm compile cache.

Each measurement is a fresh Python process running `train("tpu", steps=1)` from examples/gpt.py:
  - memory only: TORCH_TPU_CACHE=0 (every program compiled; the in-memory tier only)
  - cold:        an empty TORCH_TPU_CACHE_DIR (every program compiled and written)
  - warm:        the same directory again (every program loaded, nothing compiled)
  - reference:   the same script with device="cpu" (plain PyTorch: the floor for any cache)
Prints a table; "start -> step 1" is measured by this parent from just before it starts the process
to the moment the child finished its first step (loss.item() has returned). The parts of it that
no cache can remove (starting Python, `import torch`, PyTorch's own first-use imports) are shown in
the "before torch" / "import torch" columns and in the "other" column. "step 1 alone" is the first
step itself (model and optimizer built -> loss of step 1 read back), where only programs are prepared.
One table per eager mode (Strict and Fused).

    python benchmarks/cache_warm_start.py [--repeat N] [--modes strict,fused] [--dir DIR]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, sys, time
t_python = time.time()
import torch
t_torch = time.time()
import torch_tpu
sys.path.insert(0, sys.argv[1])
from gpt import train
marks = []
ready = []
train(sys.argv[2], steps=1, on_step=lambda step, loss: marks.append(time.time()),
      on_ready=lambda: ready.append(time.time()))
s = torch.tpu.compile_cache_stats()
print("RESULT " + json.dumps({
    "python": t_python, "torch": t_torch, "ready": ready[0], "step": marks[0],
    "compiles": s["compiles"], "compile_seconds": s["compile_seconds"],
    "disk_hits": s["disk"]["hits"], "load_seconds": s["disk"]["load_seconds"],
    "memory_misses": s["memory"]["misses"], "mode": torch_tpu.get_eager_mode(),
}))
"""


def run_once(env_extra, device="tpu"):
    env = dict(os.environ)
    env.pop("TORCH_TPU_CACHE", None)
    env.update(env_extra)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.time()
    out = subprocess.run([sys.executable, "-c", CHILD, os.path.join(ROOT, "examples"), device], env=env,
                         capture_output=True, text=True)
    t_exit = time.time()
    if out.returncode != 0:
        sys.exit(f"the training process failed:\n{out.stderr[-4000:]}")
    line = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")][-1]
    r = json.loads(line[len("RESULT "):])
    r["first_step"] = r["step"] - t0
    r["before_torch"] = r["python"] - t0
    r["import_torch"] = r["torch"] - r["python"]
    r["process"] = t_exit - t0
    r["step_itself"] = r["step"] - r["ready"]  # the first step alone: model built, step 1 started -> ended
    return r


def median_run(env_extra, repeat, before_each=None, device="tpu"):
    runs = []
    for _ in range(repeat):
        if before_each:
            before_each()
        runs.append(run_once(env_extra, device))
    runs.sort(key=lambda r: r["first_step"])
    return runs[len(runs) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs per row (the median is shown)")
    parser.add_argument("--modes", default="strict,fused", help="eager modes to measure")
    parser.add_argument("--dir", default=None, help="cache directory to use (emptied first; default: a temporary one)")
    args = parser.parse_args()
    directory = args.dir or tempfile.mkdtemp(prefix="torch_tpu-warm-start-")
    os.makedirs(directory, exist_ok=True)

    def empty():
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)

    print(f"Program: examples/gpt.py train('tpu', steps=1); cache directory: {directory}; "
          f"median of {args.repeat} run(s) per row")
    # The floor no compile cache can go below: the same script on CPU PyTorch.
    cpu = median_run({"TORCH_TPU_CACHE": "0"}, args.repeat, device="cpu")
    header = (f"{'':34}{'start->step 1':>14}{'before torch':>13}{'import torch':>13}{'compile':>9}"
              f"{'cache load':>11}{'other':>8}{'compiled':>10}{'loaded':>8}{'speed-up':>10}{'step 1 alone':>14}"
              f"{'speed-up':>10}")
    for mode in args.modes.split(","):
        env = {"TORCH_TPU_EAGER_MODE": mode, "TORCH_TPU_CACHE_DIR": directory}
        rows = [
            ("memory only (TORCH_TPU_CACHE=0)", median_run({**env, "TORCH_TPU_CACHE": "0"}, args.repeat)),
            ("cold (empty directory)", median_run(env, args.repeat, before_each=empty)),
        ]
        empty()
        run_once(env)  # fill it
        rows.append(("warm (same directory)", median_run(env, args.repeat)))
        rows.append(("reference: CPU PyTorch, device='cpu'", cpu))
        cold, warm = rows[1][1], rows[2][1]
        print(f"\nEager mode: {mode}")
        print(header)
        print("-" * len(header))
        for name, r in rows:
            other = r["first_step"] - r["before_torch"] - r["import_torch"] - r["compile_seconds"] - r["load_seconds"]
            print(f"{name:34}{r['first_step']:>13.2f}s{r['before_torch']:>12.2f}s{r['import_torch']:>12.2f}s"
                  f"{r['compile_seconds']:>8.2f}s{r['load_seconds']:>10.2f}s{other:>7.2f}s{r['compiles']:>10d}"
                  f"{r['disk_hits']:>8d}{cold['first_step'] / r['first_step']:>9.1f}x{r['step_itself']:>13.2f}s"
                  f"{cold['step_itself'] / r['step_itself']:>9.1f}x")
        after_import = lambda r: r["step"] - r["torch"]  # noqa: E731
        print(f"warm vs cold, process start -> end of step 1: {cold['first_step'] / warm['first_step']:.1f}x "
              f"(goal: 10x); CPU PyTorch itself needs {cpu['first_step']:.2f} s, so at most "
              f"{cold['first_step'] / cpu['first_step']:.1f}x is possible here")
        print(f"warm vs cold, after `import torch` -> end of step 1: {after_import(cold) / after_import(warm):.1f}x")
        print(f"warm vs cold, the first step alone (model built -> end of step 1): "
              f"{cold['step_itself'] / warm['step_itself']:.1f}x ({cold['step_itself']:.2f} s -> "
              f"{warm['step_itself']:.2f} s; CPU PyTorch: {cpu['step_itself']:.2f} s)")
        prep = lambda r: r["compile_seconds"] + r["load_seconds"]  # noqa: E731
        print(f"program preparation (compile, or load from the cache): {prep(cold):.2f} s -> {prep(warm):.2f} s "
              f"({prep(cold) / max(prep(warm), 1e-9):.0f}x)")
    if not args.dir:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
