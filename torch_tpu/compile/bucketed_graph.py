"""A graph with symbolic sizes run at bucket sizes (buckets.py): `plan(gm)` gives a BucketedGraph, which
pads the inputs, interprets the graph once per bucket (bucket_rules.py) and cuts the outputs back."""
import math
import operator

import sympy
import torch

from .bucket_rules import Interpreter, check
from .buckets import (
    Sizes, Unsupported, _dense_order, _dyn_dims, _eager_strides, _expr, _is_size_node, _is_tensor_node, _log,
    _substitute, _val, aten, bucket, enabled,
)


VIEWS = {aten.slice.Tensor, aten.select.int, aten.view.default, aten.transpose.int, aten.permute.default,
         aten.t.default, aten.expand.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
         aten.squeeze.default, aten.alias.default, aten.as_strided.default, aten.diagonal.default,
         aten.unfold.default, aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int, operator.getitem}


def _viewed_placeholder(node):
    """The graph input that `node` is a view of, or None."""
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in VIEWS:
        node = node.args[0]
    return node if isinstance(node, torch.fx.Node) and node.op == "placeholder" else None


class BucketedGraph:
    """One FX graph (forward, backward or inference) run at bucket sizes."""

    def __init__(self, gm):
        check(gm)
        self.gm = gm
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.output = next(n for n in gm.graph.nodes if n.op == "output")
        # Where each symbol's real value is read from the arguments: (argument, dim or None).
        self.sources = {}
        for i, p in enumerate(self.placeholders):
            v = _val(p)
            if isinstance(v, torch.SymInt) and isinstance(_expr(v), sympy.Symbol):
                self.sources.setdefault(_expr(v), (i, None))
            elif isinstance(v, torch.Tensor):
                for d, s in enumerate(v.shape):
                    if isinstance(_expr(s), sympy.Symbol):
                        self.sources.setdefault(_expr(s), (i, d))
        symbols = set()
        for n in gm.graph.nodes:
            if n.op == "placeholder" and not _is_tensor_node(n):
                continue
            for v in (_val(n) if isinstance(_val(n), (list, tuple)) else [_val(n)]):
                if isinstance(v, torch.Tensor):
                    symbols |= {x for s in v.shape for x in getattr(_expr(s), "free_symbols", ())}
                elif isinstance(v, (torch.SymInt, torch.SymFloat)):
                    symbols |= _expr(v).free_symbols
        missing = symbols - set(self.sources)
        if missing:
            raise Unsupported(f"sizes {sorted(map(str, missing))} do not come from the inputs")
        self.symbols = sorted(self.sources, key=str)
        self.used = symbols | {_expr(_val(p)) for p in self.placeholders if _is_size_node(p) and p.users}
        self.mutated = {n.args[0] for n in gm.graph.nodes
                        if n.op == "call_function" and n.target == aten.copy_.default and n.args[0].op == "placeholder"}
        # Outputs the program returns in eager's dense layout (flat), cut back by a view: no eager op.
        self.compact = {}
        outs = self.output.args[0]
        for o in (outs if isinstance(outs, (list, tuple)) else []):
            v = _val(o) if isinstance(o, torch.fx.Node) else None
            if isinstance(v, torch.Tensor) and _dyn_dims(o) and _viewed_placeholder(o) is None:
                hint = {s: sympy.Integer(2 + i) for i, s in enumerate(self.symbols)}  # stride order at sizes >= 2
                order = _dense_order([_substitute(_expr(x), hint) for x in v.shape],
                                     [_substitute(_expr(x), hint) for x in v.stride()])
                if order is not None and _expr(v.storage_offset()) == 0:
                    self.compact[o] = order
        self._expected = {}
        self._inputs = {}  # bucket key -> _input_plan
        self._outputs = None  # _output_plan

    def real_values(self, args):
        values = []
        for s in self.symbols:
            i, d = self.sources[s]
            values.append(int(args[i]) if d is None else args[i].shape[d])
        return values

    def buckets(self, values):
        # A size no op reads (a stride Dynamo made symbolic) does not choose the program.
        return [bucket(v) if s in self.used else 0 for s, v in zip(self.symbols, values)]

    def expected(self, key, node):
        """A tensor node's padded sizes under `key` (the symbols' bucket values)."""
        v = _val(node)
        if not isinstance(v, torch.Tensor):
            return None
        cache = self._expected.setdefault(key, {})
        if node not in cache:
            subs = dict(zip(self.symbols, map(sympy.Integer, key)))
            cache[node] = [_substitute(_expr(s), subs) for s in v.shape]
        return cache[node]

    def _input_plan(self, key):
        """Per placeholder, how a call of bucket `key` passes its argument (built once per bucket):
        ("size", value) | ("read", padded sizes, capacity, storage room, eager layout is padded) |
        ("pad", padded sizes) | None (as it is)."""
        plan = self._inputs.get(key)
        if plan is None:
            subs = dict(zip(self.symbols, map(sympy.Integer, key)))
            plan = []
            for p in self.placeholders:
                v = _val(p)
                if isinstance(v, (torch.SymInt, torch.SymFloat)):
                    plan.append(("size", _substitute(_expr(v), subs)))
                elif isinstance(v, torch.Tensor) and _dyn_dims(p):
                    want = self.expected(key, p)
                    outer = next((d for d in range(len(want)) if want[d] != 1), 0)
                    plan.append(("read", want, math.prod(want), self._storage_room(key, p, math.prod(want)),
                                 all(d == outer for d in _dyn_dims(p))) if p not in self.mutated else ("pad", want))
                else:
                    plan.append(None)
            self._inputs[key] = plan
        return plan

    def pad_inputs(self, args, key):
        """The call's arguments at bucket sizes (sizes as bucket values, tensors padded)."""
        padded = []
        for how, a in zip(self._input_plan(key), args):
            if how is None or not isinstance(a, torch.Tensor) and how[0] != "size":
                padded.append(a)
            elif how[0] == "size":
                padded.append(how[1])
            elif how[0] == "read" and a.is_contiguous():
                # Read from a storage in eager's layout with the bucket's capacity: in place when the
                # tensor comes from a call of this bucket (our outputs have that capacity), else
                # copied once into one (a new bucket's first call, or the caller's own tensor).
                _, want, capacity, room, same_layout = how
                if a.storage_offset() != 0 or a.untyped_storage().nbytes() != room * a.element_size():
                    storage = torch.zeros(room, dtype=a.dtype, device=a.device)  # all written: replayable
                    storage[:a.numel()].copy_(a.reshape(-1))
                    a = storage
                if same_layout:  # eager's layout is the padded one
                    padded.append(a.as_strided(want, _eager_strides(want), 0))
                else:  # the first elements, rearranged into the padded layout by the program
                    padded.append(a.as_strided((capacity,), (1,), 0))
            else:
                want = how[1]
                pads = []
                for d in reversed(range(a.dim())):
                    pads += [0, want[d] - a.shape[d]]
                padded.append(torch.nn.functional.pad(a, pads) if any(pads) else a)
        return padded

    def _storage_room(self, key, p, capacity):
        """The storage size (elements) that p's argument has when a call of bucket `key` made it:
        an output of the same dtype and rank whose static sizes match p's (a cache returned and
        passed back) has the capacity of its padded value; otherwise p's own padded size."""
        room = capacity
        v, dyn = _val(p), _dyn_dims(p)
        for o in self.compact:
            w = _val(o)
            if w.dtype == v.dtype and w.dim() == v.dim() and all(
                    d in dyn or w.shape[d] == v.shape[d] for d in range(v.dim())):
                room = max(room, math.prod(self.expected(key, o)))
        return room

    def trace(self, args, key, operand):
        sizes = Sizes(self.symbols, operand)
        return Interpreter(self.gm, sizes, lambda n: self.expected(key, n), self.compact).run(args)

    def _output_plan(self):
        """Per output: how its real value is made from the program's, and one function of the
        symbols' values giving every output's real sizes, strides and offset (sympy, compiled once)."""
        if self._outputs is None:
            nodes = self.output.args[0]
            nodes = nodes if isinstance(nodes, (list, tuple)) else [nodes]
            plan, exprs = [], []
            for node in nodes:
                v = _val(node) if isinstance(node, torch.fx.Node) else None
                if isinstance(v, (torch.SymInt, torch.SymFloat)):
                    how = "size"
                elif not isinstance(v, torch.Tensor) or not (_dyn_dims(node) or _viewed_placeholder(node)):
                    plan.append(None)
                    continue
                elif _viewed_placeholder(node) is not None:
                    how = ("view", self.placeholders.index(_viewed_placeholder(node)))
                elif node in self.compact:
                    how = "compact"
                else:
                    how = "cut"
                meta = [_expr(v)] if how == "size" else [_expr(x) for x in (*v.shape, *v.stride(), v.storage_offset())]
                plan.append((how, len(exprs), len(meta), 0 if how == "size" else v.dim()))
                exprs += meta
            self._outputs = (plan, _evaluator(self.symbols, exprs))
        return self._outputs

    def cut_outputs(self, outs, values, padded_args, args):
        """The padded results at their real sizes; in-place updates of padded inputs written back."""
        plan, evaluate = self._output_plan()
        meta = evaluate(values)
        single = not isinstance(self.output.args[0], (list, tuple))
        outs = [outs] if single else outs
        result = []
        for how, o in zip(plan, outs):
            if how is None:
                result.append(o)
                continue
            kind, at, count, rank = how
            m = meta[at:at + count]
            if kind == "size":
                result.append(m[0])
                continue
            size, stride, offset = m[:rank], m[rank:2 * rank], m[2 * rank]
            if kind != "cut" and kind != "compact":
                # A view of an input in eager: the same view of the caller's tensor (AOTAutograd
                # regenerates such outputs from their base, reading sizes, strides and offset).
                result.append(args[kind[1]].as_strided(size, stride, offset))
            elif kind == "compact":  # already in eager's layout: a view of its first elements
                result.append(o.as_strided(size, stride, 0))
            else:
                cut = o[tuple(slice(0, n) for n in size)]
                if stride == _eager_strides(size):  # a copy of its own, not a view of the padded storage
                    result.append(cut.clone(memory_format=torch.contiguous_format))
                else:
                    result.append(torch.empty_strided(size, stride, dtype=o.dtype, device=o.device).copy_(cut))
        for i, p in enumerate(self.placeholders):
            if p in self.mutated and padded_args[i] is not args[i]:
                args[i].copy_(padded_args[i][tuple(slice(0, n) for n in args[i].shape)])
        return result[0] if single else result


