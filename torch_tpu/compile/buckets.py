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


def check(gm: torch.fx.GraphModule):
    """Raises Unsupported naming the first op the rules cannot keep exact."""
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        t = node.target
        if node.op != "call_function":
            raise Unsupported(f"{node.op} {t}")
        if isinstance(t, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in t.tags:
            raise Unsupported(f"{t} draws random numbers (its stream depends on the element count)")
        if t in SKIPPED:
            continue
        if isinstance(t, torch._ops.OpOverload):
            ints, lists = _symbolic_ints(node)
            if ints and t not in SYMBOLIC_POSITIONS:
                raise Unsupported(f"{t} takes a size as a position")
            if lists and t in NOT_SIZES:
                raise Unsupported(f"{t} takes sizes as amounts")
        values = _value_positions(node)
        if values and not (t.overloadpacket in VALUE_OPS and values == [1]) and t not in (
                aten.scalar_tensor.default, aten.full.default):
            raise Unsupported(f"{t} takes a size as a number")
        dynamic = any(_dyn_dims(a) for a in node.all_input_nodes) or any(
            isinstance(v, torch.Tensor) and any(_dynamic(_expr(s)) for s in v.shape)
            for v in (_val(node) if isinstance(_val(node), (list, tuple)) else [_val(node)]))
        if t in (aten.argmax.default, aten.argmin.default) and dynamic and (
                len(node.args) < 2 or node.args[1] is None) and _val(node.args[0]).dim() > 1:
            raise Unsupported(f"{t} over all dims (a flat index) of a tensor with a dynamic dimension")
        if not dynamic or t in PLAIN or t in REDUCTIONS or t in CONTRACTIONS:
            continue
        if not isinstance(t, torch._ops.OpOverload):
            continue  # Python arithmetic on sizes
        if torch.Tag.pointwise in t.tags:
            continue
        if t in INDEXING:
            if t == aten.embedding_dense_backward.default and len(node.args) > 4 and node.args[4]:
                raise Unsupported(f"{t} with scale_grad_by_freq")
            continue
        x = node.args[0] if node.args else None
        if hasattr(Interpreter, _rule_name(t)):
            if t == aten.constant_pad_nd.default and any(p < 0 for p in node.args[1]):
                raise Unsupported(f"{t} with negative padding")
            if t == aten.linalg_vector_norm.default and not (len(node.args) < 2 or node.args[1] > 0):
                raise Unsupported(f"{t} of order {node.args[1]}")
            continue
        if t == aten.native_layer_norm.default:
            rank = _val(x).dim()
            if any(d >= rank - len(node.args[1]) for d in _dyn_dims(x)):
                raise Unsupported(f"{t} over a dynamic dimension")
            continue
        if t in (aten.split.Tensor, aten.split_with_sizes.default):
            dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
            if dim % _val(x).dim() in _dyn_dims(x):
                raise Unsupported(f"{t} along a dynamic dimension")
            continue
        if t == aten.repeat.default:  # tiling a dynamic dimension would interleave its padding
            repeats, rank = node.args[1], _val(x).dim()
            if any(repeats[len(repeats) - rank + d] != 1 for d in _dyn_dims(x)):
                raise Unsupported(f"{t} along a dynamic dimension")
            continue
        raise Unsupported(f"{t} on a tensor with a dynamic dimension")


class Interpreter:
    """Runs the graph on padded values (inside the compiled-graph scope: traced into one program)."""

    def __init__(self, gm, sizes, expected, compact=None):
        self.gm, self.sizes, self.expected = gm, sizes, expected
        self.compact = compact or {}  # output node -> its eager dim order: returned in eager's layout

    def run(self, args):
        env = {}
        placeholders = iter(args)

        def load(a):
            return torch.fx.node.map_arg(a, lambda n: env[n])

        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                value = next(placeholders)
                want = self.expected(node)
                if isinstance(value, torch.Tensor) and want is not None and value.dim() != len(want):
                    value = _from_eager_storage(value, node, want, self.sizes)  # a storage's first elements
                env[node] = value
            elif node.op == "output":
                outs = node.args[0]
                single = not isinstance(outs, (list, tuple))
                values = [_to_eager_storage(env[o], o, self.compact[o], self.sizes) if o in self.compact else load(o)
                          for o in ([outs] if single else outs)]
                return values[0] if single else values
            elif node.op == "get_attr":  # a constant tensor of the graph
                env[node] = torch.fx.graph_module._get_attr(self.gm, node.target)
            elif node.target in SKIPPED:
                env[node] = None
            else:
                result = self.call(node, list(load(node.args)), dict(load(node.kwargs)))
                self.verify(node, result)
                env[node] = result
        return None

    def verify(self, node, result):
        want = self.expected(node)
        if want is not None and isinstance(result, torch.Tensor) and list(result.shape) != want:
            raise Unsupported(f"{node.target} gave sizes {list(result.shape)} where the bucket needs {want}")

    def call(self, node, args, kwargs):
        t = node.target
        sizes = self.sizes
        for i in _value_positions(node):
            real = sizes.tensor(sizes.of(_expr(_val(node.args[i]))))
            if t == aten.scalar_tensor.default:
                return real.to(kwargs.get("dtype") or torch.get_default_dtype())
            if t == aten.full.default:
                dtype = kwargs.get("dtype") or torch.get_default_dtype()
                return torch.zeros(args[0], dtype=dtype, device=kwargs.get("device")) + real.to(dtype)
            args[i] = real
            t = _tensor_overload(t.overloadpacket)
        if t in REDUCTIONS:
            kind, pos = REDUCTIONS[t]
            x = node.args[0]
            dims = _reduced_dims(node, _val(x).dim(), pos)
            args[0] = _masked(args[0], x, dims, sizes, _identity(kind, args[0].dtype))
            return t(*args, **kwargs)
        if t in CONTRACTIONS:
            for i, d in CONTRACTIONS[t]:
                args[i] = _masked(args[i], node.args[i], [d], sizes, 0)
            return t(*args, **kwargs)
        if t in INDEXING:
            indices, safe, sources = INDEXING[t]
            for i in indices:
                args[i] = _masked(args[i], node.args[i], _dyn_dims(node.args[i]), sizes, safe)
            index = node.args[indices[0]]
            for i in sources:  # the source's elements that padded index entries would add
                if t == aten.index_add.default:  # a 1-D index along `dim` of the source
                    aligned = {0: node.args[1] % args[i].dim()} if _dyn_dims(index) else {}
                else:  # the index's dims are the source's leading dims
                    aligned = {d: d for d in _dyn_dims(index)}
                mask = None
                for d_index, d_source in aligned.items():
                    m = _positions(args[i], d_source) < sizes.length(index, d_index)
                    mask = m if mask is None else mask & m
                if mask is not None:
                    args[i] = torch.where(mask, args[i], 0)
            return t(*args, **kwargs)
        rule = getattr(self, _rule_name(t), None)
        return rule(node, args, kwargs) if rule else t(*args, **kwargs)

    # Means and variances divide by the real count.
    def _count(self, node, dims):
        count = 1
        for d in dims:
            count = count * self.sizes.length(node, d)
        return count

    def _mean_dims(self, node, args, kwargs, pos):
        x = node.args[0]
        dims = _reduced_dims(node, _val(x).dim(), pos)
        keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        dtype = kwargs.get("dtype") or args[0].dtype
        wide = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
        total = _masked(args[0], x, dims, self.sizes, 0).sum(dims, keepdim=keepdim, dtype=wide)
        return (total / self._count(x, dims)).to(dtype)

    def _aten_mean_dim(self, node, args, kwargs):
        return self._mean_dims(node, args, kwargs, 1)

    def _aten_mean_default(self, node, args, kwargs):
        return self._mean_dims(node, args, kwargs, None)

    def _var(self, node, args, kwargs):
        x = node.args[0]
        dims = _reduced_dims(node, _val(x).dim(), 1)
        correction = kwargs.get("correction", 1)
        correction = 1 if correction is None else correction
        keepdim = kwargs.get("keepdim", False)
        count = self._count(x, dims)
        mean = _masked(args[0], x, dims, self.sizes, 0).sum(dims, keepdim=True) / count
        dev = _masked(args[0] - mean, x, dims, self.sizes, 0)
        var = (dev * dev).sum(dims, keepdim=keepdim) / (count - correction)
        return var, (mean if keepdim else mean.squeeze(dims))

    def _aten_var_correction(self, node, args, kwargs):
        return self._var(node, args, kwargs)[0]

    def _aten_var_mean_correction(self, node, args, kwargs):
        return self._var(node, args, kwargs)

    def _aten_std_correction(self, node, args, kwargs):
        return self._var(node, args, kwargs)[0].sqrt()

    def _aten_linalg_vector_norm_default(self, node, args, kwargs):
        x = node.args[0]
        dims = _reduced_dims(node, _val(x).dim(), 2)
        args[0] = _masked(args[0], x, dims, self.sizes, 0)
        return node.target(*args, **kwargs)

    def _softmax_backward(self, node, args, kwargs):
        dim = args[2] % args[0].dim()
        args[0] = _masked(args[0], node.args[0], [dim], self.sizes, 0)
        args[1] = _masked(args[1], node.args[1], [dim], self.sizes, 0)
        return node.target(*args, **kwargs)

    _aten__softmax_backward_data_default = _softmax_backward
    _aten__log_softmax_backward_data_default = _softmax_backward

    def _aten_native_layer_norm_backward_default(self, node, args, kwargs):
        for i in (0, 1, 3, 4):  # grad_out, input, mean, rstd: padded rows add nothing to the weight grads
            args[i] = _masked(args[i], node.args[i], _dyn_dims(node.args[i]), self.sizes, 0)
        return node.target(*args, **kwargs)

    def _nll(self, node, args, kwargs, target):
        ignore = args[target + 3] if len(args) > target + 3 else kwargs.get("ignore_index", -100)
        args[target] = _masked(args[target], node.args[target], _dyn_dims(node.args[target]), self.sizes, ignore)
        return node.target(*args, **kwargs)

    def _aten_nll_loss_forward_default(self, node, args, kwargs):
        return self._nll(node, args, kwargs, 1)

    def _aten_nll_loss_backward_default(self, node, args, kwargs):
        return self._nll(node, args, kwargs, 2)

    _aten_nll_loss2d_forward_default = _aten_nll_loss_forward_default
    _aten_nll_loss2d_backward_default = _aten_nll_loss_backward_default

    # Ops that move eager elements.
    def _view(self, node, args, kwargs):
        x, size = args[0], list(args[1])
        out_padded = self.expected(node)
        if _view_keeps_layout(list(x.shape), _dyn_dims(node.args[0]), out_padded, _dyn_dims(node)):
            return node.target(*args, **kwargs)
        return _regather_view(x, node.args[0], node, out_padded, self.sizes)

    _aten_view_default = _view
    _aten__unsafe_view_default = _view
    _aten_reshape_default = _view

    def _aten_select_int(self, node, args, kwargs):
        x, dim, index = args
        dim %= x.dim()
        if _is_size_node(node.args[2]):  # a runtime position
            real = self.sizes.of(_expr(_val(node.args[2])))
        elif dim not in _dyn_dims(node.args[0]) or index >= 0:
            return node.target(*args, **kwargs)
        else:  # from the real end
            real = self.sizes.length(node.args[0], dim) + index
        position = self.sizes.tensor(real).reshape(1)
        return _take(x, dim, position).squeeze(dim)

    def _aten_index_Tensor(self, node, args, kwargs):
        # x[i, j, ...]: eager's indices address real positions, so they read the same elements of the
        # padded x; negative ones count from the real end of a dynamic dimension, one past it is sent
        # past the padding (the kernel's range check raises eager's IndexError), and an index's own
        # padding reads position 0 (its results land in the output's padding).
        x, indices = node.args[0], node.args[1]
        dynamic = _dyn_dims(x)
        bound = []
        for d, (i_node, index) in enumerate(zip(indices, args[1])):
            if i_node is not None:
                if index.dtype == torch.bool:  # a mask's true count is data: no bucket shape
                    raise Unsupported(f"{node.target} with a boolean index")
                index = _masked(index, i_node, _dyn_dims(i_node), self.sizes, 0)
                if d in dynamic:
                    length = self.sizes.tensor(self.sizes.length(x, d))
                    index = torch.where(index < 0, index + length, index)
                    index = torch.where((index < 0) | (index >= length), args[0].shape[d], index)
            bound.append(index)
        return node.target(args[0], bound)

    def _aten_slice_Tensor(self, node, args, kwargs):
        x = args[0]
        dim = (args[1] if len(args) > 1 else kwargs.get("dim", 0)) % x.dim()
        start = args[2] if len(args) > 2 else kwargs.get("start")
        start_node = node.args[2] if len(node.args) > 2 else node.kwargs.get("start")
        step = args[4] if len(args) > 4 else kwargs.get("step", 1)
        from_end = start is not None and start < 0 and dim in _dyn_dims(node.args[0])
        if not _is_size_node(start_node) and not from_end:
            return node.target(*args, **kwargs)
        if _is_size_node(start_node):
            real = self.sizes.of(_expr(_val(start_node)))
        else:
            real = self.sizes.length(node.args[0], dim) + start
        real = torch.clamp(self.sizes.tensor(real), min=0)
        count = self.expected(node)[dim]
        return _take(x, dim, real + torch.arange(count, device=x.device) * step)

    def _aten_cat_default(self, node, args, kwargs):
        tensors = args[0]
        dim = (args[1] if len(args) > 1 else kwargs.get("dim", 0))
        if dim % _val(node).dim() not in _dyn_dims(node):
            return node.target(*args, **kwargs)
        dim %= _val(node).dim()
        parts = [(t, n) for t, n in zip(tensors, node.args[0]) if t.dim() == _val(node).dim() and t.shape[dim] > 0]
        total = self.expected(node)[dim]
        position = torch.arange(total, device=parts[0][0].device)
        out, offset = None, 0
        for t, n in parts:
            piece = _take(t, dim, position - offset)
            if out is None:
                out = piece
            else:
                shape = [1] * t.dim()
                shape[dim] = total
                out = torch.where((position >= offset).view(shape), piece, out)
            offset = offset + self.sizes.length(n, dim)
        return out

    def _arange(self, node, args, kwargs):
        # arange(start, end): the start is a value (the first element), the length a size.
        start = node.args[0]
        if not _is_size_node(start):
            return node.target(*args, **kwargs)
        step = args[2] if len(args) > 2 else kwargs.get("step", 1)
        count = self.expected(node)[0]
        kwargs.setdefault("dtype", _val(node).dtype)
        first = self.sizes.tensor(self.sizes.of(_expr(_val(start)))).to(kwargs["dtype"])
        return torch.arange(count, **kwargs) * step + first

    _aten_arange_start = _arange
    _aten_arange_start_step = _arange

    def _aten_constant_pad_nd_default(self, node, args, kwargs):
        x, pad = args[0], args[1]
        value = args[2] if len(args) > 2 else kwargs.get("value", 0)
        out = node.target(*args, **kwargs)
        dyn = _dyn_dims(node.args[0])
        for k in range(len(pad) // 2):
            d = x.dim() - 1 - k
            low, high = pad[2 * k], pad[2 * k + 1]
            if d in dyn and high:
                end = self.sizes.length(node.args[0], d) + low
                out = torch.where(_positions(out, d) >= end, value, out)
        return out


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
