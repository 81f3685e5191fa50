"""torch_tpu side by side with CPU PyTorch, Google's TorchTPU and jax.jit: one GPT training step, one run.

Every engine is a long-lived child process that builds the same model (benchmarks/eager_modes.py's gpt_case:
examples/gpt.py, seed 0, AdamW, loss read back every step), takes its first steps (timed: the compile),
warms up and waits; the parent then asks the children in turn (round-robin, the starting engine rotating each
round) for `--steps` timed steps, `--rounds` times, so that a change in the machine's load lands on every
engine alike. steps/s is 1 / the median step over all rounds; the range is that of the rounds' medians.

Engines (`--engines`, comma-separated names or the groups ours, torchtpu, jax, all; default all):
  cpu                       CPU eager PyTorch (its default intra-op threads: one per core)
  cpu-1t                    the same on one thread: with another process on the cores, the default's
                            parallel ops wait for a descheduled thread (0.8 against 47 steps/s seen on this
                            2-core machine under load); one thread does not
  ours-strict / -fused      torch_tpu's eager modes on the xla-cpu-pjrt plugin
  ours-cmodel               torch.compile(model, backend="tpu"): forward and backward graphs, AdamW in strict
  ours-cstep                torch.compile of the whole step (Dynamo splits it at backward and the optimizer)
  ours-*@lammps             the same on the lammps-jax-pjrt-cpu plugin (newer XLA, PJRT API 0.115)
  torchtpu-strict / -fused / -cmodel / -cstep
                            TorchTPU (build/torchtpu-venv, `make torchtpu-venv`) in DEFER_NEVER /
                            DEFER_AND_FUSE / compiled on the lammps plugin through tools/torchtpu_shim
  jax@jaxlib / jax@xla / jax@lammps
                            the step hand-written in JAX, one jax.jit program (benchmarks/jax_gpt.py), on
                            jaxlib's CPU client / the xla-cpu-pjrt plugin / the lammps plugin
Not in `all`: ours-debug, torchtpu-debug (DEFER_NEVER_AND_LAUNCH_BLOCKING), torchtpu-cstep1 (see below).

TorchTPU runs attention with SDPA's OVERRIDEABLE/MATH backends: its default choice for this model is a
Pallas TPU kernel (a tpu_custom_call) that XLA:CPU cannot compile. Its compiled steps use AdamW(capturable=True)
(its graphs take no CPU tensors: the step counts). torchtpu-cstep turns off torch._dynamo.config.
trace_autograd_ops, which TorchTPU turns on at import and with which this step trains nothing (torch 2.13);
torchtpu-cstep1 keeps it on and calls zero_grad outside the compiled function, which does train. The table's
last loss column shows whether an engine trained like CPU eager (same steps everywhere).

First step: wall time of the first step in a fresh process (compiles included) with empty compile caches
(ours: TORCH_TPU_CACHE_DIR; jax: its persistent cache; Inductor/AOTAutograd caches too), then again in one
more fresh process with the caches the first left (warm). TorchTPU has no persistent cache that we found:
its warm number is a second cold start. "programs/step": ours: strict ops (one program each), fused
flushes (a fused graph or an op group: foreach, attention, a linear's backward) and compiled-graph calls
(torch.tpu.executor_stats / _fused_stats); TorchTPU: lookups of its
compilation cache (one per eager program launched, torch.tpu._get_cache_requests) plus calls of its compiled
graphs (counted by wrapping TorchTpuCompiledExecutable.__call__); jax: one.

    python benchmarks/side_by_side.py [--cases small,large] [--rounds 3] [--steps 5] [--engines ...]
"""
import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TAG = "@@sbs "  # prefix of the children's protocol lines (libraries print to stdout too)
SIZES = {"small": ("gpt small (d128 L2 s64 b8)", (128, 2, 64, 8)),
         "large": ("gpt large (d512 L4 s128 b8)", (512, 4, 128, 8))}

# name -> (stack, mode, plugin)
ENGINES = {"cpu": ("cpu", "eager", None), "cpu-1t": ("cpu", "eager1", None)}
for _plugin, _suffix in (("xla", ""), ("lammps", "@lammps")):
    for _mode in ("strict", "fused", "cmodel", "cstep"):
        ENGINES[f"ours-{_mode}{_suffix}"] = ("ours", _mode, _plugin)
