"""Seeded random program generator (torch on CPU only; no torch_tpu).

Each candidate op is evaluated on live CPU tensors before it is kept, so the generator knows every value's
shape, dtype and aliasing, and keeps an op CPU rejects only rarely (ERROR_RATE: those test that tpu rejects
it too). Per value it tracks:
  exact  -- bit-identical on every backend: inputs, views, copies, selections, integer arithmetic on exact
            values. Discontinuous ops (floor, comparisons, float->int, argmax, ...) are applied only to exact
            values, since a 1-ulp difference upstream legitimately flips their result.
  root   -- the base storage (aliases share it): an in-place write of an inexact value makes every alias
            of that root inexact; in-place writes are never made into a grad leaf or its views.
  random -- the value of an RNG op: compared by distribution only, so it is never read by another op.
"""
from __future__ import annotations

import copy
import random

import torch

from .program import FLOAT_DTYPES, INT_DTYPES, OpError, build_inputs, render

ERROR_RATE = 0.03  # share of CPU-rejected candidates kept in the program
MAX_NUMEL = 384

UNARY_FLOAT = ["neg", "abs", "sin", "cos", "tanh", "sigmoid", "exp", "log", "sqrt", "rsqrt", "reciprocal",
               "relu", "square", "erf", "expm1", "log1p", "atan", "sinh", "asinh", "frac_safe"]
UNARY_FLOAT_F = {"relu": "torch.relu({0})", "gelu": "F.gelu({0})", "silu": "F.silu({0})",
                 "softplus": "F.softplus({0})", "frac_safe": "torch.clamp({0}, -2.5, 2.5)",
                 "elu": "F.elu({0})", "leaky_relu": "F.leaky_relu({0}, 0.1)"}
UNARY_FLOAT += ["gelu", "silu", "softplus", "elu", "leaky_relu"]
EXACT_ONLY_UNARY = ["floor", "ceil", "round", "trunc", "sign", "signbit"]  # discontinuous: exact inputs only
UNARY_INT = ["neg", "abs", "bitwise_not", "square", "sign"]
BINARY_FLOAT = ["add", "sub", "mul", "div", "maximum", "minimum", "atan2", "hypot", "pow_abs", "fmax", "lerp"]
BINARY_INT = ["add", "sub", "mul", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]
BOOL_BINARY = ["logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_xor"]
INPLACE_BIN = ["add_", "sub_", "mul_", "copy_", "maximum_", "lerp_"]


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


class Value:
    def __init__(self, vid, t, exact, root, random_=False, leaf_grad=False):
        self.id, self.t, self.exact, self.root, self.random, self.leaf_grad = vid, t, exact, root, random_, leaf_grad

    @property
    def shape(self):
        return tuple(self.t.shape)

    @property
    def dtype(self):
        return str(self.t.dtype).replace("torch.", "")

    @property
    def isfloat(self):
        return self.t.is_floating_point()


