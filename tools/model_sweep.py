"""Sweep every transformers model type (tests/models/auto_zoo.py) on tpu against CPU.

    python tools/model_sweep.py [--types a,b] [--limit N] [--modes strict,fused] [--debug | --debug-subset] [--jobs 1]

Each model type runs in its own subprocess with a 90 s limit (over it: status "slow"). Per type and class
(its main head, then its base model): build on CPU from the tiny config (seed 0); if that, the synthetic
inputs or the CPU forward fail: "not buildable tiny on CPU" with the exception's first line. Otherwise
forward, loss (out.loss, or the mean square of the main output), backward and one AdamW step on tpu in each
mode, against float64 CPU with CPU float32's own error, with tests/models/test_models_hf.py's `compare`
(imported: the same rule). Results: docs/model_coverage_auto.json (merged across runs) and
docs/model_coverage_auto.md. A failing type gets a reproducer in --repro-dir (default /tmp/sweep_bugs).

Known non-bugs, handled by rule (each documented in the generated doc):
  (a) all-zero router/gate weights (AFMoE's _init_weights zero-initialises its router): every routing score
      ties and torch.topk's tie order is unspecified, so such weights are redrawn normal(0, 0.5) first;
  (b) outputs decided by thresholds/NMS/nonzero over a near-flat score field (SuperPoint): reported as such
      only where CPU float32's own output differs from float64's in shape (the evidence), otherwise compared;
  (c) random numbers drawn inside forward: `noise=` is passed where forward takes it (ViTMAE); otherwise,
      where two CPU float32 runs under different seeds differ (the evidence; both with gradients on), every
      forward (CPU float32, the float64 reference, tpu in each mode) runs under tests/models/same_random.py's
      SameRandom mode, which serves each random factory / in-place fill / dropout from a CPU generator seeded by
      the call's index, so all see the same numbers (the calls replaced are named in the notes). Only where the
      two seeds still differ under the mode (a draw it cannot see) is the type reported as such, not compared;
  (d) inf/nan made inside forward on purpose (T5's log(0) position buckets, then masked): debug mode's
      non-finite check is off for the type only where CPU float32's forward itself makes inf/nan in some op
      (the evidence, named in the notes), as tests/models/model_zoo.py's `nonfinite` does by hand;
  (e) float32 hard-coded inside forward (`.float()`, `.to(torch.float32)`, dtype=torch.float32: Autoformer, MRA,
      Inkling2): only where the float64 reference fails as is, it runs under tests/models/widen.py's Widen mode,
      which turns those casts into float64 ones (counted in the notes); CPU float32 and tpu run unchanged.
"""
import argparse
import concurrent.futures
import contextlib
import copy
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "tests", "models")
JSON_PATH = os.path.join(ROOT, "docs", "model_coverage_auto.json")
DOC_PATH = os.path.join(ROOT, "docs", "model_coverage_auto.md")
LIMIT_S = 90
STAGES = ("forward", "loss", "backward", "adamw")
NOT_BUILDABLE = "not buildable tiny on CPU"
DISCRETE = "discrete output decided by float32 near-ties (CPU float32 vs float64 also differ)"
RANDOM = ("draws random numbers inside forward that fixing the draws does not make identical (CPU float32 under "
          "seeds 0 and 1 differ even with tests/models/same_random.py's mode); not compared")
# Debug mode (launch-blocking: each op completes before the next) on a representative subset, in all three modes:
# decoders, encoders, seq2seq, vision, audio, MoE, SSM/hybrid, multimodal, time series.
DEBUG_SUBSET = ("llama", "gpt2", "qwen3", "gemma2", "bert", "roberta", "deberta-v2", "t5", "bart", "whisper", "vit",
                "convnext", "swin", "wav2vec2", "hubert", "mixtral", "qwen2_moe", "deepseek_v3", "mamba", "mamba2",
                "jamba", "clip", "llava", "qwen2_vl", "patchtst")


