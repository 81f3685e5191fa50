"""Runs a program on CPU (and float64 CPU, the reference) and on tpu in one mode, and compares.

Values are compared with the OpInfo harness's own rule (tests/opinfo/harness.py, imported, not re-written):
a fixed per-dtype tolerance against CPU, and where that fails for a floating result, "as accurate as CPU"
against float64 (within the tolerance plus CPU_ERROR_FACTOR x CPU float32's own largest error on that output;
for float16/bfloat16, element by element). Integers and bools must be equal. RNG outputs are compared by
distribution (the harness's _compare_random). Pure views must also agree in strides and storage offset.
Errors: an op CPU rejects must be rejected on tpu; an op tpu rejects (or a crash at the final sync) that CPU
runs is a mismatch.
"""
from __future__ import annotations

import os
import sys
import warnings

import torch

from .program import OpError, backward, build_inputs, compile_function, run_eager

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "opinfo"))
import harness  # noqa: E402  (the comparison rule lives there)

MODES = ("strict", "fused", "debug", "compile")
warnings.filterwarnings("ignore", category=UserWarning)


class Failure(dict):
    """{"mode", "kind", "op", "detail", "out"}; kind: value, grad, stride, tpu_raises, missing_error,
    grad_raises, missing_grad_error, crash. The (kind, op) pair is what the shrinker keeps reproducing."""

    @property
    def signature(self):
        return (self["kind"], self["op"])


def _dname(t):
    return str(t.dtype).replace("torch.", "")


def _producer(program, vid):
    for rec in program["ops"]:
        if rec["out"] == vid:
            return rec
    return {"op": "input", "kind": "input"}


# Coarsest first: a value computed through a bfloat16 intermediate carries bfloat16's error whatever its dtype.
PRECISION = ("bfloat16", "float16", "float32", "float64")


def coarsest_float_dtypes(program, dtypes):
    """value id -> the coarsest floating dtype among the value and everything it was computed from (None for
    a value with no floating ancestry). `dtypes`: value id -> dtype name, from the CPU run."""
    coarse = {}

    def pick(names):
        names = [n for n in names if n in PRECISION]
        return min(names, key=PRECISION.index) if names else None

    for spec in program["inputs"]:
        coarse[spec["id"]] = pick([spec["dtype"]])
    for rec in program["ops"]:
        coarse[rec["out"]] = pick([dtypes.get(rec["out"])] + [coarse.get(a) for a in rec["args"]])
    return coarse


def chain_lengths(program):
    """value id -> the longest chain of ops it was computed through (inputs: 0)."""
    depth = {spec["id"]: 0 for spec in program["inputs"]}
    for rec in program["ops"]:
        depth[rec["out"]] = 1 + max((depth.get(a, 0) for a in rec["args"]), default=0)
    return depth


def compare_tensor(a, e, r, random_=False, via=None, chained=False):
    """None when `a` (tpu) matches `e` (CPU) by the harness's rule (`r`: the float64 reference or None),
    else a short reason. `via`: the coarsest floating dtype the value was computed through; where it is
    coarser than the value's own, its tolerance applies (a bfloat16 result converted to float32 is off from
    CPU's by bfloat16's rounding, not float32's). `chained`: computed through more than one op; then a
    float16/bfloat16 value is held to the tensor-wide bar (CPU_ERROR_FACTOR x CPU's largest error on it), as
    float32 is: one rounding that differs upstream (a correctly rounded rsqrt where CPU's is an ulp off) moves
    every later element by the chain's amplification, and CPU's own element may happen to be close."""
    try:
        harness._compare(a, e, _dname(e), "fuzz", kind="random" if random_ else "values")
        return None
    except harness.Mismatch as m:
        reason = str(m)
    if random_ or not e.is_floating_point() or r is None or not isinstance(r, torch.Tensor):
        return reason
    name = _dname(e)
    if via in PRECISION and name in PRECISION and PRECISION.index(via) < PRECISION.index(name):
        name = via
        try:
            torch.testing.assert_close(a.detach().cpu(), e, rtol=harness.TOLERANCES[name][0],
                                       atol=harness.TOLERANCES[name][1], equal_nan=True)
            return None
        except AssertionError:
            pass
    rtol, atol = harness.TOLERANCES[name]
    if harness._as_accurate_as_cpu([a], [e], [r], rtol, atol, elementwise=name != "float32" and not chained):
        return None
    return reason


def compare_grad(a, e, r):
    if a is None or e is None:
        other = e if a is None else a
        if other is None or float(other.detach().abs().sum().cpu()) == 0:
            return None  # an input unused on one side: None there, zeros on the other
        return "grad defined on one side only"
    if a.device.type != "tpu":
        return f"grad on {a.device}"
    rtol, atol = harness.GRAD_TOLERANCE if e.dtype == torch.float32 else harness.TOLERANCES[_dname(e)]
    try:
        torch.testing.assert_close(a.detach().cpu(), e, rtol=rtol, atol=atol, equal_nan=True)
        return None
    except AssertionError as err:
        reason = "; ".join(l.strip() for l in str(err).splitlines() if "Greatest" in l or "shape" in l.lower()
                           or "dtype" in l.lower())[:200] or "grad differs"
    # A gradient is a chain through the whole backward: the tensor-wide bar (see compare_tensor).
    if r is not None and harness._as_accurate_as_cpu([a], [e], [r], rtol, atol, elementwise=False):
        return None
    return reason


