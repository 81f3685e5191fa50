"""Bounded dynamic shapes: a graph with symbolic sizes (`dynamic=True`, `mark_dynamic`) is
traced once per size bucket, and the bucket's program is replayed for every length in it.

Each symbol's value is rounded up to its bucket (the next power of two by default;
`set_buckets`). Every tensor of the graph is held padded to the bucket sizes, its eager
values in the leading part of each dynamic dimension (the prefix layout) and anything in
the rest. The real sizes reach the program as one runtime operand (an int64 tensor), so
the program does not depend on them. The FX graph is interpreted node by node, on the
call that traces only (later calls in the bucket replay the captured program), with rules
that keep the prefix layout exact:
- elementwise ops, factories and views that keep each dynamic dimension in place run as
  they are: the padding holds values nobody reads;
- reductions and contractions over a dynamic dimension mask the padding with the op's
  identity (a mean divides by the real count);
- a size used as a value (`x / n`) is the real size, from the runtime operand;
- views that merge a dynamic dimension with inner ones (or split one), concatenation along
  a dynamic dimension, slices from a runtime start and negative indices gather at
  positions computed from the real sizes;
- index tensors have their padding replaced by 0, so it never reads out of range, and the
  padded part of a scatter's source adds nothing.
The graph's inputs are padded before the call and its outputs cut back to the real sizes
after it (small eager ops). A graph with an op outside these rules, or with random ops
(their streams depend on the element count), keeps running exactly: one program per size
(`TORCH_TPU_LOG=recompile` says why).

This module holds the sizes, masks and the tables of ops by rule; bucket_rules.py checks a graph
and interprets it, bucketed_graph.py pads, traces and cuts (`plan`).
"""
import math
import operator
import os
import sys

import sympy
import torch
from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

aten = torch.ops.aten

_bucket_sizes = None  # None: powers of two; else ascending sizes


def set_buckets(sizes=None) -> None:
    """The sizes a dynamic dimension is padded up to: None for powers of two (the default),
    or an ascending list (a length above the largest runs at its own size)."""
    global _bucket_sizes
    _bucket_sizes = None if sizes is None else sorted(int(s) for s in sizes)


def enabled() -> bool:
    return os.environ.get("TORCH_TPU_COMPILE_BUCKETS", "1") not in ("0", "")


def bucket(n: int) -> int:
    if _bucket_sizes is not None:
        return next((b for b in _bucket_sizes if b >= n), n)
    return 1 << (n - 1).bit_length() if n > 1 else n


def _log(message: str) -> None:
    flags = os.environ.get("TORCH_TPU_LOG", "")
    if "recompile" in flags or "all" in flags:
        print(f"torch_tpu.compile: {message}", file=sys.stderr)


class Unsupported(Exception):
    """The graph cannot run bucketed (the message names the op): it runs at exact sizes."""


# ---------------------------------------------------------------------------------------
# Symbolic sizes.

def _expr(v):
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return v.node.expr
    if isinstance(v, (int, float, bool)):
        return sympy.sympify(v)
    raise Unsupported(f"size {v!r}")


def _dynamic(e) -> bool:
    return bool(getattr(e, "free_symbols", None))


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _shape(node):
    """The symbolic sizes of a tensor node (sympy expressions)."""
    v = _val(node)
    if not isinstance(v, torch.Tensor):
        raise Unsupported(f"{node} has no tensor value")
    return [_expr(s) for s in v.shape]


def _dyn_dims(node):
    v = _val(node)
    if not isinstance(v, torch.Tensor):
        return []
    return [d for d, s in enumerate(v.shape) if _dynamic(_expr(s))]


def _substitute(e, values):
    r = e.xreplace(values) if _dynamic(e) else e
    if not r.is_number:
        raise Unsupported(f"size {e} has symbols without a value")
    return int(r) if r.is_integer else float(r)