def _first_line(e):
    lines = [x.strip() for x in str(e).strip().splitlines() if x.strip()]
    msg = lines[0] if lines else ""
    if msg.endswith(":") and len(lines) > 1:  # a header line (validation errors): the first detail too
        msg += " " + lines[1]
    msg = msg[:240]
    return f"{type(e).__name__}: {msg}"


# ---- the child: one model type ----------------------------------------------------------------------------

def _main_output(out):
    import torch
    for k in ("logits", "last_hidden_state", "prediction_logits", "logits_per_image", "spectrogram", "waveform",
              "predicted_depth", "reconstruction"):
        v = out.get(k) if hasattr(out, "get") else None
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return k, v

    def walk(x):
        if isinstance(x, torch.Tensor):
            if x.is_floating_point():
                yield x
        elif isinstance(x, (list, tuple)):
            for y in x:
                yield from walk(y)
        elif hasattr(x, "to_tuple"):
            for y in x.to_tuple():
                yield from walk(y)
    items = out.items() if hasattr(out, "items") else enumerate(out if isinstance(out, tuple) else (out,))
    for k, v in items:
        if k == "loss":
            continue
        for t in walk(v):
            return str(k), t
    raise RuntimeError("the model returns no floating-point output")


def _train_forward(model, inputs):
    import torch
    out = model(**inputs)
    name, main = _main_output(out)
    loss = out.get("loss") if hasattr(out, "get") else None
    if not isinstance(loss, torch.Tensor):
        loss = main.float().square().mean()
    elif loss.numel() != 1:
        loss = loss.float().mean()
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    return main, loss, grads, name


def _reinit_zero_routers(model):
    """Rule (a): all-zero router/gate weights (every routing score ties) redrawn normal(0, 0.5)."""
    import torch
    g = torch.Generator().manual_seed(1)
    done = []
    with torch.no_grad():
        for n, p in model.named_parameters():
            if re.search(r"(router|gate)", n) and p.dim() >= 2 and p.is_floating_point() and not p.any():
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
                done.append(n)
    return done