_SYMPY_FUNCTIONS = {"FloorDiv": lambda a, b: a // b, "Mod": lambda a, b: a % b, "PythonMod": lambda a, b: a % b,
                    "CeilDiv": lambda a, b: -(-a // b), "Max": max, "Min": min}


def _evaluator(symbols, exprs):
    """A function from the symbols' values to the expressions' values (ints where integral)."""
    try:
        fn = sympy.lambdify(symbols, exprs, modules=[_SYMPY_FUNCTIONS, "math"])
        return lambda values: [int(x) if float(x).is_integer() else x for x in fn(*values)]
    except Exception:
        return lambda values: [_substitute(e, dict(zip(symbols, map(sympy.Integer, values)))) for e in exprs]


def plan(gm: torch.fx.GraphModule):
    """A BucketedGraph for a graph with symbolic sizes, or None (static graph, or one the
    rules cannot keep exact: logged)."""
    if not enabled():
        return None
    has_symbols = any(isinstance(_val(p), (torch.SymInt, torch.SymFloat)) or _dyn_dims(p)
                      for p in gm.graph.nodes if p.op == "placeholder")
    if not has_symbols:
        return None
    try:
        return BucketedGraph(gm)
    except Unsupported as e:
        log_exact(e)
        return None


def log_exact(reason) -> None:
    _log(f"graph runs at exact sizes (one program per size), not bucketed: {reason}")