class Sizes:
    """Real sizes inside the traced program, as int64 tensors computed from the runtime
    operand (never the call's own numbers: the program must hold for the whole bucket)."""

    def __init__(self, symbols, operand):
        self.index = {s: i for i, s in enumerate(symbols)}
        self.operand = operand
        self.cache = {}

    def of(self, e):
        """A Python number for a static size, else a 0-dim tensor."""
        if not _dynamic(e):
            return int(e) if e.is_integer else float(e)
        if e in self.cache:
            return self.cache[e]
        r = self._build(e)
        self.cache[e] = r
        return r

    def _build(self, e):
        if isinstance(e, sympy.Symbol):
            return self.operand[self.index[e]]
        args = [self.of(a) for a in e.args]
        if isinstance(e, sympy.Add):
            return sum(args[1:], args[0])
        if isinstance(e, sympy.Mul):
            out = args[0]
            for a in args[1:]:
                out = out * a
            return out
        if isinstance(e, FloorDiv):
            return torch.div(self.tensor(args[0]), args[1], rounding_mode="floor")
        if isinstance(e, (Mod, PythonMod)):
            return torch.remainder(self.tensor(args[0]), args[1])
        if isinstance(e, sympy.Max):
            return torch.maximum(self.tensor(args[0]), self.tensor(args[1]))
        if isinstance(e, sympy.Min):
            return torch.minimum(self.tensor(args[0]), self.tensor(args[1]))
        if isinstance(e, sympy.Pow) and e.exp == -1:
            return 1.0 / args[0]
        raise Unsupported(f"size expression {e}")

    def tensor(self, a):
        return _tensor(a, self.operand.device)

    def length(self, node, dim):
        return self.of(_shape(node)[dim])


# ---------------------------------------------------------------------------------------
# Masks and gathers over the prefix layout.

def _tensor(a, device):
    """A size as a tensor: traced (a constant of the program), never uploaded from the host
    (an uploaded buffer would be a program input that a replay cannot supply)."""
    if isinstance(a, torch.Tensor):
        return a
    return torch.full((), a, dtype=torch.int64 if isinstance(a, int) else torch.float32, device=device)


def _positions(x, dim, size=None):
    """0..size-1 along `dim` of x, shaped to broadcast against x."""
    size = x.shape[dim] if size is None else size
    shape = [1] * x.dim()
    shape[dim] = size
    return torch.arange(size, device=x.device).view(shape)


def _valid(x, node, dims, sizes):
    """True where x (the value of `node`) holds an eager element along `dims`."""
    mask = None
    for d in dims:
        length = sizes.length(node, d)
        if isinstance(length, int):
            continue
        m = _positions(x, d) < length
        mask = m if mask is None else mask & m
    return mask


def _masked(x, node, dims, sizes, fill):
    dims = [d for d in dims if d in _dyn_dims(node)]
    mask = _valid(x, node, dims, sizes) if dims else None
    if mask is None:
        return x
    return torch.where(mask, x, fill)


def _identity(kind, dtype):
    if kind == "zero":
        return False if dtype == torch.bool else 0
    if kind == "one":
        return True if dtype == torch.bool else 1
    low = kind == "low"
    if dtype == torch.bool:
        return not low
    if dtype.is_floating_point:
        return -math.inf if low else math.inf
    info = torch.iinfo(dtype)
    return info.min if low else info.max


def _take(x, dim, index):
    """x's slices along `dim` at `index` (a 1-D tensor of positions, clamped into range)."""
    return torch.index_select(x, dim, index.clamp(0, x.shape[dim] - 1))


def _eager_strides(lengths):
    strides, acc = [], 1
    for n in reversed(lengths):
        strides.append(acc)
        acc = acc * n
    return strides[::-1]


def _grid(shape, strides, device):
    """sum_d position_d * strides[d] over a grid of `shape` (strides: ints or 0-dim tensors)."""
    total = torch.zeros((), dtype=torch.int64, device=device)
    for d, (n, stride) in enumerate(zip(shape, strides)):
        view = [1] * len(shape)
        view[d] = n
        total = total + torch.arange(n, device=device).view(view) * stride
    return total


def _padded_position(offset, lengths, dims, padded_shape):
    """The padded position of the element at row-major `offset` over real `lengths` (of `dims`,
    outermost first) in a tensor of `padded_shape`."""
    padded_strides = _eager_strides(padded_shape)
    position = 0
    for d, n, stride in zip(dims, lengths, _eager_strides(lengths)):
        position = position + torch.remainder(torch.div(offset, stride, rounding_mode="floor"), n) * padded_strides[d]
    return position


def _gather(flat, index, shape):
    """flat[index] (clamped into range: positions past the real elements read anything) as `shape`."""
    index = _tensor(index, flat.device).expand(shape).reshape(-1)
    return flat.index_select(0, index.clamp(0, max(flat.numel() - 1, 0))).view(shape)