def _cpu_nonfinite_ops(model, inputs):
    """The aten ops whose floating outputs hold inf/nan in a CPU forward of `model` (rule (d)'s evidence)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    found = []

    class Scan(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = func.overloadpacket.__name__
            if name not in found and any(isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()
                                         and not torch.isfinite(t).all() for t in tree_leaves(out)):
                found.append(name)
            return out

    with torch.no_grad(), Scan():
        model(**inputs)
    return found


def _run_class(model_type, cls_name, task, modes, record, save):
    import torch
    import torch_tpu
    import transformers
    import auto_zoo
    from conftest import nonfinite_ok
    from same_random import SameRandom
    from widen import Widen
    from test_models_hf import _adamw, _float64, _float64_model, compare

    rec = record.setdefault("classes", {}).setdefault(cls_name, {"task": task, "modes": {}, "notes": []})
    save()
    try:
        cls = auto_zoo.model_class(model_type, cls_name)
        cfg = auto_zoo.config_for(cls, auto_zoo.tiny_config(model_type))
        torch.manual_seed(0)
        initial = cls(cfg).eval()
    except Exception as e:  # noqa: BLE001
        rec.update(status=NOT_BUILDABLE, reason="build: " + _first_line(e))
        return
    zeroed = _reinit_zero_routers(initial)
    if zeroed:
        rec["notes"].append(f"rule (a): all-zero router weights redrawn normal(0, 0.5): {', '.join(zeroed[:3])}"
                            + (" ..." if len(zeroed) > 3 else ""))
    try:
        inputs = auto_zoo.make_inputs(type(initial), cfg, task, seed=sum(map(ord, model_type)))
    except Exception as e:  # noqa: BLE001
        rec.update(status=NOT_BUILDABLE, reason="inputs: " + _first_line(e))
        return
    rec["inputs"] = {k: list(v.shape) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    if "noise" in inputs:
        rec["notes"].append("rule (c): forward's `noise=` passed (the same random masking on tpu and CPU)")
    try:
        torch.manual_seed(0)
        cpu_out, cpu_loss, cpu_grads, out_name = _train_forward(copy.deepcopy(initial), inputs)
    except Exception as e:  # noqa: BLE001
        rec.update(status=NOT_BUILDABLE, reason="CPU forward: " + _first_line(e))
        return
    rec["output"] = out_name
    if not torch.isfinite(cpu_out).all():  # tiny widths can vanish or overflow (ALIGN: embeddings normalised from 0)
        rec.update(status=NOT_BUILDABLE, reason=f"CPU forward: {out_name} has inf/nan at tiny sizes")
        return
    # Rule (c): randomness inside forward, by evidence (two CPU float32 runs under different seeds); then every
    # forward (CPU float32, float64, tpu) runs with the draws fixed (tests/models/same_random.py), if that makes
    # the two CPU runs equal.
    # (The second run has gradients on as the first had: some CPU kernels differ in the last bit without them.)
    rng = None
    torch.manual_seed(1)
    again = _main_output(copy.deepcopy(initial)(**inputs))[1].detach()
    if again.shape != cpu_out.shape or not torch.equal(again, cpu_out.detach()):
        rng = SameRandom(seed=0)
        try:
            torch.manual_seed(0)
            with rng:
                cpu_out, cpu_loss, cpu_grads, out_name = _train_forward(copy.deepcopy(initial), inputs)
            replaced = dict(rng.calls)
            rng.reset()
            with rng:
                torch.manual_seed(1)
                again = _main_output(copy.deepcopy(initial)(**inputs))[1].detach()
        except Exception as e:  # noqa: BLE001
            rec.update(status=NOT_BUILDABLE, reason="CPU forward with the random draws fixed: " + _first_line(e))
            return
        what = ", ".join(f"{k} x{v}" for k, v in sorted(replaced.items())) or "none seen"
        if again.shape != cpu_out.shape or not torch.equal(again, cpu_out.detach()):
            rec.update(status=RANDOM, reason=f"{RANDOM} (draws replaced: {what})")
            return
        rec["notes"].append(f"rule (c): random draws in forward (CPU float32 under seeds 0 and 1 differ) served "
                            f"from per-call CPU generators on every device and dtype: {what}")

    def fixed():
        """Each forward's draws from the first call's seed again (rule (c)), or nothing."""
        if rng is None:
            return contextlib.nullcontext()
        rng.reset()
        return rng
    def reference(widen=None):
        torch.manual_seed(0)
        with fixed(), (widen or contextlib.nullcontext()):
            return _train_forward(_float64_model(initial), {k: _float64(v) for k, v in inputs.items()})
    try:
        ex_out, ex_loss, ex_grads, _ = reference()
    except Exception as e:  # noqa: BLE001
        # Rule (e): float32 hard-coded inside forward (`.float()`, dtype=torch.float32): widened to float64 in the
        # reference only, and only where the plain float64 reference fails.
        widen = Widen()
        try:
            ex_out, ex_loss, ex_grads, _ = reference(widen)
        except Exception as e2:  # noqa: BLE001
            rec.update(status=NOT_BUILDABLE, reason="CPU float64 reference: " + _first_line(e)
                       + (f" (with float32 casts widened: {_first_line(e2)})" if str(e2) != str(e) else ""))
            return
        rec["notes"].append(f"rule (e): the float64 reference fails as is ({_first_line(e)[:100]}); forward's "
                            "float32 casts (and default dtype) widened to float64 in it: "
                            + ", ".join(f"{k} x{v}" for k, v in sorted(widen.calls.items())))
    # Rule (b): a discrete output whose shape float32 and float64 CPU disagree on (the evidence).
    if cpu_out.shape != ex_out.shape:
        rec.update(status=DISCRETE, reason=f"{DISCRETE}: {out_name} {list(cpu_out.shape)} on CPU float32, "
                                           f"{list(ex_out.shape)} on float64")
        return
    with fixed():
        nonfinite = _cpu_nonfinite_ops(copy.deepcopy(initial), inputs) if "debug" in modes else []
    if nonfinite:
        rec["notes"].append(f"rule (d): CPU float32 makes inf/nan inside forward ({', '.join(nonfinite[:3])}); "
                            "debug mode's non-finite check off")
    save()
    for mode in modes:
        stages = rec["modes"].setdefault(mode, {})
        t0 = time.time()

        def check(stage, ok, err=None, tol=None, why=""):
            stages[stage] = dict(ok=bool(ok), err=err, tol=tol, why=why)

        def error(stage, e):
            stages[stage] = dict(ok=False, err=None, tol=None, why=_first_line(e))
        guard = contextlib.ExitStack()
        if nonfinite and mode == "debug":
            guard.enter_context(nonfinite_ok())
        with guard, torch_tpu.eager_mode(mode):
            grads = None
            try:
                model = copy.deepcopy(initial).to("tpu")
                tin = {k: (v.to("tpu") if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
                torch.manual_seed(0)
                with fixed():
                    out, loss, grads, _ = _train_forward(model, tin)
                check("forward", *compare([out], [cpu_out], [ex_out]))
                check("loss", *compare([loss], [cpu_loss], [ex_loss]))
                grads = {n: g.cpu() for n, g in grads.items()}
                if set(grads) != set(cpu_grads):
                    check("backward", False, why=f"gradients for {sorted(set(grads) ^ set(cpu_grads))[:3]} differ")
                else:
                    # Zero-element gradients (DINOv3 with no register tokens) have nothing to compare, and
                    # compare's max() over them would raise.
                    names = sorted(n for n in cpu_grads if cpu_grads[n].numel())
                    ok, err, tol = compare([grads[n] for n in names], [cpu_grads[n] for n in names],
                                           [ex_grads[n] for n in names])
                    worst = ""
                    if not ok:  # name the worst gradient
                        worst = max(names, key=lambda n: compare([grads[n]], [cpu_grads[n]], [ex_grads[n]])[1]
                                    / max(compare([grads[n]], [cpu_grads[n]], [ex_grads[n]])[2], 1e-30))
                    check("backward", ok, err, tol, why=f"worst gradient {worst}" if worst else "")
            except Exception as e:  # noqa: BLE001
                error("forward" if "forward" not in stages else "backward", e)
                rec.setdefault("traceback", {})[mode] = traceback.format_exc()[-3000:]
                grads = None
            if grads is not None:
                try:
                    after = _adamw(model, {n: g.to("tpu") for n, g in grads.items()})
                    after = {n: p.cpu() for n, p in after.items()}
                    cpu_after = _adamw(copy.deepcopy(initial), grads)
                    ex_after = _adamw(_float64_model(initial), grads)
                    names = sorted(n for n in after if after[n].numel())
                    check("adamw", *compare([after[n] for n in names], [cpu_after[n] for n in names],
                                            [ex_after[n] for n in names]))
                except Exception as e:  # noqa: BLE001
                    error("adamw", e)
            try:
                torch.tpu.synchronize()
            except Exception as e:  # noqa: BLE001
                error("sync", e)
        stages["seconds"] = round(time.time() - t0, 1)
        save()
    bad = [(m, s, r) for m, st in rec["modes"].items() for s, r in st.items() if isinstance(r, dict) and not r["ok"]]
    if bad:
        m, s, r = bad[0]
        detail = f"err {r['err']:.3g} > tol {r['tol']:.3g}" if r["err"] is not None else ""
        rec.update(status="fails", reason="; ".join(f"{m} {s}: {detail or r['why']}" + (f" ({r['why']})" if detail and r["why"] else "")
                                                     for m, s, r in bad[:4]))
    else:
        rec.update(status="pass", reason="")
    save()


def child(model_type, modes, result_path, which):
    os.environ.pop("TORCH_TPU_CPU_FALLBACK", None)
    sys.path.insert(0, MODELS)
    import warnings
    warnings.filterwarnings("ignore")
    import torch  # noqa: F401  (autoloads torch_tpu)
    import transformers
    transformers.logging.set_verbosity_error()
    import auto_zoo

    record = {"type": model_type, "classes": {}}

    def save():
        with open(result_path + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(result_path + ".tmp", result_path)
    base, head = auto_zoo.classes(model_type)
    record["base"], record["head"] = base, (head[1] if head else None)
    todo = []
    if head and "head" in which:
        todo.append((head[1], head[0]))
    if base and ("base" in which or not todo) and (not head or base != head[1]):
        todo.append((base, None))
    if not todo:
        record.update(status=NOT_BUILDABLE, reason="no model class in transformers' auto mappings")
    save()
    for cls_name, task in todo:
        _run_class(model_type, cls_name, task, modes, record, save)
        save()


# ---- the parent ----------------------------------------------------------------------------------------------

def _summarise(rec):
    """A type's status and reason from its classes' (the worst wins)."""
    if rec.get("status") in ("slow", "crash") or not rec.get("classes"):
        return rec.get("status", NOT_BUILDABLE), rec.get("reason", "")
    order = ["fails", "slow", DISCRETE, RANDOM, "pass", NOT_BUILDABLE]
    sts = [(c.get("status", "slow"), n, c.get("reason", "")) for n, c in rec["classes"].items()]
    for s in order:
        hit = [x for x in sts if x[0] == s]
        if hit:
            if s == NOT_BUILDABLE and len(hit) < len(sts):
                continue
            if s == "pass":
                nb = [x for x in sts if x[0] == NOT_BUILDABLE]
                return "pass", "; ".join(f"{n} {NOT_BUILDABLE}: {r}" for _, n, r in nb)
            return s, "; ".join(f"{n}: {r}" for _, n, r in hit)
    return sts[0][0], sts[0][2]


def run_type(model_type, modes, which, repro_dir):
    fd, path = tempfile.mkstemp(suffix=".json", prefix=f"sweep_{model_type}_")
    os.close(fd)
    os.unlink(path)
    cmd = [sys.executable, os.path.abspath(__file__), "--one", model_type, "--modes", ",".join(modes),
           "--result", path, "--classes", which]
    env = dict(os.environ)
    env.pop("TORCH_TPU_CPU_FALLBACK", None)
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, env=env,
                            cwd=ROOT)
    status = None
    try:
        out, _ = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the child's own process group
        out, _ = proc.communicate()
        status = "slow"
    seconds = round(time.time() - t0, 1)
    rec = {"type": model_type}
    if os.path.exists(path):
        with open(path) as f:
            rec = json.load(f)
        os.unlink(path)
    rec["seconds"] = seconds
    if status == "slow":
        rec.update(status="slow", reason=f"over {LIMIT_S} s (finished: " + ", ".join(
            f"{c} {'/'.join(v.get('modes', {}))}" for c, v in rec.get("classes", {}).items()) + ")")
    elif proc.returncode != 0:
        tail = out.decode(errors="replace").strip().splitlines()[-3:] if out else []
        rec.update(status="crash", reason=f"process exited {proc.returncode}: " + " | ".join(tail)[-300:])
    else:
        rec.pop("status", None) if rec.get("classes") else None
    rec["status"], rec["reason"] = _summarise(rec) if status != "slow" and rec.get("status") != "crash" else (
        rec["status"], rec["reason"])
    if rec["status"] in ("fails", "crash") and repro_dir:
        write_repro(rec, modes, repro_dir)
    return rec


REPRO = '''"""Reproducer: {type} ({cls}) on tpu vs CPU float64 in {mode} mode. Sweep said: {reason}