for _mode in ("strict", "fused", "cmodel", "cstep"):
    ENGINES[f"torchtpu-{_mode}"] = ("torchtpu", _mode, "lammps")
for _plugin in ("jaxlib", "xla", "lammps"):
    ENGINES[f"jax@{_plugin}"] = ("jax", "jit", _plugin)
DEFAULT = list(ENGINES)
ENGINES["ours-debug"] = ("ours", "debug", "xla")
ENGINES["torchtpu-debug"] = ("torchtpu", "debug", "lammps")
ENGINES["torchtpu-cstep1"] = ("torchtpu", "cstep1", "lammps")
PHASES = ("forward", "backward", "optimizer")
TT_MODES = {"strict": "DEFER_NEVER", "fused": "DEFER_AND_FUSE", "debug": "DEFER_NEVER_AND_LAUNCH_BLOCKING",
            "cmodel": "DEFER_NEVER", "cstep": "DEFER_NEVER", "cstep1": "DEFER_NEVER"}


def expand(spec):
    names = []
    for item in spec.split(","):
        item = item.strip()
        if item == "all":
            names += DEFAULT
        elif item in ("ours", "torchtpu", "jax"):
            names += [n for n in DEFAULT if ENGINES[n][0] == item]
        elif item in ENGINES:
            names.append(item)
        else:
            sys.exit(f"unknown engine {item!r}; known: {', '.join(ENGINES)} and the groups ours, torchtpu, jax, all")
    return list(dict.fromkeys(names))


# ----------------------------------------------------------------------------------------------- child side

def _reply(obj):
    sys.stdout.write(TAG + json.dumps(obj) + "\n")
    sys.stdout.flush()


