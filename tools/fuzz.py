"""Differential fuzzer: seeded random programs run on CPU and on tpu in Strict, Fused, Debug and compiled.

    python tools/fuzz.py -n 2000                  # seeds 0..1999, every mode, 2 worker processes
    python tools/fuzz.py --seeds 500:600 --modes fused,compile --jobs 1
    python tools/fuzz.py --seed 1234 --show       # print one program (as Python) and its result per mode

Each program (tools/fuzzlib/gen.py) is 5-60 ops over small tensors of every dtype tpu supports, with views,
in-place writes through views, broadcasting, 0-size shapes, backward and RNG ops; tools/fuzzlib/check.py runs
it and compares with CPU by the OpInfo harness's rule. A failing program is shrunk (tools/fuzzlib/shrink.py) and
written as a standalone reproducer under --out. Programs run in worker subprocesses with a watchdog: a crash or
a hang costs that program (reported with its seed), never the run. Exit status 1 when anything failed.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import select
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

MODES = ("strict", "fused", "debug", "compile")


def run_seed(seed, modes, out_dir, shrink_budget):
    """Checks one program in-process; returns its result record (with reproducer paths for failures)."""
    from fuzzlib import check, gen, shrink

    t0 = time.time()
    program = gen.generate(seed)
    cpu = check.run_cpu(program)
    res = check.check(program, modes, cpu=cpu)
    rec = {"seed": seed, "ops": len(program["ops"]), "secs": 0.0, "modes": [m for m in modes if res[m] is not None],
           "fails": [], "explained": [list(e) for e in res.get("explained", [])]}
    seen = set()
    for mode in modes:
        for f in res[mode] or []:
            rec["fails"].append({k: f[k] for k in ("mode", "call", "kind", "op", "detail")})
            # One reproducer per mode: a program's later failures in a mode usually follow from its first.
            if mode in seen or shrink_budget <= 0:
                continue
            seen.add(mode)
            small = shrink.shrink(program, mode, f.signature, budget=shrink_budget)
            path = os.path.join(out_dir, f"seed{seed}_{mode}_{f['kind']}_{f['op']}.py")
            os.makedirs(out_dir, exist_ok=True)
            with open(path, "w") as fh:
                fh.write(shrink.reproducer(small, mode, f))
            rec["fails"][-1]["repro"] = path
            rec["fails"][-1]["repro_ops"] = len(small["ops"])
    rec["secs"] = round(time.time() - t0, 3)
    return rec


def worker_main(args):
    import torch  # noqa: F401
    import torch_tpu  # noqa: F401

    modes = args.modes.split(",")
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        seed = int(line)
        print(json.dumps({"start": seed}), flush=True)
        try:
            rec = run_seed(seed, modes, args.out, args.shrink_budget)
        except Exception as e:  # the fuzzer itself failed on this program: reported, not swallowed
            rec = {"seed": seed, "ops": 0, "secs": 0, "modes": [], "fails": [
                {"mode": "all", "call": "all", "kind": "harness_error", "op": "run",
                 "detail": f"{type(e).__name__}: {e}"}]}
        print(json.dumps(rec), flush=True)


class Worker:
    def __init__(self, args):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--modes", args.modes, "--out", args.out,
               "--shrink-budget", str(args.shrink_budget)]
        # The workers' stderr (the ops' own warnings, a crash's last words) goes to a log beside the reproducers.
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "workers.log"), "a") as log:
            self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                      bufsize=1, cwd=ROOT)
        self.seed, self.since, self.ready = None, time.time(), False

    def give(self, seed):
        self.seed, self.since = seed, time.time()
        self.p.stdin.write(f"{seed}\n")
        self.p.stdin.flush()

    def kill(self):
        self.p.kill()
        self.p.wait()


def run_parallel(seeds, args, progress):
    """Results for every seed, workers restarted after a crash or hang."""
    pending = collections.deque(seeds)
    workers = [Worker(args) for _ in range(min(args.jobs, len(seeds)) or 1)]
    results = []
    while workers:
        for w in list(workers):
            if w.ready and w.seed is None:
                if pending:
                    w.give(pending.popleft())
                else:
                    w.p.stdin.close()
                    w.p.wait()
                    workers.remove(w)
        if not workers:
            break
        fds = {w.p.stdout.fileno(): w for w in workers}
        ready, _, _ = select.select(list(fds), [], [], 1.0)
        for fd in ready:
            w = fds[fd]
            line = w.p.stdout.readline()
            if not line:  # the worker died
                if w.seed is not None:
                    results.append(_lost(w.seed, "crash", f"worker exited with {w.p.wait()} (stderr in "
                                         f"{os.path.join(args.out, 'workers.log')})", args))
                    progress(results[-1])
                workers.remove(w)
                if pending:
                    workers.append(Worker(args))
                continue
            msg = json.loads(line)
            if msg.get("ready"):
                w.ready = True
            elif "start" in msg:
                w.since = time.time()
            else:
                results.append(msg)
                progress(msg)
                w.seed = None
        for w in list(workers):
            limit = args.timeout if w.ready else 300
            if time.time() - w.since > limit:
                w.kill()
                workers.remove(w)
                if w.seed is not None:
                    results.append(_lost(w.seed, "hang", f"no result after {limit:.0f} s", args))
                    progress(results[-1])
                if pending or w.seed is None:
                    workers.append(Worker(args))
    return sorted(results, key=lambda r: r["seed"])


def _lost(seed, kind, why, args):
    return {"seed": seed, "ops": 0, "secs": 0, "modes": [], "fails": [
        {"mode": "?", "call": "?", "kind": kind, "op": "run",
         "detail": f"{why}; rerun: python tools/fuzz.py --seeds {seed}:{seed + 1} --modes {args.modes} --jobs 1"}]}


def summarize(results, elapsed):
    runs = sum(len(r["modes"]) for r in results)
    ops = sum(r["ops"] for r in results)
    failing = [r for r in results if r["fails"]]
    explained = [r for r in results if r.get("explained")]
    lines = [f"{len(results)} programs ({ops} ops), {runs} program runs on tpu in {elapsed:.0f} s: "
             f"{len(failing)} failing, {len(explained)} where compile differs from CPU eager as PyTorch's own "
             f"compile on CPU does"]
    by = collections.Counter((f["mode"], f["kind"], f["op"]) for r in failing for f in r["fails"])
    for (mode, kind, op), n in sorted(by.items()):
        seeds = [r["seed"] for r in failing if any((f["mode"], f["kind"], f["op"]) == (mode, kind, op)
                                                   for f in r["fails"])]
        lines.append(f"  {mode:8s} {kind:18s} {op:14s} x{n}  seeds {seeds[:8]}")
    for r in failing:
        for f in r["fails"]:
            if f.get("repro"):
                lines.append(f"  reproducer ({f['repro_ops']} ops): {f['repro']}")
    return "\n".join(lines)


def show(seed, modes):
    import torch_tpu  # noqa: F401
    from fuzzlib import check, gen, program

    p = gen.generate(seed)
    print(program.function_source(p))
    res = check.check(p, modes)
    for mode in modes:
        print(f"{mode}: {'skipped (CPU raises)' if res[mode] is None else res[mode] or 'ok'}")
    for mode, kind, op in res.get("explained", []):
        print(f"{mode}: {kind} in {op} as in PyTorch's compile on CPU (aot_eager)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=200, help="programs (seeds --start .. --start+n-1)")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seeds", help="A:B, instead of -n/--start")
    ap.add_argument("--seed", type=int, help="one seed (with --show)")
    ap.add_argument("--show", action="store_true", help="print the program and its result per mode")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one program (with shrinking) may take")
    ap.add_argument("--shrink-budget", type=int, default=250, help="checks the shrinker may spend per failure")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "fuzz"), help="folder for reproducers")
    ap.add_argument("--json", help="write every program's result record here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main(args)
    modes = tuple(args.modes.split(","))
    if args.show:
        return show(args.seed, modes)
    if args.seeds:
        a, b = (int(x) for x in args.seeds.split(":"))
        seeds = list(range(a, b))
    else:
        seeds = list(range(args.start, args.start + args.n))
    t0 = time.time()

    def progress(rec):
        done = progress.count = getattr(progress, "count", 0) + 1
        if rec["fails"]:
            for f in rec["fails"]:
                print(f"seed {rec['seed']}: {f['call']} {f['kind']} in {f['op']}: {f['detail'][:160]}", flush=True)
        if done % 100 == 0 or done == len(seeds):
            print(f"[{time.time() - t0:.0f}s] {done}/{len(seeds)} programs", flush=True)

    results = run_parallel(seeds, args, progress)
    print(summarize(results, time.time() - t0))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"modes": modes, "results": results, "secs": round(time.time() - t0, 1)}, fh, indent=1)
    return 1 if any(r["fails"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
