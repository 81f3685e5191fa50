"""OpInfo harness: runs PyTorch's OpInfo database (op_db) on tpu and compares with CPU.

For each OpInfo and each requested dtype the OpInfo supports on CPU, every sample input (or an even subset of
them, --max-samples) runs on tpu and on CPU and the results are compared with torch.testing.assert_close and the
per-dtype tolerances below. For float32 the gradients of every differentiable input are compared with CPU
autograd, for fixed random cotangents of every floating-point or complex output (a complex output, e.g. of
torch.fft.rfft or torch.polar, gets a complex cotangent, as in PyTorch's gradcheck; see `_grads`); an OpInfo
none of whose outputs is differentiable reports grad n/a. The CPU fallback is off: an op without a tpu kernel fails with the missing ATen overload as its reason,
so every pass ran natively.

The ops run in a worker subprocess with a watchdog: a sample that hangs past --timeout, or a crash (segfault),
costs one row (status timeout/crash), never the run; the parent restarts a worker for the remaining jobs.

    python tests/opinfo/harness.py --dtypes float32,bfloat16 --json out.json   # run (see --help)
    python tests/opinfo/harness.py --docs docs/op_coverage.md --json out.json  # and write the table

`make test-ops-full` runs every dtype over every sample and regenerates docs/op_coverage.md.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import select
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

ALL_DTYPES = ["float32", "bfloat16", "float16", "int64", "int32", "bool", "complex64"]

# Tolerances per dtype (rtol, atol). float16/bfloat16 compute in float32 and round like CPU, but reductions
# accumulate in a different order, so a couple of ulps at the output precision are allowed.
TOLERANCES = {
    "float32": (1e-5, 1e-5),
    "bfloat16": (1.6e-2, 1e-2),
    "float16": (1e-3, 1e-3),
    "int64": (0, 0),
    "int32": (0, 0),
    "bool": (0, 0),
    "complex64": (1e-5, 1e-5),  # as float32 (per part: torch.testing compares complex values by modulus)
}
GRAD_TOLERANCE = (1e-4, 1e-4)  # float32 gradients: backward sums in another order than CPU autograd

# Per-op tolerance overrides: key -> {dtype: (rtol, atol)}, each with its reason.
TOLERANCE_OVERRIDES: dict[str, dict[str, tuple[float, float]]] = {
    # 3-d convolutions sum hundreds of products per output, in another order than oneDNN.
    "nn.functional.conv3d": {"float32": (1e-4, 1e-4)},
    "nn.functional.conv_transpose3d": {"float32": (1e-4, 1e-4)},
    # Inputs up to 1e4: CPU's own float32 gradient is off by 3e-3 from float64; tpu's by 4e-3 (scan order).
    "logcumsumexp": {"grad": (1e-3, 1e-2)},
}

# Ops whose values are random: compare shape, dtype and distribution statistics, not values (and no gradients);
# their samples that draw no random number (`_draws_no_random`) are compared as values, gradients included.
RANDOM_OPS = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
    "normal.number_mean", "normal.in_place", "uniform", "rand_like", "randn_like", "randint", "randint_like",
    "randn", "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.feature_alpha_dropout.with_train", "nn.functional.feature_alpha_dropout.without_train",
    "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d", "svd_lowrank", "pca_lowrank",
}
# Samples that draw random numbers although the op is not random in general (dropout_p > 0, training).
RANDOM_SAMPLES = {
    "nn.functional.scaled_dot_product_attention": lambda s: s.kwargs.get("dropout_p", 0.0) > 0,
    "nn.functional.multi_head_attention_forward": lambda s: s.kwargs.get("training") and s.args[9] > 0,
}


def _draws_no_random(op, sample):
    """A sample of a RANDOM_OPS entry that draws no random number, so its values (and gradients) are compared
    like any other op's: dropout and rrelu outside training (the identity, rrelu's mean slope; `training`
    passed or torch.nn.functional's default), fractional max pooling given its `_random_samples`."""
    import inspect

    import torch

    if sample.kwargs.get("_random_samples") is not None:
        return True
    name = op.name.rsplit(".", 1)[-1]
    fn = getattr(torch.nn.functional, name, None)
    if fn is None or sample.args or not ("dropout" in name or name == "rrelu"):
        return False
    try:
        default = inspect.signature(fn).parameters["training"].default
    except (KeyError, TypeError, ValueError):
        return False
    return sample.kwargs.get("training", default) is False


# Heavy-tailed distributions: compared by median and interquartile range instead of mean and std.
HEAVY_TAILED = {"cauchy", "log_normal"}

# Ops whose values are undefined (uninitialised memory): compare shape and dtype only.
UNDEFINED_VALUE_OPS = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}

# Ops that return (values, indices) or indices where ties make the index choice implementation-defined:
# values are compared, indices are checked by gathering the input at them. Entry: (position of `dim` among
# the positional args, default dim, which outputs are indices).
TIE_INDEX_OPS = {
    "sort": (0, -1, (1,)),
    "argsort": (0, -1, (0,)),
    "topk": (1, -1, (1,)),
    "kthvalue": (1, -1, (1,)),
    "mode": (0, -1, (1,)),
    "median": (0, None, (1,)),
    "nanmedian": (0, None, (1,)),
    "max.reduction_with_dim": (0, None, (1,)),
    "min.reduction_with_dim": (0, None, (1,)),
}
# Ops whose output order is not defined (sorted=False): compared after sorting.
UNORDERED_OPS = {"unique"}
# Ops whose outputs are defined only up to a gauge: singular vectors up to a sign per (u_j, v_j) pair (and,
# with full_matrices, any orthonormal basis of the complement), which LAPACK, cuSOLVER and we choose each in
# our own way. Compared through the OpInfo's own gauge-invariant view of the outputs (its
# output_process_fn_grad: |U|, S, |Vh|, U Vh, one per sample), as PyTorch's gradient tests compare them.
GAUGE_OPS = {"svd", "linalg.svd"}


class Missing(Exception):
    """The op (or one it decomposes into) has no tpu kernel."""