def _torch_step(stack, mode, dims):
    """(step() -> loss as a float, counters() -> dict, a name, phases(n)) for a torch engine; sets up the device."""
    import torch
    if mode == "eager1":
        torch.set_num_threads(1)
    if stack == "torchtpu":
        import torch_tpu._loader
        torch_tpu._loader._init_device("tpu")  # its autoload does this only where a TPU PCI device exists
        from torch.nn.attention import SDPBackend, sdpa_kernel
        # Entered for the whole process (the reference keeps the generator's finally from undoing it).
        _torch_step.sdpa = sdpa_kernel([SDPBackend.OVERRIDEABLE, SDPBackend.MATH])
        _torch_step.sdpa.__enter__()
        torch.tpu.eager_mode = getattr(torch.tpu.EagerMode, TT_MODES[mode])
    elif stack == "ours":
        import torch_tpu
        torch_tpu.set_eager_mode("strict" if mode in ("cmodel", "cstep") else mode)
    sys.path.insert(0, HERE)
    from eager_modes import gpt_case, training_step
    device = "cpu" if stack == "cpu" else "tpu"
    model, loss_fn = gpt_case(device, *dims)
    if mode == "cmodel":
        model.compile(backend="tpu")
    # TorchTPU's compiled graphs take only tpu tensors: AdamW's step counts must live on the device.
    capturable = stack == "torchtpu" and mode in ("cstep", "cstep1")
    if stack == "torchtpu" and mode == "cstep":
        # TorchTPU turns this Dynamo flag on at import; with it this step (zero_grad inside) trains nothing
        # (no grads, no update) on torch 2.13. Off (torch's default), Dynamo splits the step as it does for ours.
        torch._dynamo.config.trace_autograd_ops = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=capturable)
    step = training_step(loss_fn, opt)

    if mode == "cstep":
        step = torch.compile(step, backend="tpu")
    elif mode == "cstep1":  # zero_grad outside the compiled function: trains with trace_autograd_ops on
        def inner():
            loss = loss_fn()
            loss.backward()
            opt.step()
            return loss
        compiled = torch.compile(inner, backend="tpu")

        def step():
            opt.zero_grad(set_to_none=True)
            return compiled()

    graph_calls = [0]
    if stack == "torchtpu":
        # Its compiled graphs run outside its compilation cache's lookups: count their calls (measurement only).
        from torch_tpu._internal.compile import torch_tpu_compiled_executable as tce
        call = tce.TorchTpuCompiledExecutable.__call__

        def counted(self, *a, **k):
            graph_calls[0] += 1
            return call(self, *a, **k)
        tce.TorchTpuCompiledExecutable.__call__ = counted

    def counters():
        if stack == "ours":
            from torch_tpu import _C
            e, f = torch.tpu.executor_stats(), _C._fused_stats()
            return {"ops": e["ops"], "fused_ops": f["fused_ops"], "flushes": f["flushes"],
                    "graphs": e["compiled_graphs"],
                    "compiles": e["compiles"], "compile_s": e["compile_seconds"]}
        if stack == "torchtpu":
            entries = torch.tpu._get_cache_stats().per_entry_stats
            return {"lookups": torch.tpu._get_cache_requests(), "graphs": graph_calls[0],
                    "compiles": torch.tpu._get_cache_misses(),
                    "compile_s": sum(x.compilation_duration.total_seconds() for x in entries)}
        return {}

    def phases(n):
        """n steps cut at the forward's loss read, after backward and after the optimizer (each phase waits for
        the device): median seconds and counter deltas per phase. None for the whole-step compile."""
        if mode in ("cstep", "cstep1"):
            return None
        # torch.accelerator's: TorchTPU refuses user calls of its torch.tpu.synchronize.
        sync = torch.accelerator.synchronize if device == "tpu" else (lambda: None)
        times, deltas = {p: [] for p in PHASES}, {}
        for _ in range(n):
            marks = [(time.perf_counter(), counters())]
            loss = loss_fn()
            loss.item()
            marks.append((time.perf_counter(), counters()))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            sync()
            marks.append((time.perf_counter(), counters()))
            opt.step()
            sync()
            marks.append((time.perf_counter(), counters()))
            for i, p in enumerate(PHASES):
                times[p].append(marks[i + 1][0] - marks[i][0])
                deltas[p] = {k: marks[i + 1][1][k] - marks[i][1][k] for k in marks[i][1]}
        return {p: {"seconds": statistics.median(times[p]), "counters": deltas[p]} for p in PHASES}

    name = {"cpu": f"cpu, intra-op threads: {torch.get_num_threads()}", "ours": "tpu: " + torch.tpu.get_device_name(),
            "torchtpu": f"TorchTPU's tpu ({torch.tpu.get_device_name()}) on the shim"}[stack]
    return (lambda: step().item()), counters, name, phases


def child(engine, key, warmup):
    stack, mode, plugin = ENGINES[engine]
    dims = SIZES[key][1]
    if stack == "jax":
        sys.path.insert(0, HERE)
        import jax_gpt
        step = jax_gpt.setup(*dims, "cpu" if plugin == "jaxlib" else "plugin", os.environ.get("SBS_PLUGIN") or None)
        counters, name, phases = (lambda: {}), f"jax ({plugin})", (lambda n: None)
    else:
        step, counters, name, phases = _torch_step(stack, mode, dims)
    firsts, losses = [], []
    for i in range(max(warmup, 2)):
        t0 = time.perf_counter()
        losses.append(step())
        if i < 2:
            firsts.append(time.perf_counter() - t0)
    _reply({"ready": True, "first": firsts, "loss": losses[0], "device": name, "counters": counters()})
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        n = int(cmd[1])
        if cmd[0] == "phases":
            _reply({"phases": phases(n)})
            continue
        c0, times, cpu = counters(), [], []
        for _ in range(n):
            t0, h0 = time.perf_counter(), time.thread_time()
            loss = step()
            times.append(time.perf_counter() - t0)
            cpu.append(time.thread_time() - h0)
        c1 = counters()
        _reply({"times": times, "cpu": cpu, "counters": {k: (c1[k] - c0[k]) / n for k in c1}, "loss": loss})


# ---------------------------------------------------------------------------------------------- parent side