def _values_list(program, values):
    return [values.get(o) for o in program["outputs"]]


def _tensor_or_none(v):
    return v if isinstance(v, torch.Tensor) else None


def run_cpu(program):
    """The CPU run and the float64 reference: {"values", "errors", "grads" (list, an exception, or None),
    "ref_values", "ref_grads"}."""
    torch.manual_seed(program["seed"])
    inputs, every, errors = run_eager(program, "cpu", keep_all=True)
    dtypes = {k: _dname(v) for k, v in every.items() if isinstance(v, torch.Tensor)}
    values = {o: every.get(o) for o in program["outputs"]}
    del every
    outs = [_tensor_or_none(v) for v in _values_list(program, values)]
    res = {"values": values, "errors": errors, "grads": None, "via": coarsest_float_dtypes(program, dtypes),
           "depth": chain_lengths(program)}
    try:
        res["grads"] = backward(program, inputs, outs)
    except Exception as e:
        res["grads"] = e
    try:
        torch.manual_seed(program["seed"])
        rin, rvals, _ = run_eager(program, "cpu", ref=True)
        res["ref_values"] = rvals
        routs = [_tensor_or_none(v) for v in _values_list(program, rvals)]
        res["ref_grads"] = backward(program, rin, routs, ref=True)
    except Exception:
        res.setdefault("ref_values", {})
        res["ref_grads"] = None
    return res


def _set_mode(mode):
    import torch_tpu

    torch_tpu.set_eager_mode("strict" if mode == "compile" else mode)


def run_tpu(program, mode):
    """One tpu run (compile: two calls of the compiled function, each on fresh inputs). Returns a list of
    {"values", "errors", "grads", "sync_error"} (one per call)."""
    os.environ["TORCH_TPU_DEBUG_NONFINITE"] = "off"  # NaN from finite inputs is CPU's answer too (log(-1))
    _set_mode(mode)
    runs = []
    if mode == "compile":
        torch._dynamo.reset()
        fn = torch.compile(compile_function(program), backend="tpu")
        for _ in range(2):
            run = {"values": {}, "errors": {}, "grads": None, "sync_error": None}
            torch.manual_seed(program["seed"])
            inputs = build_inputs(program, "tpu")
            try:
                outs = fn(*[inputs[s["id"]] for s in program["inputs"]], "tpu")
                run["values"] = dict(zip(program["outputs"], outs))
            except Exception as e:
                run["errors"][len(program["ops"])] = e  # compile raises for the program as a whole
                runs.append(run)
                continue
            _backward_and_sync(program, inputs, run)
            runs.append(run)
        return runs
    torch.manual_seed(program["seed"])
    inputs, values, errors = run_eager(program, "tpu")
    run = {"values": values, "errors": errors, "grads": None, "sync_error": None}
    _backward_and_sync(program, inputs, run)
    return [run]


def _backward_and_sync(program, inputs, run):
    outs = [_tensor_or_none(v) for v in _values_list(program, run["values"])]
    try:
        run["grads"] = backward(program, inputs, outs)
    except Exception as e:
        run["grads"] = e
    try:
        torch.tpu.synchronize()
        for v in outs:
            if v is not None:
                v.detach().cpu()
    except Exception as e:
        run["sync_error"] = e