Run: {py} {path}
"""
import copy, sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, {models!r})
import torch, torch_tpu, transformers
transformers.logging.set_verbosity_error()
import auto_zoo
from test_models_hf import compare, _float64, _float64_model
sys.path.insert(0, {tools!r})
from model_sweep import _train_forward, _reinit_zero_routers

cls = auto_zoo.model_class({type!r}, {cls!r})
cfg = auto_zoo.config_for(cls, auto_zoo.tiny_config({type!r}))
torch.manual_seed(0)
model = cls(cfg).eval()
_reinit_zero_routers(model)
inputs = auto_zoo.make_inputs(type(model), cfg, {task!r}, seed={seed})
import contextlib
from same_random import SameRandom
from widen import Widen
rng = SameRandom(seed=0) if {fixed!r} else None  # rule (c): the same random draws on every device and dtype


def fixed():
    if rng is None:
        return contextlib.nullcontext()
    rng.reset()
    return rng


with fixed():
    cpu = _train_forward(copy.deepcopy(model), inputs)
with fixed(), (Widen() if {widen!r} else contextlib.nullcontext()):  # rule (e)
    ex = _train_forward(_float64_model(model), {{k: _float64(v) for k, v in inputs.items()}})
with torch_tpu.eager_mode({mode!r}), fixed():
    tpu = _train_forward(copy.deepcopy(model).to("tpu"),
                         {{k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}})
    print("forward (ok, err, tol):", compare([tpu[0]], [cpu[0]], [ex[0]]))
    print("loss    (ok, err, tol):", compare([tpu[1]], [cpu[1]], [ex[1]]))
    bad = []
    for n in sorted(cpu[2]):
        if n not in tpu[2]:
            print("no tpu gradient for", n); continue
        r = compare([tpu[2][n]], [cpu[2][n]], [ex[2][n]])
        if not r[0]:
            bad.append((r[1] / r[2], n, r))
    for _, n, r in sorted(bad, reverse=True)[:10]:
        print("grad", n, "(ok, err, tol):", r)
    print("FAIL" if bad else "gradients ok")
'''


def write_repro(rec, modes, repro_dir):
    os.makedirs(repro_dir, exist_ok=True)
    for cls, c in rec.get("classes", {}).items():
        if c.get("status") != "fails" and rec["status"] != "crash":
            continue
        bad_mode = next((m for m, st in c.get("modes", {}).items()
                         if any(isinstance(r, dict) and not r["ok"] for r in st.values())), modes[0])
        path = os.path.join(repro_dir, f"{rec['type']}.py")
        with open(path, "w") as f:
            f.write(REPRO.format(type=rec["type"], cls=cls, mode=bad_mode, reason=rec.get("reason", "")[:300],
                                 py=sys.executable, path=path, models=MODELS, tools=os.path.join(ROOT, "tools"),
                                 task=c.get("task"), seed=sum(map(ord, rec["type"])),
                                 fixed=any(n.startswith("rule (c)") for n in c.get("notes", [])),
                                 widen=any(n.startswith("rule (e)") for n in c.get("notes", []))))
        rec["repro"] = path
        return


def _cell(rec, cls, mode):
    c = rec.get("classes", {}).get(cls, {})
    st = c.get("modes", {}).get(mode)
    if c.get("status") in (NOT_BUILDABLE, RANDOM, DISCRETE):
        return {NOT_BUILDABLE: "not buildable", RANDOM: "random in forward", DISCRETE: "discrete near-ties"}[c["status"]]
    if not st:
        return "slow" if rec.get("status") == "slow" else ("crash" if rec.get("status") == "crash" else "not run")
    bad = [s for s in STAGES if s in st and not st[s]["ok"]]
    if bad:
        return "FAIL " + "/".join(bad)
    return "pass" if all(s in st for s in STAGES) else "incomplete"


def write_doc(results, modes_run):
    import auto_zoo
    types = auto_zoo.model_types()
    counts = {}
    for t in types:
        s = results.get(t, {}).get("status", "not run")
        counts[s] = counts.get(s, 0) + 1
    modes = [m for m in ("strict", "fused", "debug") if any(
        m in c.get("modes", {}) for r in results.values() for c in r.get("classes", {}).values())] or list(modes_run)
    ran = [r["seconds"] for r in results.values() if r.get("seconds") is not None]
    lines = [
        "# Model coverage: every transformers model type (generated)",
        "",
        f"Generated by `tools/model_sweep.py` (`make test-models-auto`) on {datetime.date.today()} with transformers "
        f"{__import__('transformers').__version__}; the table comes from transformers' own auto mappings "
        "(tests/models/auto_zoo.py): every model type of `CONFIG_MAPPING`, its config class's defaults shrunk "
        "to tiny sizes, its main head (first of causal LM, masked LM, seq2seq LM, speech seq2seq, image "
        "classification, audio classification, CTC, sequence classification, ...) and its base model, inputs "
        "synthesized from the class's `main_input_name`. Each type runs in its own process with a "
        f"{LIMIT_S} s limit: forward, loss, backward and one AdamW step on tpu against float64 CPU, with "
        "tests/models/test_models_hf.py's `compare` (every element within 1e-5 + 1e-5 |float64| + 4x CPU "
        "float32's largest error on that tensor). The hand-written suite (docs/model_coverage.md) stays where "
        "it tests more (generate, MoE expert paths).",
        "",
        "Statuses: **pass**; **fails** (a bug of ours, with the stage and err / tol); **not buildable tiny on "
        "CPU** (building, the synthetic inputs or the CPU forward fail: the exception's first line); **slow** "
        f"(over {LIMIT_S} s); **crash** (the process died); and two reported by rule only with evidence:",
        "",
        "- (a) routers whose gate weight `_init_weights` zero-initialises (AFMoE...): every routing score ties "
        "and torch.topk's tie order is unspecified (CPU's quickselect returns arbitrary tied indices, tpu the "
        "lowest), so all-zero router/gate weights are redrawn normal(0, 0.5) before the comparison (noted per "
        "type);",
        f"- (b) *{DISCRETE}*: outputs decided by thresholds/NMS/nonzero over a near-flat score field "
        "(SuperPoint-like); reported so only where CPU float32's output itself differs from float64's in shape;",
        "- (c) random numbers drawn inside forward: where forward takes `noise=` (ViTMAE) it is passed; otherwise, "
        "where two CPU float32 runs under seeds 0 and 1 differ (the evidence), every forward (CPU float32, float64, "
        "tpu) runs under tests/models/same_random.py's `SameRandom` mode: each random factory (randn, rand, randint, "
        "*_like, randperm, normal, bernoulli, multinomial), in-place fill (normal_, uniform_, bernoulli_, "
        "exponential_...) and training-mode dropout is served from a CPU generator seeded by the call's index, drawn "
        "in float32 and converted to the requested dtype and device, so every run sees the same numbers; the calls "
        "replaced are named in the notes. Only where the two seeds still differ under the mode: "
        f"*{RANDOM}*;",
        "- (d) inf/nan made inside forward on purpose (T5's log(0) position buckets, then masked): debug mode's "
        "non-finite check is off for the type only where CPU float32's forward makes inf/nan in some op itself "
        "(named in the notes);",
        "- (e) float32 hard-coded inside forward (`.float()`, `.to(torch.float32)`, `dtype=torch.float32`: "
        "Autoformer, MRA, Inkling2): only where the float64 reference fails as is, it runs under "
        "tests/models/widen.py's `Widen` mode, which makes those casts float64 (counted in the notes); CPU float32 "
        "and tpu run the model unchanged.",
        "",
        f"Debug mode runs on a representative subset of {len(DEBUG_SUBSET)} types (`--debug-subset`: "
        + ", ".join(DEBUG_SUBSET) + "), in all three modes; its column says *not run* for the other types.",
        "",
        "Counts: " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
        + (f". Mean time per type run: {sum(ran) / len(ran):.1f} s over {len(ran)} types." if ran else "."),
        "",
        "| model type | class | " + " | ".join(modes) + " | status | reason / notes |",
        "|---|---|" + "---|" * len(modes) + "---|---|",
    ]
    for t in types:
        rec = results.get(t)
        if rec is None:
            lines.append(f"| {t} | | " + " | ".join("not run" for _ in modes) + " | not run | |")
            continue
        cls = list(rec.get("classes", {})) or [""]
        for i, c in enumerate(cls):
            cells = [_cell(rec, c, m) for m in modes]
            notes = "; ".join(rec.get("classes", {}).get(c, {}).get("notes", []))
            crec = rec.get("classes", {}).get(c, {})
            reason = crec.get("reason", "") if crec.get("status") != "pass" else ""
            if i == 0 and (rec.get("status") in ("slow", "crash") or not rec.get("classes")):
                reason = rec.get("reason", "")
            text = "; ".join(x for x in (reason, notes) if x).replace("|", "\\|").replace("\n", " ")
            status = (rec.get("status", "") if i == 0 else "")
            lines.append(f"| {t if i == 0 else ''} | {c} | " + " | ".join(cells) + f" | {status} | {text} |")
    os.makedirs(os.path.dirname(DOC_PATH), exist_ok=True)
    with open(DOC_PATH, "w") as f:
        f.write("\n".join(lines) + "\n")
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--types", help="comma-separated model types (default: every type of CONFIG_MAPPING)")
    ap.add_argument("--limit", type=int, help="only the first N types (alphabetically)")
    ap.add_argument("--start", type=int, default=0, help="skip the first N types")
    ap.add_argument("--modes", default="strict,fused")
    ap.add_argument("--debug", action="store_true", help="add debug mode")
    ap.add_argument("--debug-subset", action="store_true",
                    help="the DEBUG_SUBSET types in strict, fused and debug (a type's record is replaced whole, so "
                         "its other modes run again too)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--classes", default="head,base", help="head, base or head,base")
    ap.add_argument("--json", default=JSON_PATH)
    ap.add_argument("--repro-dir", default="/tmp/sweep_bugs")
    ap.add_argument("--fresh", action="store_true", help="do not merge with the existing JSON")
    ap.add_argument("--doc-only", action="store_true", help="only rewrite the doc from the JSON")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if args.debug and "debug" not in modes:
        modes.append("debug")
    if args.one:
        child(args.one, modes, args.result, args.classes.split(","))
        return
    sys.path.insert(0, MODELS)
    import auto_zoo
    if args.debug_subset:
        args.types, modes = ",".join(DEBUG_SUBSET), ["strict", "fused", "debug"]
    types = args.types.split(",") if args.types else auto_zoo.model_types()
    types = types[args.start:]
    if args.limit:
        types = types[:args.limit]
    results = {}
    if not args.fresh and os.path.exists(args.json):
        with open(args.json) as f:
            results = json.load(f)

    if args.doc_only:
        print("counts:", write_doc(results, modes))
        return

    def save():
        os.makedirs(os.path.dirname(args.json), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
        write_doc(results, modes)
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futs = {pool.submit(run_type, t, modes, args.classes, args.repro_dir): t for t in types}
        for fut in concurrent.futures.as_completed(futs):
            t = futs[fut]
            rec = fut.result()
            results[t] = rec
            print(f"{t:40s} {rec['seconds']:6.1f}s  {rec['status']}  {rec.get('reason', '')[:160]}", flush=True)
            save()
    save()
    counts = {}
    for t in types:
        counts[results[t]["status"]] = counts.get(results[t]["status"], 0) + 1
    print("counts:", counts)
    sys.exit(1 if counts.get("fails") or counts.get("crash") or counts.get("slow") else 0)


if __name__ == "__main__":
    main()