class Generator:
    def __init__(self, seed: int, n_ops: int | None = None):
        self.seed = seed
        self.r = random.Random(seed)
        r = self.r
        self.n_ops = n_ops if n_ops is not None else r.randint(5, 60)
        self.fdt = r.choice(["float32"] * 3 + ["bfloat16", "float16"])  # the program's main float dtype
        self.grad = r.random() < 0.5
        self.inputs, self.ops, self.vals = [], [], {}
        self.next_id = 0
        self.grad_roots = set()  # roots of grad leaves: no in-place writes there

    # ---- inputs ---------------------------------------------------------------------------------------------
    def shape(self, rank=None):
        r = self.r
        rank = r.choice([0, 1, 1, 2, 2, 2, 3, 3, 4]) if rank is None else rank
        while True:
            s = [r.choice([1, 1, 2, 3, 3, 4, 5, 6, 8]) for _ in range(rank)]
            if rank and r.random() < 0.06:
                s[r.randrange(rank)] = 0
            if _numel(s) <= MAX_NUMEL:
                return s

    def new_input(self, shape, dtype, init=None, grad=None, **extra):
        r = self.r
        vid = self.next_id
        self.next_id += 1
        if init is None:
            init = ("randn" if r.random() < 0.8 else "smallint") if dtype in FLOAT_DTYPES else (
                "bool" if dtype == "bool" else "randint")
        spec = {"id": vid, "shape": list(shape), "dtype": dtype, "init": init, "seed": r.randrange(1 << 30)}
        if init == "randn":
            spec["scale"] = r.choice([0.5, 1.0, 1.0, 2.0])
        if init == "randint":
            spec["lo"], spec["hi"] = r.choice([(-5, 6), (0, 4), (-100, 100)])
        spec.update(extra)
        if grad is None:
            grad = self.grad and dtype in FLOAT_DTYPES and r.random() < 0.7
        spec["grad"] = bool(grad)
        self.inputs.append(spec)
        t = build_inputs({"inputs": [spec]}, "cpu")[vid]
        v = Value(vid, t, exact=True, root=vid, leaf_grad=spec["grad"])
        if spec["grad"]:
            self.grad_roots.add(vid)
        self.vals[vid] = v
        return v

    def index_input(self, shape, hi, lo=0):
        return self.new_input(shape, "int64", init="randint", grad=False, lo=lo, hi=max(hi, lo + 1))

    # ---- picking values -------------------------------------------------------------------------------------
    def live(self, pred=lambda v: True):
        return [v for v in self.vals.values() if not v.random and pred(v)]

    def pick(self, pred=lambda v: True):
        c = self.live(pred)
        if not c:
            return None
        if self.r.random() < 0.6:
            return self.r.choice(c[-8:])
        return self.r.choice(c)

    def bcast_shape(self, shape):
        """A shape that broadcasts against `shape`: leading dims dropped or added, some dims set to 1."""
        r = self.r
        s = list(shape)
        if s and r.random() < 0.3:
            s = s[r.randint(1, len(s)):]
        s = [1 if r.random() < 0.3 else d for d in s]
        if r.random() < 0.15 and len(s) < 4:
            s = [r.choice([1, 2])] + s
        return s if _numel(s) <= MAX_NUMEL else list(shape)

    def partner(self, a, kind):
        """A second operand for a binary op on `a`: an existing value of the same kind, a fresh input of a
        broadcastable shape, or a Python scalar (returned as str)."""
        r = self.r
        x = r.random()
        same_kind = {"float": lambda v: v.isfloat, "int": lambda v: v.dtype in INT_DTYPES,
                     "bool": lambda v: v.dtype == "bool"}[kind]
        if x < 0.15:
            return {"float": r.choice(["2.5", "-0.5", "3", "1e-3"]), "int": r.choice(["2", "-3", "7"]),
                    "bool": "True"}[kind]
        if x < 0.55:
            b = self.pick(lambda v: same_kind(v) and v.id != a.id and _bcastable(v.shape, a.shape))
            if b is not None:
                return b
        dtype = a.dtype if kind != "float" or r.random() < 0.85 else r.choice(FLOAT_DTYPES)
        return self.new_input(self.bcast_shape(a.shape), dtype)

    # ---- recording ------------------------------------------------------------------------------------------
    def emit(self, op, expr, args, kind="op", dtypes=(), exact=None, root=None, inplace_target=None):
        """Evaluates the candidate on CPU; keeps it (returns its Value) or drops it (None)."""
        rec = {"op": op, "out": self.next_id, "args": [a.id for a in args], "expr": expr, "dtypes": list(dtypes),
               "kind": kind}
        ns = {"torch": torch, "F": torch.nn.functional, "dev": "cpu"}
        for a in args:
            ns[f"v{a.id}"] = a.t
        if inplace_target is not None:
            # Evaluate on a throwaway copy first: a rejected in-place op must not leave the generator's
            # CPU state half-written.
            if inplace_target.root in self.grad_roots:
                return None
            # CPU runs these on a target whose elements alias each other (an expanded view) with a
            # deprecation warning and an order-dependent result; tpu refuses them with an error instead.
            overlap = torch._debug_has_internal_overlap(inplace_target.t)  # 0 no, 1 yes, 2 cannot tell
            if op in ("index_put_", "masked_fill_") and overlap != 0:
                return None
            # Elements that alias in a way CPU does not detect (as_strided with overlapping strides): CPU
            # writes them in its iteration order, a result PyTorch leaves undefined. (Detected ones raise on
            # CPU, and must on tpu: those stay.)
            if overlap == 2 and _aliases_itself(inplace_target.t):
                return None
            # Likewise an argument sharing some of the target's elements (x.add_(x[:, :1])): CPU refuses it where
            # it can tell (kept below as an error tpu must raise too), else reads it while it writes the target.
            shares = any(a is not inplace_target and isinstance(a.t, torch.Tensor) and
                         torch._C._overlaps(a.t, inplace_target.t) and _shares_elements(a.t, inplace_target.t)
                         for a in args)
            try:
                if shares:  # a deep copy keeps the views' sharing (clones would not overlap)
                    detached = {k: (v.detach() if isinstance(v, torch.Tensor) else v) for k, v in ns.items()}
                    probe = copy.deepcopy(detached)
                else:
                    probe = {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in ns.items()}
                eval(render(rec), probe)  # noqa: S307
            except Exception:
                if self.r.random() >= ERROR_RATE:
                    return None
                self._keep_error(rec)
                return None
            if shares:
                return None
        try:
            t = eval(render(rec), ns)  # noqa: S307
            if not isinstance(t, torch.Tensor):
                return None
            if t.numel() > 4 * MAX_NUMEL:
                return None
        except Exception:
            if self.r.random() < ERROR_RATE:
                self._keep_error(rec)
            return None
        self.next_id += 1
        self.ops.append(rec)
        if exact is None:
            exact = all(a.exact for a in args)
        if inplace_target is not None:
            root = inplace_target.root
            if not exact:
                for v in self.vals.values():
                    if v.root == root:
                        v.exact = False
        v = Value(rec["out"], t, exact, root if root is not None else rec["out"], random_=(kind == "random"))
        self.vals[v.id] = v
        return v

    def _keep_error(self, rec):
        self.next_id += 1
        self.ops.append(rec)
        self.errors += 1

    errors = 0

    # ---- op families ----------------------------------------------------------------------------------------
    def g_unary(self):
        r = self.r
        a = self.pick()
        if a is None:
            return
        if a.isfloat:
            choices = UNARY_FLOAT + (EXACT_ONLY_UNARY if a.exact else [])
            op = r.choice(choices)
            expr = UNARY_FLOAT_F.get(op, f"torch.{op}({{0}})")
            exact = a.exact and op in ("neg", "abs", "relu", "frac_safe") + tuple(EXACT_ONLY_UNARY)
            self.emit(op, expr, [a], exact=exact)
        elif a.dtype == "bool":
            op = r.choice(["logical_not", "bitwise_not"])
            self.emit(op, f"torch.{op}({{0}})", [a])
        else:
            op = r.choice(UNARY_INT)
            self.emit(op, f"torch.{op}({{0}})", [a])

    def g_binary(self):
        r = self.r
        a = self.pick()
        if a is None:
            return
        kind = "float" if a.isfloat else ("bool" if a.dtype == "bool" else "int")
        b = self.partner(a, kind)
        if kind == "float":
            op = r.choice(BINARY_FLOAT)
            if isinstance(b, str) and op in ("atan2", "hypot", "fmax", "lerp"):
                op = "mul"
            expr = {"pow_abs": "torch.pow(torch.abs({0}) + 0.5, {1})", "lerp": "torch.lerp({0}, {1}, 0.3)",
                    "add": f"torch.add({{0}}, {{1}}, alpha={r.choice([1, 1, 2, -0.5])})"}.get(
                op, f"torch.{op}({{0}}, {{1}})")
            if op == "pow_abs" and not isinstance(b, str):
                expr = "torch.pow(torch.abs({0}) + 0.5, torch.clamp({1}, -2, 2))"
            exact = a.exact and (isinstance(b, str) or b.exact) and op in ("maximum", "minimum", "fmax")
        elif kind == "int":
            op = r.choice(BINARY_INT + ["div_true"])
            expr = "torch.div({0}, {1})" if op == "div_true" else f"torch.{op}({{0}}, {{1}})"
            if isinstance(b, str) and op.startswith("bitwise"):
                op, expr = "add", "torch.add({0}, {1})"
            exact = None if op != "div_true" else False
        else:
            op = r.choice(BOOL_BINARY)
            expr = f"torch.{op}({{0}}, {{1}})"
            exact = None
        if isinstance(b, str):
            self.emit(op, expr.replace("{1}", b), [a], exact=exact if exact is not None else a.exact)
        else:
            self.emit(op, expr, [a, b], exact=exact)

    def g_compare(self):
        a = self.pick(lambda v: v.exact and v.dtype != "bool")
        if a is None:
            return
        kind = "float" if a.isfloat else "int"
        b = self.partner(a, kind)
        if not isinstance(b, str) and not b.exact:
            return
        op = self.r.choice(COMPARE)
        if isinstance(b, str):
            self.emit(op, f"torch.{op}({{0}}, {b})", [a])
        else:
            self.emit(op, f"torch.{op}({{0}}, {{1}})", [a, b])

    def g_reduce(self):
        r = self.r
        a = self.pick()
        if a is None:
            return
        nd = len(a.shape)
        dim = r.randrange(-nd, nd) if nd else None
        keep = r.random() < 0.4
        if a.isfloat:
            op = r.choice(["sum", "mean", "amax", "amin", "prod", "std", "var", "logsumexp", "cumsum", "norm",
                           "max_dim"] + (["argmax", "argmin"] if a.exact else []))
        elif a.dtype == "bool":
            op = r.choice(["any", "all", "sum"])
        else:
            op = r.choice(["sum", "amax", "amin", "prod", "cumsum", "argmax", "max_dim"])
        if op in ("argmax", "argmin") and dim is None:
            expr = f"torch.{op}({{0}})"
        elif op == "max_dim":
            if dim is None:
                return
            expr = f"torch.max({{0}}, {dim}, keepdim={keep})[0]"
        elif op in ("cumsum", "logsumexp"):
            if dim is None:
                return
            expr = f"torch.{op}({{0}}, {dim})"
        elif op == "norm":
            expr = "torch.linalg.vector_norm({0})" if dim is None else \
                f"torch.linalg.vector_norm({{0}}, dim={dim}, keepdim={keep})"
        elif dim is None or r.random() < 0.15:
            expr = f"torch.{op}({{0}})"
        else:
            dims = dim if r.random() < 0.7 or nd < 2 else (dim, (dim + 1) % nd - nd)
            if op in ("prod", "any", "all", "argmax", "argmin") and isinstance(dims, tuple):
                dims = dim
            if op in ("std", "var"):
                expr = f"torch.{op}({{0}}, dim={dims}, keepdim={keep}, correction={r.choice([0, 1])})"
            else:
                expr = f"torch.{op}({{0}}, {dims}, keepdim={keep})"
        exact = (a.exact and op in ("amax", "amin", "argmax", "argmin", "max_dim")) or (
            a.exact and not a.isfloat and op not in ("mean",))
        self.emit(op, expr, [a], exact=exact)

    def g_matmul(self):
        r = self.r
        a = self.pick(lambda v: 1 <= len(v.shape) <= 3 and (v.isfloat or v.dtype in INT_DTYPES))
        if a is None:
            return
        n = r.choice([1, 2, 3, 5])
        if len(a.shape) == 1:
            bshape = [a.shape[0], n] if r.random() < 0.5 else [a.shape[0]]
        elif len(a.shape) == 2:
            bshape = [a.shape[1], n]
        else:
            bshape = [a.shape[0], a.shape[2], n] if r.random() < 0.7 else [a.shape[2], n]
        b = self.pick(lambda v: list(v.shape) == bshape and v.dtype == a.dtype) or self.new_input(bshape, a.dtype)
        op = "bmm" if len(a.shape) == 3 and len(bshape) == 3 and r.random() < 0.5 else (
            "mm" if len(a.shape) == 2 and r.random() < 0.3 else "matmul")
        self.emit(op, f"torch.{op}({{0}}, {{1}})", [a, b], exact=not a.isfloat and None)

    def g_view(self):
        r = self.r
        a = self.pick()
        if a is None:
            return
        s, nd = a.shape, len(a.shape)
        op = r.choice(["view", "reshape", "transpose", "permute", "t", "slice", "select", "narrow", "expand",
                       "unsqueeze", "squeeze", "diagonal", "flatten", "as_strided", "split", "unbind", "chunk",
                       "contiguous", "clone", "movedim", "unflatten", "index_int"])
        d = r.randrange(nd) if nd else 0
        kind = "view"
        if op in ("view", "reshape"):
            new = _refactor(list(s), r)
            expr = f"{{0}}.{op}({', '.join(map(str, new)) or '()'})"
            kind = "view" if op == "view" else "op"
        elif op == "transpose" and nd >= 1:
            expr = f"{{0}}.transpose({d}, {r.randrange(-nd, nd)})"
        elif op == "permute" and nd >= 1:
            p = list(range(nd))
            r.shuffle(p)
            expr = f"{{0}}.permute({', '.join(map(str, p))})"
        elif op == "t" and nd <= 2:
            expr = "{0}.t()"
        elif op == "slice" and nd:
            n = s[d]
            lo = r.randint(-n, n) if n else 0
            hi = r.choice(["", str(r.randint(0, n + 2))])
            step = r.choice([1, 1, 2, 3])
            idx = ", ".join([":"] * d + [f"{lo}:{hi}:{step}"])
            expr = f"{{0}}[{idx}]"
        elif op == "select" and nd:
            expr = f"{{0}}.select({d}, {r.randint(-s[d], max(s[d] - 1, 0))})"
        elif op == "narrow" and nd:
            st = r.randint(0, s[d])
            expr = f"{{0}}.narrow({d}, {st}, {r.randint(0, s[d] - st)})"
        elif op == "expand":
            new = [r.choice([x, 2, 3]) if x == 1 else x for x in s]
            if r.random() < 0.3 and nd < 4:
                new = [r.choice([2, 3])] + new
            if _numel(new) > MAX_NUMEL:
                return
            expr = f"{{0}}.expand({', '.join(map(str, new)) or '()'})"
        elif op == "unsqueeze":
            expr = f"{{0}}.unsqueeze({r.randint(-nd - 1, nd)})"
        elif op == "squeeze":
            ones = [i for i, x in enumerate(s) if x == 1]
            expr = f"{{0}}.squeeze({r.choice(ones)})" if ones and r.random() < 0.7 else "{0}.squeeze()"
        elif op == "diagonal" and nd >= 2:
            d2 = (d + 1) % nd
            expr = f"{{0}}.diagonal({r.randint(-2, 2)}, {d}, {d2})"
        elif op == "flatten":
            expr = "{0}.flatten()" if nd < 2 else f"{{0}}.flatten({min(d, nd - 2)}, {min(d, nd - 2) + 1})"
            kind = "op"  # a view or a copy, as the input's strides decide
        elif op == "as_strided" and r.random() < 0.3:
            base = a.t
            room = base.untyped_storage().nbytes() // max(base.element_size(), 1) - base.storage_offset()
            if room < 2:
                return
            m = r.randint(1, min(4, room))
            k = r.randint(1, max(1, room // m))
            st = [r.choice([1, 2, m]), 1]
            size = [min(k, max(1, (room - 1) // max(st[0], 1) + 1)), min(m, room)]
            if (size[0] - 1) * st[0] + (size[1] - 1) * st[1] >= room:
                return
            expr = f"{{0}}.as_strided(({size[0]}, {size[1]}), ({st[0]}, {st[1]}), {base.storage_offset()})"
        elif op == "split" and nd and s[d]:
            sz = r.randint(1, s[d])
            pieces = (s[d] + sz - 1) // sz
            expr = f"{{0}}.split({sz}, {d})[{r.randrange(pieces)}]"
        elif op == "chunk" and nd and s[d]:
            c = r.randint(1, 3)
            expr = f"{{0}}.chunk({c}, {d})[-1]"
        elif op == "unbind" and nd and s[d]:
            expr = f"{{0}}.unbind({d})[{r.randrange(s[d])}]"
        elif op == "contiguous":
            expr, kind = "{0}.contiguous()", "op"
        elif op == "clone":
            expr, kind = "{0}.clone()", "op"
        elif op == "movedim" and nd >= 2:
            expr = f"{{0}}.movedim({d}, {r.randrange(nd)})"
        elif op == "unflatten" and nd and s[d] in (4, 6, 8):
            expr = f"{{0}}.unflatten({d}, (2, {s[d] // 2}))"
        elif op == "index_int" and nd >= 2 and s[0] and s[1]:
            expr = f"{{0}}[{r.randrange(s[0])}, ..., {r.randrange(s[-1])}]" if s[-1] else "{0}[0]"
        else:
            return
        self.emit(op, expr, [a], kind=kind, root=a.root if kind == "view" else None)

    def g_inplace(self):
        r = self.r
        # Prefer views that share their base with another live value (aliasing).
        roots = {}
        for v in self.live():
            roots.setdefault(v.root, []).append(v)
        shared = [v for vs in roots.values() if len(vs) > 1 for v in vs if v.root not in self.grad_roots]
        a = r.choice(shared) if shared and r.random() < 0.7 else self.pick(lambda v: v.root not in self.grad_roots)
        if a is None:
            return
        x = r.random()
        if x < 0.45:
            kind = "float" if a.isfloat else ("bool" if a.dtype == "bool" else "int")
            op = r.choice(INPLACE_BIN if kind == "float" else ["add_", "mul_", "copy_", "sub_"] if kind == "int"
                          else ["copy_", "logical_and_", "bitwise_or_"])
            if r.random() < 0.2:
                kind = r.choice(["float", "int", "bool"])  # cross-dtype copy_ / add_
            b = self.partner(a, kind)
            if isinstance(b, str) and op in ("copy_", "lerp_", "maximum_"):
                op = "mul_"
            if op == "lerp_":
                expr = "{0}.lerp_({1}, 0.25)"
            elif isinstance(b, str):
                expr = f"{{0}}.{op}({b})"
            else:
                expr = f"{{0}}.{op}({{1}})"
            exact = a.exact and (isinstance(b, str) or b.exact) and (op in ("copy_", "maximum_") or not a.isfloat)
            if not a.isfloat and not isinstance(b, str) and b.isfloat and not b.exact:
                return  # float -> int truncation of an inexact value
            args = [a] if isinstance(b, str) else [a, b]
            self.emit(op, expr, args, kind="inplace", exact=exact, inplace_target=a)
        elif x < 0.6:
            val = {"float": r.choice(["0.5", "-2.0", "0.0"]), "int": "3", "bool": "True"}[
                "float" if a.isfloat else ("bool" if a.dtype == "bool" else "int")]
            op = r.choice(["fill_", "zero_"])
            expr = f"{{0}}.fill_({val})" if op == "fill_" else "{0}.zero_()"
            self.emit(op, expr, [a], kind="inplace", exact=a.exact, inplace_target=a)
        elif x < 0.8 and a.shape and a.shape[0]:
            # index_put_ on a (view) slice: unique indices (duplicates are unordered on CPU) or accumulate.
            n = a.shape[0]
            k = r.randint(1, n)
            acc = r.random() < 0.4
            idx = self.index_input([k], n) if acc else self.new_input([k], "int64", init="perm", grad=False,
                                                                      dim=0, n=n)
            src = self.new_input(self.bcast_shape([k] + list(a.shape[1:])), a.dtype, grad=False)
            self.emit("index_put_", f"{{0}}.index_put_(({{1}},), {{2}}, accumulate={acc})", [a, idx, src],
                      kind="inplace", exact=a.exact and (not a.isfloat or not acc), inplace_target=a)
        elif a.isfloat:
            op = r.choice(["mul_", "clamp_", "neg_", "relu_", "sigmoid_", "masked_fill_"])
            if op == "masked_fill_":
                m = self.pick(lambda v: v.dtype == "bool" and _bcastable(v.shape, a.shape) and
                              len(v.shape) <= len(a.shape)) or self.new_input(self.bcast_shape(a.shape), "bool")
                self.emit(op, "{0}.masked_fill_({1}, -1.5)", [a, m], kind="inplace", exact=a.exact,
                          inplace_target=a)
                return
            expr = {"mul_": "{0}.mul_(-1.5)", "clamp_": "{0}.clamp_(-1.0, 1.0)"}.get(op, f"{{0}}.{op}()")
            self.emit(op, expr, [a], kind="inplace", exact=a.exact and op in ("clamp_", "neg_", "relu_"),
                      inplace_target=a)

    def g_combine(self):
        r = self.r
        a = self.pick()
        if a is None:
            return
        s, nd = a.shape, len(a.shape)
        op = r.choice(["cat", "stack", "where", "masked_fill", "gather", "index_select", "scatter",
                       "scatter_add", "index_add", "tril", "flip", "roll", "repeat"])
        d = r.randrange(nd) if nd else 0
        if op in ("cat", "stack"):
            if op == "cat" and not nd:
                return
            others = self.live(lambda v: v.dtype == a.dtype and len(v.shape) == nd and v.id != a.id and all(
                x == y for i, (x, y) in enumerate(zip(v.shape, s)) if op == "stack" or i != d))
            if not others or r.random() < 0.3:
                sh = list(s)
                if op == "cat" and nd:
                    sh[d] = r.choice([0, 1, 2])
                others = [self.new_input(sh, a.dtype)]
            bs = r.sample(others, min(len(others), r.randint(1, 2)))
            args = [a] + bs
            expr = f"torch.{op}([{', '.join('{%d}' % i for i in range(len(args)))}], {d})"
            self.emit(op, expr, args)
        elif op == "where":
            c = self.pick(lambda v: v.dtype == "bool" and _bcastable(v.shape, s)) or self.new_input(
                self.bcast_shape(s), "bool")
            b = self.partner(a, "float" if a.isfloat else ("bool" if a.dtype == "bool" else "int"))
            if isinstance(b, str):
                self.emit(op, f"torch.where({{0}}, {{1}}, {b})", [c, a])
            else:
                self.emit(op, "torch.where({0}, {1}, {2})", [c, a, b])
        elif op == "masked_fill":
            m = self.pick(lambda v: v.dtype == "bool" and _bcastable(v.shape, s) and len(v.shape) <= nd) or \
                self.new_input(self.bcast_shape(s), "bool")
            val = "2.5" if a.isfloat else ("True" if a.dtype == "bool" else "-7")
            self.emit(op, f"torch.masked_fill({{0}}, {{1}}, {val})", [a, m])
        elif op == "gather" and nd:
            ish = [r.randint(0, x) if i != d else r.randint(0, 4) for i, x in enumerate(s)]
            if s[d] == 0 and _numel(ish):
                return
            idx = self.index_input(ish, s[d])
            self.emit(op, f"torch.gather({{0}}, {d}, {{1}})", [a, idx])
        elif op == "index_select" and nd:
            if not s[d]:
                return
            idx = self.index_input([r.randint(0, 5)], s[d])
            self.emit(op, f"torch.index_select({{0}}, {d}, {{1}})", [a, idx])
        elif op in ("scatter", "scatter_add", "index_add") and nd and s[d]:
            if op == "index_add":
                k = r.randint(1, s[d])
                idx = self.index_input([k], s[d])
                sh = list(s)
                sh[d] = k
                src = self.new_input(sh, a.dtype)
                self.emit(op, f"torch.index_add({{0}}, {d}, {{1}}, {{2}})", [a, idx, src],
                          exact=not a.isfloat and None)
                return
            ish = [r.randint(1, x) if x else 0 for x in s]
            ish[d] = r.randint(1, s[d])
            if op == "scatter":  # unique positions along d: CPU leaves duplicate writes unordered
                idx = self.new_input(ish, "int64", init="perm", grad=False, dim=d, n=s[d])
            else:
                idx = self.index_input(ish, s[d])
            src = self.new_input(ish, a.dtype)
            self.emit(op, f"torch.{op}({{0}}, {d}, {{1}}, {{2}})", [a, idx, src],
                      exact=(op == "scatter" or not a.isfloat) and None)
        elif op == "tril" and nd >= 2:
            self.emit(op, f"torch.{r.choice(['tril', 'triu'])}({{0}}, {r.randint(-1, 1)})", [a])
        elif op == "flip" and nd:
            self.emit(op, f"torch.flip({{0}}, ({d},))", [a])
        elif op == "roll" and nd:
            self.emit(op, f"torch.roll({{0}}, {r.randint(-3, 3)}, {d})", [a])
        elif op == "repeat" and _numel(s) * 4 <= MAX_NUMEL:
            reps = [r.choice([1, 2]) for _ in range(nd)] + ([2] if r.random() < 0.3 else [])
            self.emit(op, f"{{0}}.repeat({', '.join(map(str, reps)) or '()'})", [a])

    def g_convert(self):
        r = self.r
        a = self.pick()
        if a is None:
            return
        targets = list(FLOAT_DTYPES) + (["int64", "int32", "bool"] if a.exact or not a.isfloat else [])
        to = r.choice(targets)
        exact = a.exact
        if to in FLOAT_DTYPES and not a.isfloat and a.dtype != "bool":
            exact = a.exact  # small integers convert exactly
        style = r.random()
        if style < 0.7:
            self.emit("to", "{0}.to({dt0})", [a], dtypes=[to], exact=exact)
        else:
            meth = {"float32": "float", "bfloat16": "bfloat16", "float16": "half", "int64": "long",
                    "int32": "int", "bool": "bool"}[to]
            self.emit("to", f"{{0}}.{meth}()" if to not in FLOAT_DTYPES else "{0}.to({dt0})", [a],
                      dtypes=[to] if to in FLOAT_DTYPES else [], exact=exact)

    def g_create(self):
        r = self.r
        a = self.pick()
        if a is None:
            return
        op = r.choice(["zeros_like", "ones_like", "full_like", "arange", "zeros", "eye"])
        if op == "full_like":
            self.emit(op, "torch.full_like({0}, 3)", [a], exact=True)
        elif op in ("zeros_like", "ones_like"):
            self.emit(op, f"torch.{op}({{0}})", [a], exact=True)
        elif op == "arange":
            n = r.randint(0, 12)
            dt = r.choice([self.fdt, "int64", "int32"])
            self.emit(op, f"torch.arange({n}, dtype={{dt0}}, device={{dev}})", [], dtypes=[dt], exact=True)
        elif op == "eye":
            self.emit(op, f"torch.eye({r.randint(0, 5)}, dtype={{dt0}}, device={{dev}})", [],
                      dtypes=[self.fdt], exact=True)
        else:
            sh = self.shape()
            self.emit(op, f"torch.zeros({tuple(sh)}, dtype={{dt0}}, device={{dev}})", [], dtypes=[self.fdt],
                      exact=True)

    def g_random(self):
        r = self.r
        a = self.pick(lambda v: v.isfloat)
        if a is None:
            return
        op = r.choice(["rand_like", "randn_like", "bernoulli", "dropout"])
        expr = {"rand_like": "torch.rand_like({0})", "randn_like": "torch.randn_like({0})",
                "bernoulli": "torch.bernoulli(torch.full_like({0}.detach(), 0.3))",
                "dropout": "F.dropout(torch.ones_like({0}.detach()), 0.4, training=True)"}[op]
        self.emit(op, expr, [a], kind="random", exact=False)

    FAMILIES = [("g_unary", 14), ("g_binary", 16), ("g_compare", 4), ("g_reduce", 9), ("g_matmul", 4),
                ("g_view", 20), ("g_inplace", 12), ("g_combine", 10), ("g_convert", 5), ("g_create", 2),
                ("g_random", 1.5)]

    def generate(self) -> dict:
        r = self.r
        for _ in range(r.randint(1, 3)):
            self.new_input(self.shape(), self.fdt if r.random() < 0.7 else r.choice(["int64", "int32", "bool"]))
        names, weights = zip(*self.FAMILIES)
        attempts = 0
        while len(self.ops) < self.n_ops and attempts < self.n_ops * 20:
            attempts += 1
            getattr(self, r.choices(names, weights)[0])()
        ids = [rec["out"] for rec in self.ops if rec["out"] in self.vals]
        # Outputs: the last value, every input (in-place writes land there), and a random share of the rest;
        # the others are dropped after their last use, so Fused mode may elide them.
        outs = {ids[-1]} if ids else set()
        outs |= {s["id"] for s in self.inputs}
        outs |= {i for i in ids if r.random() < 0.35}
        return {"seed": self.seed, "inputs": self.inputs, "ops": self.ops, "outputs": sorted(outs),
                "fdt": self.fdt}


def _aliases_itself(t):
    """Whether two elements of `t` share memory."""
    if t.numel() < 2:
        return False
    span = t.untyped_storage().nbytes() // t.element_size()
    where = torch.arange(span).as_strided(t.shape, t.stride(), t.storage_offset())
    return where.unique().numel() < t.numel()


def _positions(t):
    span = t.untyped_storage().nbytes() // t.element_size()
    return set(torch.arange(span).as_strided(t.shape, t.stride(), t.storage_offset()).flatten().tolist())


def _shares_elements(a, b):
    """Whether views a and b of one storage (same dtype) share an element without being the same view."""
    if a.element_size() != b.element_size():
        return True
    if a.shape == b.shape and a.stride() == b.stride() and a.storage_offset() == b.storage_offset():
        return False  # the same elements in the same order: CPU's full overlap, well defined
    return bool(_positions(a) & _positions(b))


def _bcastable(small, big):
    if len(small) > len(big):
        return False
    for x, y in zip(reversed(small), reversed(big)):
        if x != y and x != 1:
            return False
    return True


def _refactor(shape, r):
    """A new shape with the same number of elements (a -1 sometimes)."""
    n = _numel(shape)
    if n == 0:
        out = [0] + [r.choice([1, 2, 3]) for _ in range(r.randint(0, 2))]
        r.shuffle(out)
        return out
    fs = []
    m = n
    p = 2
    while m > 1:
        while m % p == 0:
            fs.append(p)
            m //= p
        p += 1
    r.shuffle(fs)
    out = []
    for f in fs:
        if out and r.random() < 0.5:
            out[-1] *= f
        else:
            out.append(f)
    if r.random() < 0.3:
        out.insert(r.randint(0, len(out)), 1)
    if out and r.random() < 0.3:
        out[r.randrange(len(out))] = -1
    return out


def generate(seed: int, n_ops: int | None = None) -> dict:
    return Generator(seed, n_ops).generate()


__all__ = ["generate", "OpError"]