def compare(program, cpu, runs, mode):
    """Every mismatch between the CPU result and the tpu run(s), as Failures."""
    fails = []
    ops = program["ops"]
    for call, run in enumerate(runs):
        tag = mode if len(runs) == 1 else f"{mode}#{call + 1}"

        def fail(kind, op, detail, out=None):
            fails.append(Failure(mode=mode, call=tag, kind=kind, op=op, detail=str(detail)[:300], out=out))

        if mode == "compile" and run["errors"]:
            if len(ops) not in cpu["errors"]:  # (the expected run is a compiled one that raised too)
                e = next(iter(run["errors"].values()))
                fail("tpu_raises", "compile", f"{type(e).__name__}: {e}")
            continue
        ce, te = cpu["errors"], run["errors"]
        for k in sorted(set(te) - set(ce)):
            e = te[k]
            fail("tpu_raises", ops[k]["op"], f"op {k} `{ops[k]['expr']}`: {type(e).__name__}: {e}")
        for k in sorted(set(ce) - set(te)):
            if k == len(ops):  # the expected run is a compiled one that raised as a whole
                fail("missing_error", "compile", f"CPU raises {type(ce[k]).__name__}: {str(ce[k])[:150]}")
                continue
            # In strict/fused a device-side error can only surface at a later sync point.
            later = run["sync_error"] is not None or any(j > k for j in te)
            if not (mode in ("strict", "fused") and later):
                fail("missing_error", ops[k]["op"], f"op {k} `{ops[k]['expr']}`: CPU raises "
                     f"{type(ce[k]).__name__}: {str(ce[k])[:150]}")
        if run["sync_error"] is not None and not ce:
            e = run["sync_error"]
            fail("tpu_raises", "sync", f"{type(e).__name__}: {e}")
            continue
        for oid in program["outputs"]:
            e, a = cpu["values"].get(oid), run["values"].get(oid)
            if not isinstance(e, torch.Tensor) or not isinstance(a, torch.Tensor):
                continue  # errors are compared above
            rec = _producer(program, oid)
            r = cpu["ref_values"].get(oid)
            try:
                why = compare_tensor(a, e, r, random_=rec["kind"] == "random", via=cpu["via"].get(oid),
                                     chained=cpu["depth"].get(oid, 0) > 1)
            except Exception as ex:  # reading the tpu value failed
                fail("tpu_raises", rec["op"], f"reading v{oid}: {type(ex).__name__}: {ex}", oid)
                continue
            if why:
                fail("value", rec["op"], f"v{oid}: {why}", oid)
            elif rec["kind"] == "view" and (a.stride() != e.stride() or a.storage_offset() != e.storage_offset()):
                fail("stride", rec["op"], f"v{oid}: stride/offset {a.stride()}/{a.storage_offset()} vs CPU "
                     f"{e.stride()}/{e.storage_offset()}", oid)
        ge, ga = cpu["grads"], run["grads"]
        if isinstance(ge, Exception) and not isinstance(ga, Exception):
            fail("missing_grad_error", "backward", f"CPU backward raises {type(ge).__name__}: {str(ge)[:150]}")
        elif isinstance(ga, Exception) and not isinstance(ge, Exception) and not ce:
            fail("grad_raises", "backward", f"{type(ga).__name__}: {ga}")
        elif isinstance(ge, list) and isinstance(ga, list):
            refs = cpu.get("ref_grads") if isinstance(cpu.get("ref_grads"), list) else [None] * len(ge)
            for j, (a, e, r) in enumerate(zip(ga, ge, refs)):
                try:
                    why = compare_grad(a, e, r)
                except Exception as ex:
                    why = f"reading grad: {type(ex).__name__}: {ex}"
                if why:
                    fail("grad", "backward", f"grad[{j}]: {why}")
    return fails


def run_cpu_compiled(program, cpu):
    """PyTorch's own torch.compile of the program on CPU, backend aot_eager (Dynamo and AOTAutograd's
    functionalization, no code generation), in run_cpu's format; raising as a whole is recorded as an error of
    the program (key: the op count)."""
    torch._dynamo.reset()
    fn = torch.compile(compile_function(program), backend="aot_eager")
    torch.manual_seed(program["seed"])
    inputs = build_inputs(program, "cpu")
    res = {"values": {}, "errors": {}, "grads": None, "ref_values": cpu["ref_values"], "ref_grads": cpu["ref_grads"],
           "via": cpu["via"], "depth": cpu["depth"]}
    try:
        outs = fn(*[inputs[s["id"]] for s in program["inputs"]], "cpu")
    except Exception as e:
        res["errors"][len(program["ops"])] = e
        return res
    res["values"] = dict(zip(program["outputs"], outs))
    try:
        res["grads"] = backward(program, inputs, [_tensor_or_none(v) for v in outs])
    except Exception as e:
        res["grads"] = e
    return res


def check(program, modes=MODES, cpu=None):
    """Failures of `program` in each of `modes` ({mode: [Failure]}); compile is skipped (None) for a program
    with an op CPU rejects (a compiled function raises as a whole).

    Where torch.compile on tpu differs from CPU eager but agrees with PyTorch's own compile on CPU (aot_eager),
    the difference is PyTorch's semantics, not ours (functionalization rewrites an in-place write to an
    expanded view as out-of-place arithmetic; a compiled graph saves tensors an eager backward would find
    modified): those failures move to out["explained"] as (mode, kind, op) and the mode counts as passing."""
    cpu = cpu or run_cpu(program)
    out = {}
    for mode in modes:
        if mode == "compile" and cpu["errors"]:
            out[mode] = None
            continue
        try:
            runs = run_tpu(program, mode)
        except Exception as e:
            out[mode] = [Failure(mode=mode, call=mode, kind="tpu_raises", op="run", detail=f"{type(e).__name__}: "
                                 f"{str(e)[:300]}", out=None)]
            continue
        out[mode] = compare(program, cpu, runs, mode)
        if mode == "compile" and out[mode]:
            try:
                same_as_pytorch = not compare(program, run_cpu_compiled(program, cpu), runs, mode)
            except Exception:
                same_as_pytorch = False
            if same_as_pytorch:
                explained = out.setdefault("explained", [])
                explained.extend(e for e in dict.fromkeys((f["mode"], f["kind"], f["op"]) for f in out[mode])
                                 if e not in explained)
                out[mode] = []
        try:
            torch.tpu.synchronize()
        except Exception:
            pass
    return out