def _regather_view(x, in_node, out_node, out_padded, sizes):
    """x viewed as out_node's shape when the view moves eager elements: each output position
    reads the input position holding the same eager (row-major) element."""
    in_len = [sizes.of(e) for e in _shape(in_node)]
    out_len = [sizes.of(e) for e in _shape(out_node)]
    offset = _grid(out_padded, _eager_strides(out_len), x.device)
    return _gather(x.reshape(-1), _padded_position(offset, in_len, range(x.dim()), list(x.shape)), out_padded)


def _from_eager_storage(flat, node, padded, sizes):
    """The padded value of `node` from `flat`, the first elements of a storage holding it in eager's
    contiguous layout: each padded position reads the element with its eager offset."""
    return _gather(flat, _grid(padded, _eager_strides([sizes.of(e) for e in _shape(node)]), flat.device), padded)


def _to_eager_storage(x, node, order, sizes):
    """x (node's padded value) laid out as eager lays out its elements (dims in `order`, outermost
    first: a dense layout), in a flat tensor of x.numel(): memory position m holds the element eager
    stores at offset m; positions past the real element count hold anything."""
    lengths = [sizes.of(_shape(node)[d]) for d in order]
    memory = torch.arange(x.numel(), device=x.device)
    return _gather(x.reshape(-1), _padded_position(memory, lengths, order, list(x.shape)), [x.numel()])


def _dense_order(sizes, strides):
    """The dims from outermost to innermost when (sizes, strides) lay the elements out densely, else None."""
    order = sorted(range(len(sizes)), key=lambda d: -strides[d])
    expected = 1
    for d in reversed(order):
        if sizes[d] != 1 and strides[d] != expected:
            return None
        expected *= sizes[d]
    return order


def _view_keeps_layout(in_padded, in_dyn, out_padded, out_dyn) -> bool:
    """A plain view is exact when every group of dimensions it merges or splits has its
    dynamic dimension (if any) outermost: then the group's eager elements stay in front."""
    i = j = 0
    ni, no = len(in_padded), len(out_padded)
    while i < ni or j < no:
        gi, gj = [i] if i < ni else [], [j] if j < no else []
        pi = in_padded[i] if i < ni else 1
        pj = out_padded[j] if j < no else 1
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj and i < ni:
                pi *= in_padded[i]
                gi.append(i)
                i += 1
            elif j < no:
                pj *= out_padded[j]
                gj.append(j)
                j += 1
            else:
                return False
        for group, dyn, padded in ((gi, in_dyn, in_padded), (gj, out_dyn, out_padded)):
            inner = [d for d in group if padded[d] != 1][1:]
            if any(d in dyn for d in inner):
                return False
    return True


# ---------------------------------------------------------------------------------------
# Rules: what each op needs to stay exact in the prefix layout.

PLAIN = {
    aten.expand.default, aten.permute.default, aten.transpose.int, aten.t.default,
    aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
    aten.clone.default, aten.alias.default, aten.detach.default, aten._to_copy.default,
    aten.lift_fresh_copy.default, aten.copy.default, aten.copy_.default,
    aten.arange.default, aten.arange.start, aten.arange.start_step,
    aten.ones.default, aten.zeros.default, aten.empty.memory_format, aten.empty_strided.default,
    aten.new_zeros.default, aten.new_ones.default, aten.new_empty.default, aten.new_full.default,
    aten.zeros_like.default, aten.ones_like.default, aten.empty_like.default, aten.full_like.default,
    aten.scalar_tensor.default, aten.full.default, aten.tril.default, aten.triu.default,
    aten.cumsum.default, aten.cumprod.default, aten.logcumsumexp.default,
    aten.sym_size.int, aten.sym_numel.default, aten.sym_stride.int,
    operator.getitem,
}
SKIPPED = {aten._assert_scalar.default, aten.sym_constrain_range_for_size.default}