def _plugins():
    """torch_tpu/_plugins.py alone: importing the package would start our runtime in the parent."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_sbs_plugins", os.path.join(ROOT, "torch_tpu", "_plugins.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lammps_plugin(venv):
    found = _plugins()._package_file("lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so")
    if found:
        return found
    for folder in _site_packages(venv):
        path = os.path.join(folder, "lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so")
        if os.path.exists(path):
            return path
    return None


def xla_plugin():
    return _plugins()._package_file("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so")


def _site_packages(venv):
    lib = os.path.join(venv, "lib")
    return [os.path.join(lib, d, "site-packages") for d in (os.listdir(lib) if os.path.isdir(lib) else [])]


class Child:
    """One engine's process; replies are read from its stdout with a timeout (a hung child is reported)."""

    def __init__(self, engine, key, args, cache, plugins):
        self.engine, self.error = engine, None
        stack, mode, plugin = ENGINES[engine]
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"),
                   TORCH_TPU_CACHE="1", TORCH_TPU_CACHE_DIR=os.path.join(cache, "torch_tpu"),
                   JAX_COMPILATION_CACHE_DIR=os.path.join(cache, "jax"),
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
        python = sys.executable
        if stack == "torchtpu":
            python = os.path.join(args.torchtpu_venv, "bin", "python")
            env.pop("PYTHONPATH", None)  # our torch_tpu must not shadow theirs (same package name)
            env.update(TPU_LIBRARY_PATH=os.path.join(args.torchtpu_venv, "pjrt_shim.so"),
                       PJRT_SHIM_PLUGIN=plugins["lammps"],
                       PYTHONWARNINGS="ignore::UserWarning", TF_CPP_MIN_LOG_LEVEL="1")
        else:
            env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
            if stack == "ours":
                env["TORCH_TPU_PJRT_PLUGIN"] = plugins[plugin]
            elif stack == "jax" and plugin != "jaxlib":
                env["SBS_PLUGIN"] = plugins[plugin]
        self.log_path = os.path.join(cache, "stderr.log")
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [python, os.path.abspath(__file__), "--child", engine, "--cases", key, "--warmup", str(args.warmup)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=ROOT)
        self.buf = b""

    def read(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                text = line.decode(errors="replace")
                if text.startswith(TAG):
                    return json.loads(text[len(TAG):])
            left = deadline - time.monotonic()
            if left <= 0:
                return self.fail(f"no reply in {timeout:.0f} s")
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    return self.fail(f"exited with status {self.proc.wait()}")
                self.buf += chunk

    def fail(self, why):
        self.log.flush()
        with open(self.log_path) as f:
            tail = [x for x in f.read().splitlines() if x.strip()][-3:]
        self.error = f"{why}: " + " | ".join(t[:200] for t in tail)
        self.close()
        return None

    def ask(self, steps, timeout, what="steps"):
        self.proc.stdin.write(f"{what} {steps}\n".encode())
        self.proc.stdin.flush()
        return self.read(timeout)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(b"quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def measure_case(key, engines, args, plugins):
    """{engine: result dict} for one model size."""
    results = {e: {"times": [], "cpu": [], "round_medians": []} for e in engines}
    root = tempfile.mkdtemp(prefix="side_by_side_")
    try:
        children = {}
        for e in engines:  # one at a time, so no compile competes with another engine's
            cache = os.path.join(root, e.replace("@", "_"))
            os.makedirs(cache)
            t0 = time.perf_counter()
            c = Child(e, key, args, cache, plugins)
            ready = c.read(args.timeout)
            if ready is None:
                results[e]["error"] = c.error
                print(f"  {e}: did not start ({c.error})", flush=True)
                continue
            results[e].update(first_cold=ready["first"], loss=ready["loss"], device=ready["device"],
                              startup=time.perf_counter() - t0, cache=cache, warmup_counters=ready["counters"])
            print(f"  {e}: ready in {results[e]['startup']:.1f} s (first step {ready['first'][0]:.2f} s, "
                  f"loss {ready['loss']:.4f}, {ready['device']})", flush=True)
            children[e] = c
        order = list(children)
        for r in range(args.rounds if order else 0):
            for e in order[r % len(order):] + order[:r % len(order)]:
                c = children[e]
                if c.error:
                    continue
                reply = c.ask(args.steps, args.timeout)
                if reply is None:
                    results[e]["error"] = c.error
                    print(f"  {e}: failed in round {r + 1} ({c.error})", flush=True)
                    continue
                results[e]["times"] += reply["times"]
                results[e]["cpu"] += reply["cpu"]
                results[e]["round_medians"].append(statistics.median(reply["times"]))
                results[e]["counters"] = reply["counters"]
                results[e]["last_loss"] = reply["loss"]
            print(f"  round {r + 1}/{args.rounds} done", flush=True)
        for e in order if args.phases else []:
            if children[e].error:
                continue
            reply = children[e].ask(args.phases, args.timeout, "phases")
            if reply is None:
                print(f"  {e}: phases failed ({children[e].error})", flush=True)
            elif reply["phases"]:
                results[e]["phases"] = reply["phases"]
        for c in children.values():
            c.close()
        if not args.no_warm:
            for e in children:  # a fresh process on the caches the first one left
                c = Child(e, key, argparse.Namespace(**{**vars(args), "warmup": 2}), results[e]["cache"], plugins)
                ready = c.read(args.timeout)
                if ready is not None:
                    results[e].update(first_warm=ready["first"], warm_counters=ready["counters"])
                c.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return results


def programs(engine, counters):
    stack, mode, _ = ENGINES[engine]
    if stack == "ours":
        # strict ops (one program each), fused graphs and op groups (one each), compiled-graph calls
        return counters["ops"] - counters["fused_ops"] + counters["flushes"] + counters["graphs"]
    if stack == "torchtpu":
        return counters["lookups"] + counters["graphs"]
    return 1 if stack == "jax" else None


def report(key, results, engines):
    name = SIZES[key][0]
    sps = {e: 1 / statistics.median(r["times"]) for e, r in results.items() if r["times"]}
    bases = [b for b in ("cpu", "cpu-1t") if b in sps]
    print(f"\n{name}: steps/s (median of all rounds' steps; range of the rounds' medians)")
    header = (f"{'engine':<22}{'steps/s':>9}{'range':>15}" + "".join(f"{'x ' + b:>9}" for b in bases)
              + f"{'host %':>8}{'programs/step':>15}{'last loss':>12}")
    print(header)
    print("-" * len(header))
    ref = next((results[b]["last_loss"] for b in bases), None)
    if ref is None and sps:
        ref = statistics.median(results[e]["last_loss"] for e in sps)
    odd = [e for e in sps if ref is not None and abs(results[e]["last_loss"] - ref) > 1e-2 * abs(ref)]
    for e in engines:
        r = results[e]
        if e not in sps:
            print(f"{e:<22}  -- {r.get('error', 'not measured')}")
            continue
        lo, hi = (1 / max(r["round_medians"]), 1 / min(r["round_medians"]))
        share = statistics.median(c / t for c, t in zip(r["cpu"], r["times"]))
        cnt = r.get("counters", {})
        prog = programs(e, cnt) if cnt or ENGINES[e][0] == "jax" else None
        print(f"{e:<22}{sps[e]:>9.2f}{f'{lo:.2f}-{hi:.2f}':>15}" + "".join(f"{sps[e] / sps[b]:>8.2f}x" for b in bases)
              + f"{share * 100:>7.0f}%" + (f"{prog:>15.0f}" if prog is not None else f"{'-':>15}")
              + f"{r['last_loss']:>12.4f}" + (" *" if e in odd else ""))
    if odd:
        print(f"* last loss differs from {ref:.4f} by more than 1%: trained differently, speed not comparable")
    print(f"\n{name}: first steps, seconds (cold: empty caches; warm: a new process on the caches the first left); "
          "XLA compiles in the first steps and their seconds (cold)")
    header = (f"{'engine':<22}{'1st cold':>10}{'2nd cold':>10}{'1st warm':>10}{'2nd warm':>10}{'compiles':>10}"
              f"{'compile s':>11}")
    print(header)
    print("-" * len(header))
    for e in engines:
        r = results[e]
        if "first_cold" not in r:
            continue
        warm, cnt = r.get("first_warm"), r.get("warmup_counters", {})
        print(f"{e:<22}" + "".join(f"{x:>10.2f}" for x in r["first_cold"])
              + ("".join(f"{x:>10.2f}" for x in warm) if warm else f"{'-':>10}{'-':>10}")
              + (f"{cnt['compiles']:>10}{cnt['compile_s']:>11.2f}" if "compiles" in cnt else f"{'-':>10}{'-':>11}"))
    phased = [e for e in engines if results[e].get("phases")]
    if phased:
        print(f"\n{name}: one step cut into phases, each waited for (ms, programs launched in it)")
        print(f"{'engine':<22}" + "".join(f"{p:>20}" for p in PHASES))
        for e in phased:
            ph = results[e]["phases"]
            cells = []
            for p in PHASES:
                prog = programs(e, ph[p]["counters"]) if ph[p]["counters"] else None
                cells.append(f"{ph[p]['seconds'] * 1e3:.1f}" + (f" ({prog:.0f})" if prog is not None else ""))
            print(f"{e:<22}" + "".join(f"{c:>20}" for c in cells))
    pairs = [(m, f"ours-{m}{s}", f"torchtpu-{m}") for m in ("strict", "fused", "cmodel", "cstep", "debug")
             for s in ("@lammps", "")]
    rows = [(m, o, t) for m, o, t in pairs if o in sps and t in sps and o not in odd and t not in odd]
    if rows:
        print(f"\n{name}: ours / TorchTPU, same mode (steps/s ratio; >1: ours faster)")
        for m, o, t in rows:
            print(f"  {m:<8}{o:<22}{sps[o]:>8.2f} / {sps[t]:<8.2f}= {sps[o] / sps[t]:.2f}x")
    own = [(f"ours-{m}{s}", f"ours-fused{s}") for s in ("@lammps", "") for m in ("cmodel", "cstep")]
    own = [(c, f) for c, f in own if c in sps and f in sps and c not in odd and f not in odd]
    if own:
        print(f"\n{name}: ours compiled / ours Fused, same plugin (steps/s ratio; >1: compiled faster)")
        for c, f in own:
            print(f"  {c:<22}{sps[c]:>8.2f} / {sps[f]:<8.2f}= {sps[c] / sps[f]:.2f}x")
    losses = {e: round(r["loss"], 4) for e, r in results.items() if "loss" in r}
    if len(set(losses.values())) > 1:
        print(f"first-step losses differ: {losses}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="small,large")
    parser.add_argument("--engines", default="all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per engine per round")
    parser.add_argument("--warmup", type=int, default=3, help="steps before timing (the first two included)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for one reply of a child")
    parser.add_argument("--phases", type=int, default=0, metavar="N",
                        help="after the rounds, N steps cut into forward / backward / optimizer (each waited for)")
    parser.add_argument("--no-warm", action="store_true", help="skip the warm-cache first-step processes")
    parser.add_argument("--torchtpu-venv", default=os.path.join(ROOT, "build", "torchtpu-venv"))
    parser.add_argument("--json", help="write the raw results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.cases, args.warmup)
    engines = expand(args.engines)
    plugins = {"xla": xla_plugin(), "lammps": lammps_plugin(args.torchtpu_venv)}
    have_tt = os.path.exists(os.path.join(args.torchtpu_venv, "bin", "python")) and \
        os.path.exists(os.path.join(args.torchtpu_venv, "pjrt_shim.so"))
    for e in list(engines):
        stack, _, plugin = ENGINES[e]
        why = None
        if stack == "torchtpu" and not have_tt:
            why = f"no TorchTPU venv at {args.torchtpu_venv} (make torchtpu-venv)"
        elif plugin in plugins and not plugins[plugin]:
            why = f"plugin {plugin} not found (pip install lammps-jax-pjrt-cpu, or make torchtpu-venv)"
        if why:
            print(f"skipping {e}: {why}")
            engines.remove(e)
    if not engines:
        sys.exit("side_by_side: none of the engines asked for can run here (see above)")
    print(f"engines: {', '.join(engines)}; {args.rounds} rounds x {args.steps} steps, warm-up {args.warmup}; "
          f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cpus")
    everything = {}
    for key in args.cases.split(","):
        print(f"{SIZES[key][0]}:", flush=True)
        everything[key] = measure_case(key, engines, args, plugins)
        report(key, everything[key], engines)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(everything, f, indent=1)


if __name__ == "__main__":
    main()
