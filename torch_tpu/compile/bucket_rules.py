"""The ops of a bucketed graph (buckets.py): `check` says whether every op of an FX graph can run padded to
the bucket sizes and stay exact; `Interpreter` runs the graph on padded values with the rule each op needs
(reductions and contractions mask the padding, means divide by the real count, views that move elements
gather them, attention masks padded keys)."""
import torch

from .buckets import (
    CONTRACTIONS, INDEXING, NOT_SIZES, PLAIN, REDUCTIONS, SKIPPED, SYMBOLIC_POSITIONS, VALUE_OPS, Unsupported,
    _dyn_dims, _dynamic, _expr, _shape, _from_eager_storage, _identity, _is_size_node, _masked, _positions,
    _reduced_dims, _regather_view, _rule_name, _symbolic_ints, _take, _tensor_overload, _to_eager_storage, _val,
    _value_positions, _view_keeps_layout, aten,
)

ATTENTION = {aten._scaled_dot_product_fused_attention_overrideable.default,
             aten._scaled_dot_product_fused_attention_overrideable_backward.default}


def check(gm: torch.fx.GraphModule):
    """Raises Unsupported naming the first op the rules cannot keep exact."""
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        t = node.target
        if node.op != "call_function":
            raise Unsupported(f"{node.op} {t}")
        if isinstance(t, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in t.tags and not (
                t in ATTENTION and _dropout(node) == 0):
            raise Unsupported(f"{t} draws random numbers (its stream depends on the element count)")
        if t in SKIPPED:
            continue
        if isinstance(t, torch._ops.OpOverload):
            ints, lists = _symbolic_ints(node)
            if ints and t not in SYMBOLIC_POSITIONS and t not in ATTENTION:  # attention: max_q/max_k, unread
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
            if t in ATTENTION:
                _check_attention(node)
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


def _in_dim_order(t, like):
    """t laid out in the dim order of `like` (the graph's fake value, strides by their hints): the attention
    kernel lays its results out like its inputs, as the meta kernels the graph was traced with do, and later
    views of the graph rely on it. Padded inputs may have lost that order."""
    strides = [s.node.hint if isinstance(s, torch.SymInt) else s for s in like.stride()]
    if any(s is None for s in strides):  # an unbacked size: no order to follow
        return t
    order = sorted(range(t.dim()), key=lambda d: strides[d], reverse=True)
    permuted = t.permute(order)
    if permuted.is_contiguous():
        return t
    return permuted.contiguous().permute([order.index(d) for d in range(t.dim())])


def _dropout(node):
    at = 12 if node.target == aten._scaled_dot_product_fused_attention_overrideable_backward.default else 4
    return node.args[at] if len(node.args) > at else node.kwargs.get("dropout_p", 0.0)


def _check_attention(node):
    backward = node.target == aten._scaled_dot_product_fused_attention_overrideable_backward.default
    q, k, v = node.args[1:4] if backward else node.args[0:3]
    if any(d in (1, 3) for a in (q, k, v) for d in _dyn_dims(a)):
        raise Unsupported(f"{node.target} with a dynamic number of heads or head size")
    bias = node.args[4 if backward else 3] if len(node.args) > (4 if backward else 3) else None
    if bias is not None and 2 in _dyn_dims(k) and _val(bias).dim() > 0 and \
            _shape(bias)[-1] != _shape(k)[2]:
        raise Unsupported(f"{node.target} with a bias broadcast over a dynamic number of keys")


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

    # Attention (AttentionKernels.cpp): query rows are independent, so padded ones are only zeroed (finite, and
    # adding nothing to the key/value gradients); padded keys are masked out of the softmax by the bias.
    def _attention_inputs(self, node, args, bias_at, backward):
        q_at, k_at = bias_at - 3, bias_at - 2
        for i in range(0 if backward else q_at, bias_at):  # (grad_out,) query, key, value
            masked = _masked(args[i], node.args[i], _dyn_dims(node.args[i]), self.sizes, 0)
            args[i] = _in_dim_order(masked, _val(node.args[i]))
        if 2 in _dyn_dims(node.args[k_at]):
            keep = (_positions(args[k_at], 2) < self.sizes.length(node.args[k_at], 2)).transpose(2, 3)
            args += [None] * (bias_at + 1 - len(args))
            bias = args[bias_at]
            low = torch.full((), float("-inf"), dtype=args[q_at].dtype, device=args[q_at].device)
            args[bias_at] = torch.where(keep, low.new_zeros(()) if bias is None else bias, low)
        return args

    def _aten__scaled_dot_product_fused_attention_overrideable_default(self, node, args, kwargs):
        return node.target(*self._attention_inputs(node, args, 3, False), **kwargs)

    def _aten__scaled_dot_product_fused_attention_overrideable_backward_default(self, node, args, kwargs):
        return node.target(*self._attention_inputs(node, args, 4, True), **kwargs)

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
