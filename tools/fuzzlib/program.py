"""A fuzz program: plain data (inputs + op records) and the one interpreter that runs it on any device.

A program is a dict:
    {"seed": int, "inputs": [input spec...], "ops": [op record...], "outputs": [value id...]}
An input spec says how to build a CPU tensor deterministically (its own generator seed), so CPU and tpu runs
start from bit-identical values. An op record is one Python expression over earlier values:
    {"op": "add", "out": 7, "args": [3, 5], "expr": "torch.add({0}, {1}, alpha=2)", "dtypes": [], "kind": "op"}
`{k}` is replaced by the k-th argument's variable, `{dtK}` by the K-th entry of "dtypes" (so the float64
reference can map every floating dtype to float64), `{dev}` by the device. kind is "op", "view" (a pure view:
its strides and offset are compared too), "inplace" or "random" (values compared by statistics only).

Because a record is an expression, the same text is what the interpreter evaluates and what a reproducer
script prints: there is no second implementation to disagree with the first.

No torch_tpu import here: this module runs CPU programs too.
"""
from __future__ import annotations

import torch

FLOAT_DTYPES = ("float32", "bfloat16", "float16")
INT_DTYPES = ("int64", "int32")


def dtype_of(name: str) -> torch.dtype:
    return getattr(torch, name)


def is_float_name(name: str) -> bool:
    return name in FLOAT_DTYPES or name == "float64"


def make_input(spec: dict) -> torch.Tensor:
    """The CPU tensor an input spec describes (no requires_grad)."""
    g = torch.Generator().manual_seed(spec["seed"])
    shape, dt, init = tuple(spec["shape"]), spec["dtype"], spec["init"]
    if init == "randn":
        t = torch.randn(shape, generator=g, dtype=torch.float64) * spec.get("scale", 1.0)
    elif init == "smallint":  # floats holding small integers: ties and exact equalities
        t = torch.randint(-3, 4, shape, generator=g, dtype=torch.int64).to(torch.float64)
    elif init == "randint":
        t = torch.randint(spec["lo"], spec["hi"], shape, generator=g, dtype=torch.int64)
    elif init == "bool":
        t = torch.rand(shape, generator=g) < spec.get("p", 0.5)
    elif init == "perm":  # unique indices along `dim` (scatter/index_put targets without duplicates)
        full = list(shape)
        full[spec["dim"]] = spec["n"]
        t = torch.argsort(torch.rand(full, generator=g), dim=spec["dim"]).narrow(spec["dim"], 0, shape[spec["dim"]])
    else:
        raise ValueError(f"unknown input init {init!r}")
    # contiguous, on its own storage: the layout and storage size `.to("tpu")` (or "cuda") gives the device
    # copy (a narrowed permutation is contiguous on a larger storage, where CPU's as_strided could reach further)
    return t.to(dtype_of(dt)).clone(memory_format=torch.contiguous_format)


def render_dtype(name: str, ref: bool) -> str:
    if ref and is_float_name(name):
        return "torch.float64"
    return f"torch.{name}"


def render(rec: dict, ref: bool = False, dev: str = "dev") -> str:
    """The Python expression of one op record, over variables v<id>."""
    names = [f"v{i}" for i in rec["args"]]
    dts = {f"dt{k}": render_dtype(d, ref) for k, d in enumerate(rec.get("dtypes", []))}
    return rec["expr"].format(*names, dev=dev, **dts)


def last_uses(program: dict) -> dict:
    """value id -> index of the last op reading it (outputs: never dropped)."""
    last = {}
    for k, rec in enumerate(program["ops"]):
        for a in rec["args"]:
            last[a] = k
    for o in program["outputs"]:
        last[o] = len(program["ops"])
    return last


def build_inputs(program: dict, device, ref: bool = False) -> dict:
    """value id -> tensor on `device` (float inputs as float64 for the reference); grad inputs are leaves."""
    vals = {}
    for spec in program["inputs"]:
        t = make_input(spec)
        if ref and t.is_floating_point():
            t = t.to(torch.float64)
        t = t.to(device)
        if spec.get("grad"):
            t.requires_grad_(True)
        vals[spec["id"]] = t
    return vals


class OpError:
    """Stands for the value of an op that raised (and of everything computed from it)."""

    def __init__(self, k, exc, derived=False):
        self.k, self.exc, self.derived = k, exc, derived

    def __repr__(self):
        return f"OpError(op {self.k}: {type(self.exc).__name__}: {str(self.exc)[:120]})"