# op: (how padding is filled, where the reduced dims are: positional index, or None for all)
REDUCTIONS = {
    aten.sum.dim_IntList: ("zero", 1), aten.sum.default: ("zero", None),
    aten.prod.dim_int: ("one", 1), aten.prod.default: ("one", None),
    aten.amax.default: ("low", 1), aten.amin.default: ("high", 1),
    aten.max.dim: ("low", 1), aten.min.dim: ("high", 1),
    aten.max.default: ("low", None), aten.min.default: ("high", None),
    aten.argmax.default: ("low", 1), aten.argmin.default: ("high", 1),
    aten.any.dim: ("zero", 1), aten.any.dims: ("zero", 1), aten.any.default: ("zero", None),
    aten.all.dim: ("one", 1), aten.all.dims: ("one", 1), aten.all.default: ("one", None),
    aten.logsumexp.default: ("low", 1),
    aten._softmax.default: ("low", 1), aten._log_softmax.default: ("low", 1),
    aten._safe_softmax.default: ("low", 1),
}
# op: the (argument, contracted dim) pairs whose padding must be 0
CONTRACTIONS = {
    aten.mm.default: ((0, 1), (1, 0)), aten.bmm.default: ((0, 2), (1, 1)),
    aten.addmm.default: ((1, 1), (2, 0)), aten.baddbmm.default: ((1, 2), (2, 1)),
    aten.dot.default: ((0, 0), (1, 0)), aten.mv.default: ((0, 1), (1, 0)),
    aten.addmv.default: ((1, 1), (2, 0)),
}
# op: (index arguments whose padding becomes a harmless value, value; source arguments zeroed)
INDEXING = {
    aten.embedding.default: ((1,), 0, ()),
    aten.index_select.default: ((2,), 0, ()),
    aten.gather.default: ((2,), 0, ()),
    aten.index_add.default: ((2,), 0, (3,)),
    aten.scatter_add.default: ((2,), 0, (3,)),
    aten.embedding_dense_backward.default: ((1,), 0, (0,)),
}
VALUE_OPS = {  # ops that may take a size as their scalar operand (it becomes a runtime tensor)
    aten.add, aten.sub, aten.mul, aten.div, aten.pow, aten.remainder, aten.floor_divide,
    aten.eq, aten.ne, aten.lt, aten.le, aten.gt, aten.ge, aten.maximum, aten.minimum,
}


def _tensor_overload(packet):
    """The overload of `packet` taking a tensor where the size was a number."""
    for name in ("Tensor", "Tensor_Tensor", "default"):
        if hasattr(packet, name):
            return getattr(packet, name)
    raise Unsupported(f"{packet} has no tensor overload")


# Ops whose int arguments may be symbolic positions (handled by their rules); any other op
# given a symbolic int argument (not a size list) runs at exact sizes.
SYMBOLIC_POSITIONS = {aten.slice.Tensor, aten.select.int, aten.sym_size.int, aten.sym_stride.int}
# Ops whose int-list arguments are not sizes: symbolic entries would be positions or amounts.
NOT_SIZES = {aten.constant_pad_nd.default, aten.roll.default, aten.as_strided.default}


def _symbolic_ints(node):
    """(int arguments, int-list arguments) of an ATen op fed by symbolic sizes."""
    ints, lists = False, False
    for i, arg in enumerate(node.target._schema.arguments):
        value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
        kind = str(arg.type)
        if kind in ("int", "Optional[int]", "SymInt", "Optional[SymInt]") and _is_size_node(value):
            ints = True
        elif isinstance(value, (list, tuple)) and any(_is_size_node(v) for v in value) and "int" in kind.lower():
            lists = True
    return ints, lists


def _reduced_dims(node, rank, pos):
    if pos is None:
        return list(range(rank))
    dims = node.args[pos] if len(node.args) > pos else node.kwargs.get("dim")
    if dims is None or dims == []:
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return [d % max(rank, 1) for d in dims]


def _is_tensor_node(a):
    return isinstance(a, torch.fx.Node) and isinstance(_val(a), torch.Tensor)


def _is_size_node(a):
    return isinstance(a, torch.fx.Node) and isinstance(_val(a), (torch.SymInt, torch.SymFloat))


def _value_positions(node):
    """Arguments of an ATen op where a symbolic size is used as a number, not a size."""
    if not isinstance(node.target, torch._ops.OpOverload) or node.target in (aten.arange.default, aten.arange.start,
                                                                            aten.arange.start_step):
        return []
    found = []
    for i, arg in enumerate(node.target._schema.arguments):
        value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
        if _is_size_node(value) and isinstance(arg.type, (torch._C.NumberType, torch._C.TensorType, torch._C.FloatType)):
            found.append(i)
    return found


def _rule_name(op):
    """The Interpreter method holding op's rule: aten.slice.Tensor -> _aten_slice_Tensor."""
    return "_" + str(op).replace(".", "_")
