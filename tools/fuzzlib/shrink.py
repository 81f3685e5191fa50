"""Shrinks a failing program to a small one that still fails the same way, and prints it as a standalone script.

"The same way" is the failure's signature, (kind, op) in the same mode: a value mismatch of `index_put_` stays
a value mismatch of `index_put_`, it may not turn into some other failure on the way down. Shrinking deletes ops
(an op goes with every later op that reads its value), then outputs, then gradient flags, each step kept only
when the smaller program still shows the signature.
"""
from __future__ import annotations

import torch

from .check import check, run_cpu
from .program import function_source, make_input


def without(program: dict, drop: set) -> dict:
    """`program` without the ops at indices `drop` and every op that (transitively) reads one of their values."""
    gone, ops = set(), []
    for k, rec in enumerate(program["ops"]):
        if k in drop or any(a in gone for a in rec["args"]):
            gone.add(rec["out"])
        else:
            ops.append(rec)
    return _tidy(dict(program, ops=ops), [o for o in program["outputs"] if o not in gone])


def _tidy(program: dict, outputs: list) -> dict:
    used = {a for rec in program["ops"] for a in rec["args"]} | set(outputs)
    inputs = [s for s in program["inputs"] if s["id"] in used]
    known = {s["id"] for s in inputs} | {rec["out"] for rec in program["ops"]}
    return dict(program, inputs=inputs, outputs=[o for o in outputs if o in known])


def shows(program: dict, mode: str, signature) -> bool:
    """Whether `program` still fails in `mode` with `signature`."""
    if not program["outputs"]:
        return False
    try:
        fails = check(program, (mode,), cpu=run_cpu(program))[mode]
    except Exception:
        return False
    return bool(fails) and any(f.signature == signature for f in fails)


def shrink(program: dict, mode: str, signature, budget: int = 250) -> dict:
    """The smallest program found (within `budget` checks) that still fails in `mode` with `signature`."""
    tries = 0

    def attempt(candidate):
        nonlocal tries
        tries += 1
        return shows(candidate, mode, signature)

    # Deleting op chunks, halving the chunk size when no chunk can go (delta debugging over the op list).
    n = 2
    while tries < budget and len(program["ops"]) > 1:
        ops = program["ops"]
        size = max(1, len(ops) // n)
        for start in range(len(ops) - size, -1, -size) if size < len(ops) else []:
            candidate = without(program, set(range(start, min(start + size, len(ops)))))
            if len(candidate["ops"]) < len(ops) and attempt(candidate):
                program = candidate
                break
            if tries >= budget:
                break
        else:
            if size == 1:
                break
            n = min(n * 2, len(ops))
            continue
        n = max(n - 1, 2)
    for o in list(program["outputs"]):
        if tries >= budget or len(program["outputs"]) == 1:
            break
        candidate = _tidy(program, [x for x in program["outputs"] if x != o])
        if attempt(candidate):
            program = candidate
    for i, spec in enumerate(program["inputs"]):
        if tries >= budget:
            break
        if spec.get("grad"):
            inputs = list(program["inputs"])
            inputs[i] = dict(spec, grad=False)
            candidate = dict(program, inputs=inputs)
            if attempt(candidate):
                program = candidate
    return program


def _literal(spec: dict) -> str:
    t = make_input(spec)
    dt = f"torch.{spec['dtype']}"
    if t.numel() == 0:
        body = f"torch.empty({tuple(t.shape)}, dtype={dt})"
    else:
        src = "torch.float64" if t.is_floating_point() else dt
        vals = t.to(torch.float64 if t.is_floating_point() else t.dtype).flatten().tolist()
        body = f"torch.tensor({vals!r}, dtype={src}).to({dt}).reshape({tuple(t.shape)})"
    return body


def reproducer(program: dict, mode: str, failure: dict) -> str:
    """A standalone script (torch and torch_tpu only) that runs the program on CPU and on tpu in `mode` and
    fails where the fuzzer saw the mismatch."""
    lines = [
        f"# torch_tpu fuzz reproducer: seed {program['seed']}, mode {mode}",
        f"# {failure['kind']} in {failure['op']}: {failure['detail'][:200]}".replace("\n", " "),
        "import torch",
        "import torch.nn.functional as F",
        "import torch_tpu",
        "",
        f"torch_tpu.set_eager_mode({'strict' if mode == 'compile' else mode!r})",
        "",
        function_source(program),
        "",
        "INPUTS = [",
    ]
    for spec in program["inputs"]:
        lines.append(f"    ({_literal(spec)}, {bool(spec.get('grad'))}),")
    lines += [
        "]",
        "",
        "",
        "def run(dev):",
        f"    torch.manual_seed({program['seed']})",
        "    xs = [t.to(dev).requires_grad_(g) for t, g in INPUTS]",
        "    fn = torch.compile(program, backend='tpu') if dev == 'tpu' and "
        f"{mode == 'compile'} else program",
        "    outs = fn(*xs, dev)",
        "    leaves = [x for x, (_, g) in zip(xs, INPUTS) if g]",
        "    diff = [o for o in outs if o.requires_grad]",
        "    grads = []",
        "    if leaves and diff:",
        "        loss = sum((o.float() * torch.ones_like(o, dtype=torch.float32)).sum() for o in diff)",
        "        grads = torch.autograd.grad(loss, leaves, allow_unused=True)",
        "    return [t.detach().cpu() for t in list(outs) + xs] + [g.cpu() for g in grads if g is not None]",
        "",
        "",
        "expected, actual = run('cpu'), run('tpu')",
        "for k, (a, e) in enumerate(zip(actual, expected)):",
        "    tol = {torch.bfloat16: 1.6e-2, torch.float16: 1e-3}.get(e.dtype, 1e-5)",
        "    torch.testing.assert_close(a, e, rtol=tol, atol=tol, equal_nan=True, msg=lambda m: f'result {k}: {m}')",
        "print('tpu matches CPU')",
    ]
    return "\n".join(lines) + "\n"