def op_key(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


# ---- worker side -------------------------------------------------------------------------------------------


def _load_ops():
    import warnings

    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_methods_invocations import op_db

    return {op_key(op): op for op in op_db}


def _dtype(name):
    import torch

    return getattr(torch, name)


def _to_tpu(x):
    """Copy of a sample's structure with every tensor on tpu and device arguments moved to tpu.

    A tensor keeps its exact layout: its whole storage is copied and the same (sizes, strides, offset) view is
    taken of it, so views, partial views and non-contiguous inputs reach the op as they are on CPU. The copy is a
    leaf with the same requires_grad."""
    import torch

    if isinstance(x, torch.Tensor):
        with torch.no_grad():
            n = x.untyped_storage().nbytes() // max(x.element_size(), 1) if x.layout == torch.strided else 0
            if x.layout != torch.strided or (x.is_contiguous() and x.storage_offset() == 0 and x.numel() == n):
                t = x.detach().to("tpu")
            else:
                base = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), 0, (n,), (1,)).to("tpu")
                t = base.as_strided(x.size(), x.stride(), x.storage_offset())
                # The storage holds the stored values; the conj / neg bits say how the view reads them.
                if x.is_conj():
                    t = t.conj()
                if x.is_neg():
                    t = torch._neg_view(t)
        return t.detach().requires_grad_(True) if x.requires_grad else t
    if isinstance(x, list):
        return [_to_tpu(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_to_tpu(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_tpu(v) for k, v in x.items()}
    if isinstance(x, torch.device) or (isinstance(x, str) and x == "cpu"):
        return _device_arg(x)
    return x


def _device_arg(v):
    import torch

    if isinstance(v, (str, torch.device)) and torch.device(v).type == "cpu":
        return "tpu"
    return v


# Arguments an op requires on the CPU (position in args).
CPU_ARGS = {"tensor_split": (0,)}


def _tpu_sample(key, sample):
    args = _to_tpu(sample.args)
    for pos in CPU_ARGS.get(key, ()):
        if len(args) > pos:
            args = args[:pos] + (sample.args[pos],) + args[pos + 1:]
    return type(sample)(_to_tpu(sample.input), args=args, kwargs=_to_tpu(sample.kwargs),
                        output_process_fn_grad=sample.output_process_fn_grad)


def _flatten(x, out):
    import torch

    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _flatten(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _flatten(v, out)
    return out


def _short(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    first = msg[0] if msg else ""
    return f"{type(e).__name__}: {first}"[:160]


def _missing_name(e: BaseException):
    m = re.search(r"(\S+) is not implemented for tpu", str(e))
    if m:
        return m.group(1)
    m = re.search(r"Could not run '(\S+)' with arguments from the '(\w+)' backend", str(e))
    if m:
        return f"{m.group(1)} for {m.group(2)}"
    m = re.match(r"(\w+) not implemented", str(e))  # ATen's *_overrideable stubs for new backends
    if isinstance(e, NotImplementedError) and m:
        return "aten::" + m.group(1)
    return None


class Mismatch(Exception):
    pass


def _compare_random(actual, expected, heavy):
    """Random values: same shape/dtype; floating outputs also agree in mean and spread."""
    import torch

    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        raise Mismatch(f"random: shape/dtype {tuple(actual.shape)} {actual.dtype} vs {tuple(expected.shape)} "
                       f"{expected.dtype}")
    a, e = actual.double().flatten(), expected.double().flatten()
    n = a.numel()
    if n == 0:
        return
    fa, fe = torch.isfinite(a), torch.isfinite(e)
    if fa.sum() == 0 or fe.sum() == 0:
        if not (fa.sum() == 0 and fe.sum() == 0):
            raise Mismatch("random: finite values on one side only")
        return
    a, e = a[fa], e[fe]
    lo, hi = e.min().item(), e.max().item()
    span = max(hi - lo, abs(hi), abs(lo), 1.0)
    if heavy:
        if n >= 64:
            qa = torch.quantile(a, torch.tensor([0.25, 0.5, 0.75], dtype=a.dtype))
            qe = torch.quantile(e, torch.tensor([0.25, 0.5, 0.75], dtype=e.dtype))
            iqa, iqe = (qa[2] - qa[0]).item(), (qe[2] - qe[0]).item()
            if abs(qa[1].item() - qe[1].item()) > 0.5 * max(iqe, 1e-6) or not (0.5 < iqa / max(iqe, 1e-12) < 2):
                raise Mismatch(f"random: median/IQR {qa[1].item():.4g}/{iqa:.4g} vs cpu {qe[1].item():.4g}/{iqe:.4g}")
        return
    if n >= 16:
        sa, se = a.std().item(), e.std().item()
        tol = 6 * math.sqrt((sa * sa + se * se) / n) + 1e-6 * span
        if abs(a.mean().item() - e.mean().item()) > tol:
            raise Mismatch(f"random: mean {a.mean().item():.4g} vs cpu {e.mean().item():.4g}")
        if n >= 64 and se > 0 and not (0.6 < sa / se < 1.6):
            raise Mismatch(f"random: std {sa:.4g} vs cpu {se:.4g}")
    # Support: every tpu value lies in the range CPU's values span (widened for sampling noise).
    if n >= 16 and (a.min().item() < lo - span or a.max().item() > hi + span):
        raise Mismatch(f"random: values outside the cpu range [{lo:.4g}, {hi:.4g}]")


def _compare(actual, expected, dtype_name, key, path="out", kind="values", on_tpu=True):
    """kind: 'values', 'random' (statistics), 'undefined' (shape and dtype only: empty*, and samples that
    draw random numbers inside a bigger computation (attention dropout), whose values are not i.i.d.)."""
    import torch

    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(f"{path}: got {type(actual).__name__}, expected a tensor")
        if on_tpu and actual.device.type != "tpu" and expected.device.type == "cpu":
            raise Mismatch(f"{path}: result is on {actual.device}, not tpu")
        actual = actual.detach().cpu()
        expected = expected.detach()
        if kind == "undefined":
            if actual.shape != expected.shape or actual.dtype != expected.dtype:
                raise Mismatch(f"{path}: shape/dtype {tuple(actual.shape)} {actual.dtype} vs {tuple(expected.shape)} "
                               f"{expected.dtype}")
            return
        if kind == "random":
            return _compare_random(actual, expected, key in HEAVY_TAILED)
        # Tolerance of the result's dtype (an int64 sample of lgamma has a float32 result).
        out_name = str(expected.dtype).replace("torch.", "")
        rtol, atol = TOLERANCE_OVERRIDES.get(key, {}).get(out_name, TOLERANCES.get(out_name, (1e-5, 1e-5)))
        inexact = lambda t: t.is_floating_point() or t.is_complex()  # noqa: E731
        if not inexact(actual) or not inexact(expected):
            rtol = atol = 0
        try:
            torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as e:
            lines = [l.strip() for l in str(e).splitlines() if l.strip()]
            detail = "; ".join(l for l in lines if "Greatest" in l or "mismatch" in l.lower() or "dtype" in l.lower()
                               or "shape" in l.lower() or "stride" in l.lower())
            raise Mismatch(f"{path}: {detail or lines[0]}"[:200])
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise Mismatch(f"{path}: structure differs")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, dtype_name, key, f"{path}[{i}]", kind)
        return
    if isinstance(expected, complex) and isinstance(actual, complex):
        rtol, atol = TOLERANCES.get(dtype_name, (1e-5, 1e-5))
        if kind == "values" and not (actual == expected or abs(actual - expected) <= atol + rtol * abs(expected)):
            raise Mismatch(f"{path}: {actual} vs cpu {expected}")
        return
    if isinstance(expected, float) and isinstance(actual, float):
        if math.isnan(expected) and math.isnan(actual):
            return
        rtol, atol = TOLERANCES.get(dtype_name, (1e-5, 1e-5))
        if kind == "values" and not math.isclose(actual, expected, rel_tol=max(rtol, 1e-6), abs_tol=atol):
            raise Mismatch(f"{path}: {actual} vs cpu {expected}")
        return
    if kind != "values":
        return
    if actual != expected:
        raise Mismatch(f"{path}: {actual!r} vs cpu {expected!r}"[:200])


def _sample_dim(sample, pos, default):
    if "dim" in sample.kwargs:
        return sample.kwargs["dim"]
    if len(sample.args) > pos and isinstance(sample.args[pos], int) and not isinstance(sample.args[pos], bool):
        return sample.args[pos]
    return default


def _compare_tie_indices(key, sample, actual, expected, dtype_name):
    """Values must match; indices must point at elements equal to those CPU's indices point at."""
    import torch

    pos, default, idx_outputs = TIE_INDEX_OPS[key]
    dim = _sample_dim(sample, pos, default)
    single = isinstance(expected, torch.Tensor)
    acts = [actual] if single else list(actual)
    exps = [expected] if single else list(expected)
    if len(acts) != len(exps):
        raise Mismatch("structure differs")
    x = sample.input.detach()
    for i, (a, e) in enumerate(zip(acts, exps)):
        if i not in idx_outputs:
            _compare(a, e, dtype_name, key, f"out[{i}]")
            continue
        if not isinstance(a, torch.Tensor) or a.device.type != "tpu":
            raise Mismatch(f"out[{i}]: indices not a tpu tensor")
        a = a.cpu()
        if a.shape != e.shape or a.dtype != e.dtype:
            raise Mismatch(f"out[{i}]: indices shape/dtype {tuple(a.shape)} {a.dtype} vs {tuple(e.shape)} {e.dtype}")
        if torch.equal(a, e):
            continue
        if dim is None or x.dim() == 0:
            va, ve = x.flatten()[a.flatten()], x.flatten()[e.flatten()]
        else:
            xx = x if a.dim() == x.dim() else x
            ia, ie = a, e
            if ia.dim() < xx.dim():  # reduced dim (keepdim=False)
                ia, ie = ia.unsqueeze(dim), ie.unsqueeze(dim)
            va, ve = xx.gather(dim, ia), xx.gather(dim, ie)
        if not torch.equal(va.isnan(), ve.isnan()) or not torch.equal(va.nan_to_num(), ve.nan_to_num()):
            raise Mismatch(f"out[{i}]: indices point at different values")


def _compare_unordered(sample, actual, expected, dtype_name, key):
    """unique(sorted=False): the set of values, and what inverse/counts say about each value, must agree."""
    import torch

    if sample.kwargs.get("sorted", True) is True or sample.kwargs.get("dim") is not None:
        return _compare(actual, expected, dtype_name, key)
    acts = [actual] if isinstance(actual, torch.Tensor) else list(actual)
    exps = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    if any(a.device.type != "tpu" for a in acts):
        raise Mismatch("result is not on tpu")
    acts = [a.detach().cpu() for a in acts]
    vals_a, vals_e = acts[0], exps[0]
    sa, pa = torch.sort(vals_a)
    se, pe = torch.sort(vals_e)
    _compare(sa, se, dtype_name, key, "values", on_tpu=False)
    k = 1
    if sample.kwargs.get("return_inverse"):
        _compare(vals_a[acts[k]], vals_e[exps[k]], dtype_name, key, "values[inverse]", on_tpu=False)
        k += 1
    if sample.kwargs.get("return_counts"):
        _compare(acts[k][pa], exps[k][pe], dtype_name, key, "counts", on_tpu=False)


def _upcast(x, dtype):
    """The sample's tensors of `dtype` as float64 (no grad; with `grad`, keeping requires_grad), the rest as
    they are."""
    import torch

    if isinstance(x, torch.Tensor):
        if x.dtype != dtype:
            return x.detach()
        wide = torch.complex128 if x.is_complex() else torch.float64
        return x.detach().to(wide).requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(_upcast(v, dtype) for v in x)
    if isinstance(x, dict):
        return {k: _upcast(v, dtype) for k, v in x.items()}
    return x


def _float64_sample(sample, dtype):
    return type(sample)(_upcast(sample.input, dtype), args=_upcast(sample.args, dtype),
                        kwargs=_upcast(sample.kwargs, dtype), output_process_fn_grad=sample.output_process_fn_grad)


# float32 results (and gradients) that miss the fixed tolerance against CPU are judged against the float64
# result instead: accepted when every element is within the tolerance plus CPU_ERROR_FACTOR times the largest
# error CPU float32 itself makes on that output. Rounding error depends on the summation order, and XLA sums in
# another order than CPU: for a dot product with cancellation, |cpu - float64| reaches eps * sum|x_i * y_i|,
# far above rtol * |result|, so a fixed bound against CPU is crossed or not depending on the order (the flaky
# `__rmatmul__` gate). CPU's own error is the scale of what float32 can achieve on this very input; a backend
# within a few times it is as accurate as CPU, and a wrong result (an error of the size of the values) is not.
CPU_ERROR_FACTOR = 4


def _as_accurate_as_cpu(actuals, expecteds, refs, rtol, atol, elementwise):
    """actuals (tpu), expecteds (CPU, same dtype) and refs (float64) elementwise. elementwise=True (float16 and
    bfloat16, where CPU rounds intermediates): each tpu element at least as close to float64 as CPU's same
    element, plus the tolerance. False (float32): within the tolerance plus CPU_ERROR_FACTOR x CPU's largest
    error on that output."""
    import torch

    if not (len(actuals) == len(expecteds) == len(refs)) or not actuals:
        return False
    for a, e, r in zip(actuals, expecteds, refs):
        if a is None or e is None or r is None:
            if not (a is None and e is None):
                return False
            continue
        if a.shape != e.shape or a.dtype != e.dtype or r.shape != e.shape:
            return False
        if not (e.is_floating_point() or e.is_complex()):
            if not torch.equal(a.detach().cpu(), e):
                return False
            continue
        wide = torch.complex128 if e.is_complex() else torch.float64
        # float64's result rounded to the output dtype is the best answer that dtype holds (inf past its range).
        rounded = r.detach().to(e.dtype).to(wide)
        a, e, r = a.detach().cpu().to(wide), e.detach().to(wide), r.detach().to(wide)
        both_nan = a.isnan() & r.isnan()
        cpu_error = (e - r).abs()
        if elementwise:
            # Where CPU's low-precision result is NaN and float64's is not (matrix_exp in bfloat16 overflows
            # its intermediates), CPU sets no bar: tpu must then be within the tolerance of float64 itself.
            cpu_error = torch.where(cpu_error.isnan() & ~r.isnan(), torch.zeros_like(cpu_error), cpu_error)
        else:
            finite = cpu_error[cpu_error.isfinite()]
            cpu_error = CPU_ERROR_FACTOR * (finite.max() if finite.numel() else torch.zeros((), dtype=r.dtype))
        ok = ((a - r).abs() <= cpu_error + atol + rtol * r.abs()) | both_nan | (a == r) | (a == rounded)
        if not bool(ok.all()):
            return False
    return True


def _forward_as_accurate_as_cpu(op, sample, actual, expected, dtype, rtol, atol, view=None):
    try:
        ref = op(_upcast(sample.input, dtype), *_upcast(sample.args, dtype), **_upcast(sample.kwargs, dtype))
        if view is not None:
            ref = view(ref)
    except Exception:
        return False
    acts, exps, refs = _flatten(actual, []), _flatten(expected, []), _flatten(ref, [])
    if any(a.device.type != "tpu" for a in acts):
        return False
    return _as_accurate_as_cpu(acts, exps, refs, rtol, atol,
                               elementwise=dtype not in (_dtype("float32"), _dtype("complex64")))


def _grads_as_accurate_as_cpu(op, sample, ga, ge, dtype, rtol, atol):
    """float32 gradients: tpu's (ga) and CPU's (ge) against CPU autograd in float64 with the same cotangents."""
    import torch

    ref_sample = _float64_sample(sample, dtype)
    try:
        gr = _grads(op, ref_sample, _differentiable(_flatten([ref_sample.input, ref_sample.args,
                                                              ref_sample.kwargs], [])), cot_dtype=dtype)
    except Exception:
        return False
    if gr is None:
        return False
    # An input unused on one side: None there, zeros on the other (as the direct comparison allows).
    ga = [torch.zeros_like(e) if a is None and e is not None else a for a, e in zip(ga, ge)]
    ge = [torch.zeros_like(a) if e is None and a is not None else e for a, e in zip(ga, ge)]
    gr = [torch.zeros_like(e, dtype=torch.float64) if r is None and e is not None else r for r, e in zip(gr, ge)]
    return _as_accurate_as_cpu(list(ga), list(ge), list(gr), rtol, atol, elementwise=False)


def _differentiable(tensors):
    return [t for t in tensors if t.requires_grad and (t.is_floating_point() or t.is_complex())]


def _cotangent_dtype(o, cot_dtype):
    """The dtype a cotangent for output `o` is drawn in: `o`'s own, or `cot_dtype`'s (float32 for the float64
    reference of a float32 run) -- as its complex counterpart when `o` is complex (complex64 draws for a
    complex128 reference output), so both runs see the same cotangent values."""
    import torch

    if cot_dtype is None:
        return o.dtype
    if o.is_complex() and not cot_dtype.is_complex:
        return {torch.float32: torch.complex64, torch.float64: torch.complex128}.get(cot_dtype, o.dtype)
    return cot_dtype


def _grads(op, sample, inputs, cot_dtype=None):
    """Gradients of the (processed) outputs wrt `inputs`, with fixed random cotangents built on CPU (drawn in
    `cot_dtype` when given, so a float64 reference sees the float32 run's cotangents).

    Floating-point and complex outputs are differentiated, as PyTorch's gradcheck does: a complex output gets a
    complex cotangent (torch.randn of a complex dtype: real and imaginary parts of variance 1/2), so
    autograd's vector-Jacobian product covers both the real and the imaginary part of that output. None when no
    output is differentiable (the harness then reports grad n/a)."""
    import torch

    out = op.gradcheck_wrapper(op.get_op(), sample.input, *sample.args, **sample.kwargs)
    out = sample.output_process_fn_grad(out)
    outs = [o for o in _flatten(out, []) if o.requires_grad and (o.is_floating_point() or o.is_complex())]
    if not outs:
        return None
    gen = torch.Generator().manual_seed(1234)
    cots = [torch.randn(o.shape, generator=gen, dtype=_cotangent_dtype(o, cot_dtype)).to(o.device, o.dtype)
            for o in outs]
    return torch.autograd.grad(outs, inputs, cots, allow_unused=True)


def run_job(ops, key, dtype_name, grad, max_samples, emit):
    """Runs every (selected) sample of one OpInfo at one dtype. Returns the job's record."""
    import torch

    op = ops[key]
    dtype = _dtype(dtype_name)
    rec = {"key": key, "dtype": dtype_name, "status": "pass", "reason": "", "samples": 0, "cpu_errors": 0}
    want_grad = grad and op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")
    rec["grad"] = "n/a" if not want_grad else "pass"
    rec["grad_reason"] = ""
    torch.manual_seed(0)
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=want_grad))
    except Exception as e:
        rec.update(status="error", reason="sample_inputs: " + _short(e), grad="n/a")
        return rec
    picked = range(len(samples))
    if max_samples and len(samples) > max_samples:
        step = len(samples) / max_samples
        picked = [int(k * step) for k in range(max_samples)]
    ran_grad = 0
    for i in picked:  # i: the sample's index in the OpInfo's full list
        sample = samples[i]
        emit({"event": "sample", "i": i})
        try:
            tpu_sample = _tpu_sample(key, sample)
        except NotImplementedError as e:
            # A layout tpu does not run (sparse, nested, quantized) is refused at the .to("tpu").
            layout = re.search(r"got an? (.+?) \(", str(e))
            rec.update(status="nodtype", reason="raises NotImplementedError: "
                       f"{layout.group(1) if layout else 'layout'} tensors not supported")
            break
        kind = ("undefined" if key in UNDEFINED_VALUE_OPS else
                "random" if key in RANDOM_OPS and not _draws_no_random(op, sample) else
                "undefined" if RANDOM_SAMPLES.get(key, lambda s: False)(sample) else "values")
        # CPU reference first; samples CPU rejects are skipped (they test errors, not values).
        torch.manual_seed(i)
        try:
            expected = op(sample.input, *sample.args, **sample.kwargs)
        except Exception:
            rec["cpu_errors"] += 1
            continue
        if not _flatten([tpu_sample.input, tpu_sample.args, tpu_sample.kwargs], []) and not (
                isinstance(sample.kwargs.get("device"), (str, torch.device))):
            rec["cpu_only"] = rec.get("cpu_only", 0) + 1  # nothing on tpu in this sample: not a tpu test
            continue
        rec["samples"] += 1
        torch.manual_seed(i)
        try:
            actual = op(tpu_sample.input, *tpu_sample.args, **tpu_sample.kwargs)
            if key in GAUGE_OPS:
                actual, expected = sample.output_process_fn_grad(actual), sample.output_process_fn_grad(expected)
            if key in TIE_INDEX_OPS:
                _compare_tie_indices(key, sample, actual, expected, dtype_name)
            elif key in UNORDERED_OPS:
                _compare_unordered(sample, actual, expected, dtype_name, key)
            else:
                _compare(actual, expected, dtype_name, key, kind=kind)
        except Mismatch as e:
            rtol, atol = TOLERANCE_OVERRIDES.get(key, {}).get(dtype_name, TOLERANCES[dtype_name])
            if ((dtype.is_floating_point or dtype.is_complex) and kind == "values" and key not in TIE_INDEX_OPS
                    and key not in UNORDERED_OPS
                    and _forward_as_accurate_as_cpu(op, sample, actual, expected, dtype, rtol, atol,
                                                    sample.output_process_fn_grad if key in GAUGE_OPS else None)):
                rec["closer_than_cpu"] = rec.get("closer_than_cpu", 0) + 1
            else:
                rec.update(status="fail", reason=f"sample {i}: {e}")
                break
        except Exception as e:
            missing = _missing_name(e)
            if missing:
                rec.update(status="missing", reason=f"no kernel: {missing}")
            elif isinstance(e, TypeError) and "is not supported on tpu" in str(e):
                dt = re.search(r"dtype (\w+)", str(e))
                rec.update(status="nodtype", reason=f"raises TypeError: {dt.group(1) if dt else 'dtype'} not supported")
            else:
                rec.update(status="fail", reason=f"sample {i}: {_short(e)}")
            break
        if rec["grad"] != "pass" or kind != "values":
            continue
        cpu_in = _differentiable(_flatten([sample.input, sample.args, sample.kwargs], []))
        tpu_in = _differentiable(_flatten([tpu_sample.input, tpu_sample.args, tpu_sample.kwargs], []))
        if not cpu_in or len(cpu_in) != len(tpu_in):
            continue
        try:
            ge = _grads(op, sample, cpu_in)
        except Exception:
            continue  # CPU autograd cannot differentiate this sample either
        if ge is None:
            continue
        try:
            ga = _grads(op, tpu_sample, tpu_in)
            ran_grad += 1
            if ga is None:
                raise Mismatch("no differentiable tpu output")
            grads_checked = None
            for j, (a, e) in enumerate(zip(ga, ge)):
                if e is None and a is None:
                    continue
                if e is None or a is None:
                    if (e if a is None else a).abs().sum().item() == 0:
                        continue  # an unused input: None on one side, zeros on the other
                    raise Mismatch(f"grad[{j}]: defined on one side only")
                if a.device.type != "tpu":
                    raise Mismatch(f"grad[{j}] on {a.device}")
                grtol, gatol = TOLERANCE_OVERRIDES.get(key, {}).get("grad", GRAD_TOLERANCE)
                try:
                    torch.testing.assert_close(a.cpu(), e, rtol=grtol, atol=gatol, equal_nan=True)
                except AssertionError as err:
                    lines = [l.strip() for l in str(err).splitlines() if "Greatest" in l or "dtype" in l.lower()
                             or "shape" in l.lower()]
                    mismatch = Mismatch(f"grad[{j}]: {'; '.join(lines)}"[:200])
                    if grads_checked is None:  # one float64 reference for all of this sample's gradients
                        grads_checked = _grads_as_accurate_as_cpu(op, sample, ga, ge, dtype, grtol, gatol)
                    if not grads_checked:
                        raise mismatch
                    rec["grad_closer_than_cpu"] = rec.get("grad_closer_than_cpu", 0) + 1
        except Mismatch as e:
            rec.update(grad="fail", grad_reason=f"sample {i}: {e}")
        except Exception as e:
            missing = _missing_name(e)
            if missing:
                rec.update(grad="missing", grad_reason=f"no kernel: {missing}")
            else:
                rec.update(grad="fail", grad_reason=f"sample {i}: {_short(e)}")
    if rec["samples"] == 0 and rec["status"] == "pass":
        rec.update(status="skip", reason="CPU rejects every sample" if rec["cpu_errors"] else
                   "no sample has a tpu tensor" if rec.get("cpu_only") else "no samples")
    if rec["grad"] == "pass" and (ran_grad == 0 or rec["status"] != "pass"):
        rec["grad"] = "n/a" if rec["status"] == "pass" else "blocked"
    return rec


def worker_main():
    """Reads jobs (JSON lines) on stdin, writes events (JSON lines) on the protocol fd."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything the ops print goes to stderr
    os.environ.pop("TORCH_TPU_CPU_FALLBACK", None)
    import torch

    torch.set_num_threads(1)
    ops = _load_ops()

    def emit(ev):
        proto.write(json.dumps(ev) + "\n")
        proto.flush()

    emit({"event": "ready"})
    jobs_file = json.loads(sys.stdin.readline())["jobs_file"]
    with open(jobs_file) as f:
        jobs = [json.loads(line) for line in f]
    os.unlink(jobs_file)
    for job in jobs:
        emit({"event": "start", "job": job["id"]})
        t0 = time.time()
        try:
            rec = run_job(ops, job["key"], job["dtype"], job["grad"], job["max_samples"], emit)
        except Exception as e:  # harness bug: a row, not a crash
            rec = {"key": job["key"], "dtype": job["dtype"], "status": "error", "reason": _short(e),
                   "grad": "n/a", "grad_reason": "", "trace": traceback.format_exc()[-800:]}
        rec["time"] = round(time.time() - t0, 3)
        emit({"event": "done", "job": job["id"], "rec": rec})


# ---- parent side -------------------------------------------------------------------------------------------


def list_jobs(dtypes, grad_dtypes, max_samples, select_keys=None):
    """Jobs for every OpInfo x requested dtype it supports on CPU, plus the rows for unsupported dtypes."""
    import torch

    ops = _load_ops()
    jobs, unsupported = [], []
    for key, op in ops.items():
        if select_keys is not None and key not in select_keys:
            continue
        supported = op.supported_dtypes("cpu")
        for d in dtypes:
            if getattr(torch, d) not in supported:
                unsupported.append({"key": key, "dtype": d, "status": "unsupported", "reason": "", "grad": "n/a"})
                continue
            jobs.append({"id": len(jobs), "key": key, "dtype": d, "grad": d in grad_dtypes,
                         "max_samples": max_samples})
    return jobs, unsupported


class Worker:
    def __init__(self, env):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
                                     bufsize=1, cwd=ROOT)
        self.buf = ""

    def send(self, job):
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()

    def read(self, timeout):
        """Next event, None on timeout, {'event': 'exit'} when the worker died."""
        deadline = time.time() + timeout
        while "\n" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                return None
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if not r:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 65536).decode()
            if not chunk:
                self.proc.wait()
                return {"event": "exit", "rc": self.proc.returncode}
            self.buf += chunk
        line, self.buf = self.buf.split("\n", 1)
        return json.loads(line)

    def kill(self):
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except Exception:
            pass


def run_jobs_parallel(jobs, workers=1, **kw):
    """Splits the jobs over `workers` worker processes (an op's dtypes stay together), keeping the job order."""
    if workers <= 1:
        return run_jobs(jobs, **kw)
    import threading

    keys = list(dict.fromkeys(j["key"] for j in jobs))
    part = {k: i % workers for i, k in enumerate(keys)}
    parts = [[j for j in jobs if part[j["key"]] == w] for w in range(workers)]
    results = [None] * workers
    lock = threading.Lock()
    progress = kw.pop("progress", None)

    def locked(rec):
        with lock:
            progress(rec)

    def work(w):
        results[w] = run_jobs(parts[w], progress=locked if progress else None, **kw)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    order = {(j["key"], j["dtype"]): j["id"] for j in jobs}
    return sorted((r for rs in results for r in rs), key=lambda r: order[(r["key"], r["dtype"])])


def run_jobs(jobs, timeout=60.0, startup_timeout=120.0, progress=None):
    """Runs jobs in one worker process at a time (compiles stay cached in it); a hang or crash costs one job."""
    env = dict(os.environ)
    env.pop("TORCH_TPU_CPU_FALLBACK", None)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    results = []
    pending = list(jobs)
    while pending:
        w = Worker(env)
        ev = w.read(startup_timeout)
        if not ev or ev.get("event") != "ready":
            w.kill()
            raise RuntimeError(f"opinfo worker failed to start: {ev}")
        # Jobs go through a file: writing them all to a pipe would block against the worker's own output.
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write("".join(json.dumps(job) + "\n" for job in pending))
        w.send({"jobs_file": f.name})
        w.proc.stdin.close()
        current, sample = None, None
        while pending:
            ev = w.read(timeout)
            job = pending[0]
            if ev is None or ev["event"] == "exit":
                why = "timeout" if ev is None else "crash"
                reason = (f"no progress for {timeout:.0f}s" if ev is None else f"worker died (rc {ev['rc']})")
                if sample is not None:
                    reason += f" in sample {sample}"
                results.append({"key": job["key"], "dtype": job["dtype"], "status": why, "reason": reason,
                                "grad": "n/a", "grad_reason": "", "time": None})
                if progress:
                    progress(results[-1])
                pending.pop(0)
                w.kill()
                break
            if ev["event"] == "start":
                current, sample = ev["job"], None
            elif ev["event"] == "sample":
                sample = ev["i"]
            elif ev["event"] == "done":
                results.append(ev["rec"])
                if progress:
                    progress(ev["rec"])
                pending.pop(0)
        else:
            w.kill()
    return results


# ---- report ------------------------------------------------------------------------------------------------

SYMBOL = {"pass": "pass", "fail": "FAIL", "missing": "missing", "unsupported": "-", "nodtype": "n/s", "error": "ERROR",
          "crash": "CRASH", "timeout": "TIMEOUT", "skip": "skip", None: ""}


def summarize(records, dtypes):
    rows = {}
    for r in records:
        rows.setdefault(r["key"], {})[r["dtype"]] = r
    counts = {d: {} for d in dtypes}
    grad = {}
    for key, per in rows.items():
        for d in dtypes:
            r = per.get(d)
            if r:
                counts[d][r["status"]] = counts[d].get(r["status"], 0) + 1
        g = per.get("float32", {}).get("grad")
        if g:
            grad[g] = grad.get(g, 0) + 1
    return rows, counts, grad


def passing(records, grad=False):
    out = set()
    for r in records:
        if grad:
            if r["dtype"] == "float32" and r.get("grad") == "pass":
                out.add(f"{r['key']} grad")
        elif r["status"] == "pass":
            out.add(f"{r['key']} {r['dtype']}")
    return out


def write_docs(path, records, dtypes, meta):
    rows, counts, grad = summarize(records, dtypes)
    L = ["# Op coverage (PyTorch OpInfo database)", "",
         f"Generated by `tests/opinfo/harness.py` ({meta.get('generator', '`make test-ops-full`')}); do not edit by hand.",
         "",
         f"Each row is one OpInfo of `torch.testing._internal.common_methods_invocations.op_db` "
         f"(torch {meta.get('torch', '?')}). For each dtype, every sample input"
         + (f" (at most {meta['max_samples']} per op, spread evenly)" if meta.get("max_samples") else "")
         + " ran on tpu and on CPU and the results were compared (`torch.testing.assert_close`; tolerances per "
         "dtype in `tests/opinfo/harness.py`). The CPU fallback was off, so a pass ran natively. float32 rows also "
         "compare the gradient of every differentiable input with CPU autograd, for fixed random cotangents of every "
         "floating-point or complex output (complex outputs get complex cotangents, as in PyTorch's gradcheck).", "",
         "Random ops compare shape, dtype and distribution statistics (their samples that draw no random number "
         "-- dropout and rrelu outside training, fractional max pooling given `_random_samples` -- compare values "
         "and gradients); ops with undefined values (`empty*`) "
         "compare shape and dtype; indices that ties leave implementation-defined (sort, topk, mode, ...) are "
         "checked by the values they point at; `unique(sorted=False)` is compared as a set; singular vectors (`svd`, "
         "`linalg.svd`), defined up to sign, through the OpInfo's gauge-invariant view (|U|, S, |Vh|, U Vh). float16/bfloat16: where CPU "
         "rounds intermediate results to the low precision (addbmm, conv, ...) and tpu computes in float32, a sample "
         "that differs from CPU also passes when tpu is elementwise at least as close to the float64 result as CPU is "
         "(where CPU's element is NaN and float64's is not, tpu's must be within the tolerance of float64). "
         "float32 values and gradients that miss the tolerance against CPU are judged against the float64 result: "
         "they pass when every element is within the tolerance plus "
         f"{CPU_ERROR_FACTOR}x the largest error CPU float32 itself makes on that output (rounding depends on the "
         "summation order, which differs between XLA and CPU).",
         "",
         "Status: `pass`; `FAIL` (wrong value or an error: reason given); `missing` (an ATen op without a tpu "
         "kernel: named); `-` (the OpInfo does not support that dtype on CPU); `skip` (CPU rejects every sample); "
         "`n/s` (the op needs a dtype tpu does not have, e.g. complex, and raises TypeError naming it, or a layout it "
         "does not run, e.g. sparse, refused with NotImplementedError at the `.to(\"tpu\")`); "
         "`CRASH`/`TIMEOUT` (the op killed or hung its worker process: it ran in a subprocess, the run went on). "
         "Gradient: `pass`, `FAIL`, `missing`, `n/a` (not differentiable), `blocked` (forward fails).", "",
         "## Summary", "",
         f"{len(rows)} OpInfo entries; run took {meta.get('seconds', 0):.0f} s.", "",
         "| dtype | pass | FAIL | missing | n/s | skip | - (dtype not in the OpInfo) | CRASH/TIMEOUT/ERROR |",
         "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for d in dtypes:
        c = counts[d]
        bad = c.get("crash", 0) + c.get("timeout", 0) + c.get("error", 0)
        L.append(f"| {d} | {c.get('pass', 0)} | {c.get('fail', 0)} | {c.get('missing', 0)} | {c.get('nodtype', 0)} | "
                 f"{c.get('skip', 0)} | {c.get('unsupported', 0)} | {bad} |")
    if "float32" in dtypes:
        L += ["", "float32 gradients: " + ", ".join(f"{k} {v}" for k, v in sorted(grad.items())) + "."]
    # Most wanted kernels: how many rows each missing ATen op blocks.
    want = {}
    for r in records:
        for field in ("reason", "grad_reason"):
            m = re.match(r"no kernel: (\S+)", r.get(field) or "")
            if m:
                want.setdefault(m.group(1), set()).add(r["key"])
    if want:
        top = sorted(want.items(), key=lambda kv: -len(kv[1]))[:30]
        L += ["", "Most wanted kernels (OpInfo entries each would unblock): "
              + ", ".join(f"`{k}` ({len(v)})" for k, v in top) + "."]
    timed = sorted((r for r in records if r.get("time")), key=lambda r: -r["time"])[:12]
    if timed:
        L += ["", "Slowest entries (seconds, compiles included): "
              + ", ".join(f"`{r['key']}` {r['dtype']} {r['time']:.1f}" for r in timed) + "."]
    L += ["", "## What does not run", "",
          "An op without a tpu kernel raises `NotImplementedError` naming the ATen overload and its schema (the CPU "
          "fallback is opt-in: `TORCH_TPU_CPU_FALLBACK=1`); a dtype an op does not support raises the error CPU "
          "raises (`NotImplementedError: \"op\" not implemented for 'Bool'`, ...). Ops whose output shape depends on "
          "the data (nonzero, unique, masked_select, boolean indexing) read a count from the device (a sync).", "",
          "## float64 and complex", "",
          "float64 runs where the PJRT plugin supports it (the XLA CPU plugin does; TPUs do not) and is not part of "
          "this table; polygamma (n >= 2) and zeta accumulate in float64 internally, as CPU does, so on a TPU they "
          "need the plugin's float64 emulation. Complex dtypes are not supported: creating or moving a complex "
          "tensor to tpu raises `TypeError` naming the dtype (`n/s` rows), so ops on complex inputs fail loudly, "
          "never with a wrong value.", "",
          "## Per op", "", "| OpInfo | " + " | ".join(dtypes) + " | grad (float32) | reason |",
          "| --- |" + " --- |" * (len(dtypes) + 2)]
    for key in sorted(rows):
        per = rows[key]
        cells = [SYMBOL.get(per.get(d, {}).get("status"), "?") for d in dtypes]
        g = per.get("float32", {}).get("grad", "")
        g = {"fail": "FAIL"}.get(g, g)
        reasons = []
        for d in dtypes:
            r = per.get(d)
            if r and r["status"] not in ("pass", "unsupported") and r.get("reason"):
                if not any(r["reason"] == x for _, x in reasons):
                    reasons.append((d, r["reason"]))
        f32 = per.get("float32", {})
        if f32.get("grad") in ("fail", "missing") and f32.get("grad_reason"):
            reasons.append(("grad", f32["grad_reason"]))
        reason = "; ".join(f"{d}: {x}" for d, x in reasons[:2])
        reason = reason.replace("|", "\\|").replace("\n", " ")[:220]
        L.append(f"| `{key}` | " + " | ".join(cells) + f" | {g} | {reason} |")
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dtypes", default=",".join(ALL_DTYPES))
    p.add_argument("--grad-dtypes", default="float32")
    p.add_argument("--max-samples", type=int, default=0, help="samples per op and dtype (0: all)")
    p.add_argument("--ops", default="", help="comma-separated OpInfo keys (default: all)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds without progress before a job is killed")
    p.add_argument("-j", "--workers", type=int, default=1, help="worker processes")
    p.add_argument("--json", default="", help="write the records here")
    p.add_argument("--docs", default="", help="write the markdown table here")
    p.add_argument("--expected", default="", help="write the passing entries here (expected_pass.txt)")
    p.add_argument("--from-json", default="", help="do not run: take the records of an earlier --json run "
                   "(comma-separated files; a later file's rows replace an earlier one's) and write --docs/--expected")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    if a.worker:
        return worker_main()
    import torch

    dtypes = [d for d in a.dtypes.split(",") if d]
    keys = set(a.ops.split(",")) if a.ops else None
    if a.from_json:
        rows, meta = {}, {}
        for path in a.from_json.split(","):
            with open(path) as f:
                data = json.load(f)
            meta = meta or data["meta"]
            for r in data["records"]:
                rows[(r["key"], r["dtype"])] = r
        records = list(rows.values())
        if a.docs:
            write_docs(a.docs, records, meta.get("dtypes", dtypes), meta)
        if a.expected:
            write_expected(a.expected, records)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"meta": meta, "records": records}, f, indent=0)
        return
    t0 = time.time()
    jobs, unsupported = list_jobs(dtypes, set(a.grad_dtypes.split(",")), a.max_samples, keys)
    n = [0]

    def progress(rec):
        n[0] += 1
        if a.verbose or rec["status"] not in ("pass",):
            print(f"[{n[0]}/{len(jobs)}] {rec['key']} {rec['dtype']}: {rec['status']} {rec.get('reason', '')} "
                  f"grad={rec.get('grad')} {rec.get('grad_reason', '')} ({rec.get('time')}s)", flush=True)

    records = run_jobs_parallel(jobs, a.workers, timeout=a.timeout, progress=progress) + unsupported
    secs = time.time() - t0
    meta = {"torch": torch.__version__, "max_samples": a.max_samples, "seconds": secs, "dtypes": dtypes}
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "records": records}, f, indent=0)
    if a.docs:
        write_docs(a.docs, records, dtypes, meta)
    if a.expected:
        write_expected(a.expected, records)
    _, counts, grad = summarize(records, dtypes)
    for d in dtypes:
        print(d, counts[d])
    print("float32 grad", grad, f"({secs:.0f} s)")


def write_expected(path, records, dtypes=("float32", "bfloat16", "complex64")):
    """The entries test_opinfo.py asserts: forward passes at its dtypes and float32 gradient passes."""
    lines = sorted({e for e in passing(records) if e.split()[1] in dtypes} | passing(records, grad=True))
    with open(path, "w") as f:
        f.write("# OpInfo entries that pass natively on tpu (tests/opinfo/test_opinfo.py asserts them).\n"
                "# '<OpInfo> <dtype>' = forward passes at that dtype; '<OpInfo> grad' = float32 gradients pass.\n"
                "# Regenerate: python tests/opinfo/harness.py --max-samples 8 --expected tests/opinfo/expected_pass.txt "
                "(only float32/bfloat16/complex64 rows are kept)\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