def run_eager(program: dict, device, ref: bool = False, keep_all: bool = False):
    """Runs the program op by op on `device` (the current eager mode applies on tpu).

    Returns (inputs, values, errors): inputs as built (leaves, for gradients), values {id: tensor or OpError}
    for the outputs (every value with keep_all), errors {op index: exception} for the ops that raised.
    A value nothing reads later is dropped as soon as possible, so Fused mode may elide it."""
    inputs = build_inputs(program, device, ref)
    vals = dict(inputs)
    errors = {}
    last = last_uses(program)
    ns = {"torch": torch, "F": torch.nn.functional, "dev": str(device)}
    outs = set(program["outputs"])
    default = torch.get_default_dtype()
    if ref:  # Python scalars and default-dtype creations promote to float64 in the reference
        torch.set_default_dtype(torch.float64)
    try:
        for k, rec in enumerate(program["ops"]):
            args = [vals.get(a) for a in rec["args"]]
            bad = [a for a in args if isinstance(a, OpError) or a is None]
            if bad:
                vals[rec["out"]] = OpError(k, bad[0].exc if isinstance(bad[0], OpError) else None, derived=True)
            else:
                for i, a in zip(rec["args"], args):
                    ns[f"v{i}"] = a
                try:
                    vals[rec["out"]] = eval(render(rec, ref), ns)  # noqa: S307 -- our own generated text
                except Exception as e:  # an op CPU rejects must be rejected on tpu too: recorded, compared
                    errors[k] = e
                    vals[rec["out"]] = OpError(k, e)
                for i in rec["args"]:
                    ns.pop(f"v{i}", None)
            if not keep_all:
                for a in set(rec["args"]) | {rec["out"]}:
                    if last.get(a, -1) <= k and a not in outs:
                        vals.pop(a, None)
    finally:
        if ref:
            torch.set_default_dtype(default)
    values = vals if keep_all else {o: vals.get(o) for o in program["outputs"]}
    return inputs, values, errors


def function_source(program: dict, ref: bool = False, name: str = "program") -> str:
    """The program as one Python function of its inputs (what torch.compile traces and reproducers print)."""
    params = ", ".join(f"v{s['id']}" for s in program["inputs"])
    lines = [f"def {name}({params}{', ' if params else ''}dev):"]
    for rec in program["ops"]:
        lines.append(f"    v{rec['out']} = {render(rec, ref)}")
    outs = ", ".join(f"v{o}" for o in program["outputs"])
    lines.append(f"    return [{outs}]")
    return "\n".join(lines)


def compile_function(program: dict, ref: bool = False, name: str = "program"):
    ns = {"torch": torch, "F": torch.nn.functional}
    exec(compile(function_source(program, ref, name), f"<fuzz seed {program.get('seed')}>", "exec"), ns)  # noqa: S102
    return ns[name]


def grad_leaves(program: dict, inputs: dict) -> list:
    return [inputs[s["id"]] for s in program["inputs"] if s.get("grad")]


def cotangents(program: dict, outputs: list, ref: bool = False) -> list:
    """Fixed cotangents for the differentiable outputs, drawn on CPU in float32 (float64 copies for the
    reference, so both runs see the same numbers); None where an output takes no part in the backward."""
    cots = []
    for k, (o, oid) in enumerate(zip(outputs, program["outputs"])):
        if isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point() and not _random(program, oid):
            g = torch.Generator().manual_seed(1000 + k)
            c = torch.randn(o.shape, generator=g, dtype=torch.float32)
            cots.append(c.to(torch.float64) if ref else c)
        else:
            cots.append(None)
    return cots


def _random(program, oid):
    return any(r["out"] == oid and r["kind"] == "random" for r in program["ops"])


def backward(program: dict, inputs: dict, outputs: list, ref: bool = False):
    """Gradients of sum(out * cotangent) wrt the grad inputs; None when the program has no differentiable output
    (or no grad input). The loss is accumulated in float32 (float64 for the reference) whatever the outputs'
    dtypes, so no low-precision sum is part of the comparison."""
    leaves = grad_leaves(program, inputs)
    if not leaves:
        return None
    cots = cotangents(program, outputs, ref)
    terms = []
    for o, c in zip(outputs, cots):
        if c is not None:
            wide = torch.float64 if ref else torch.float32
            terms.append((o.to(wide) * c.to(o.device)).sum())
    if not terms:
        return None
    loss = terms[0]
    for t in terms[1:]:
        loss = loss + t
    return list(torch.autograd.grad(loss, leaves, allow_unused=True))
