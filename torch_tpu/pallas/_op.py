"""JAX functions (and Pallas kernels) as torch.library custom ops.

Per call on tpu tensors: one dict lookup by shape signature and `_C._foreign_call`, which records an op
whose program calls the exported function (inlined into the strict op's module, or into the fused graph /
compiled graph module with its neighbours). JAX runs only when a new shape signature is exported.
"""
from __future__ import annotations

import inspect
import threading

import torch

from . import _export

_libraries: dict[str, torch.library.Library] = {}  # keep the registrations alive
_ops: dict[str, "_JaxOp"] = {}


def _signature(tensors):
    return tuple((tuple(t.shape), t.dtype) for t in tensors)


class _JaxOp:
    """One JAX function behind one torch op: its exports per shape signature."""

    def __init__(self, qualname: str, fn, num_inputs: int, num_outputs: int):
        self.qualname, self.fn = qualname, fn
        self.num_inputs, self.num_outputs = num_inputs, num_outputs
        self._shapes: dict = {}    # signature -> [(shape, dtype)] of the outputs
        self._foreign: dict = {}   # signature -> foreign function id (tpu)
        self._lock = threading.Lock()

    def _check_args(self, args):
        if len(args) != self.num_inputs:
            raise TypeError(f"{self.qualname}: expected {self.num_inputs} tensors, got {len(args)}")
        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
                raise TypeError(f"{self.qualname}: argument {i} must be a Tensor, got {type(a).__name__}")

    def out_types(self, sig):
        out = self._shapes.get(sig)
        if out is None:
            leaves, is_seq = _export.eval_shape(self.fn, sig)
            expected = self.num_outputs
            if (is_seq or expected != 1) and len(leaves) != expected:
                raise ValueError(f"{self.qualname}: the JAX function returns {len(leaves)} arrays but the op was "
                                 f"declared with num_outputs={expected}")
            out = self._shapes[sig] = leaves
        return out

    def _pack(self, outs):
        return outs[0] if self.num_outputs == 1 else tuple(outs)

    def fake(self, *args):
        self._check_args(args)
        device = args[0].device if args else torch.device("cpu")
        outs = [torch.empty(shape, dtype=dt, device=device) for shape, dt in self.out_types(_signature(args))]
        return self._pack(outs)

    def tpu(self, *args):
        sig = _signature(args)
        key = (sig, torch.get_float32_matmul_precision())
        fid = self._foreign.get(key)
        if fid is None:
            fid = self._register(sig, key)
        return self._pack(torch_tpu_C()._foreign_call(fid, list(args)))

    def _register(self, sig, key):
        self._check_args_types(sig)
        with self._lock:
            fid = self._foreign.get(key)
            if fid is None:
                outs = self.out_types(sig)
                entry, text = _export.export_text(self.fn, sig, self.qualname, key[1])
                fid = torch_tpu_C()._foreign_register(self.qualname, entry, text, [(dt, list(s)) for s, dt in sig],
                                                      [(dt, list(s)) for s, dt in outs])
                self._foreign[key] = fid
        return fid

    def _check_args_types(self, sig):
        for shape, dt in sig:
            _export.jax_dtype(dt)

    def cpu(self, *args):
        """Runs the JAX function itself (jaxlib's CPU backend): the op on CPU tensors, e.g. as a reference."""
        jax = _export.import_jax()
        import numpy as np
        sig = _signature(args)
        outs_t = self.out_types(sig)
        with jax.enable_x64(True):
            arrays = [jax.numpy.asarray(_to_numpy(a)) for a in args]
            out = jax.jit(self.fn)(*arrays)
        leaves = jax.tree_util.tree_leaves(out)
        res = [_from_numpy(np.asarray(x), dt) for x, (_, dt) in zip(leaves, outs_t)]
        return self._pack(res)


def _to_numpy(t: torch.Tensor):
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _from_numpy(a, dt: torch.dtype) -> torch.Tensor:
    if dt == torch.bfloat16:
        import numpy as np
        return torch.from_numpy(np.ascontiguousarray(a).view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def torch_tpu_C():
    import torch_tpu._C as C
    return C


def _arg_names(fn, num_inputs):
    if num_inputs is not None:
        return [f"x{i}" for i in range(num_inputs)]
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise TypeError("torch_tpu.pallas: cannot read the JAX function's signature; pass num_inputs=") from None
    names = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"torch_tpu.pallas: {fn!r} takes *args/**kwargs; pass num_inputs=")
        if p.default is not p.empty or p.kind == p.KEYWORD_ONLY:
            continue  # parameters with defaults keep them (bind constants with functools.partial)
        names.append(p.name)
    return names


def _define(qualname, fn, names, num_outputs, dispatch_cpu=True):
    if "::" not in qualname:
        raise ValueError(f"torch_tpu.pallas: op name {qualname!r} must be 'namespace::name'")
    ns, name = qualname.split("::", 1)
    if qualname in _ops:
        raise RuntimeError(f"torch_tpu.pallas: op {qualname} is already defined")
    op = _JaxOp(qualname, fn, len(names), num_outputs)
    lib = _libraries.get(ns)
    if lib is None:
        lib = _libraries[ns] = torch.library.Library(ns, "FRAGMENT")
    ret = "Tensor" if num_outputs == 1 else "(" + ", ".join(["Tensor"] * num_outputs) + ")"
    lib.define(f"{name}({', '.join('Tensor ' + n for n in names)}) -> {ret}")
    lib.impl(name, op.tpu, "PrivateUse1")
    if dispatch_cpu:
        lib.impl(name, op.cpu, "CPU")
    torch.library.register_fake(qualname, op.fake, lib=lib)
    _ops[qualname] = op
    return op


def jax_op(name: str, fn=None, *, num_outputs: int = 1, num_inputs: int | None = None, vjp=None):
    """Turns a JAX function of arrays into the torch op `name` ("ns::op"), callable as torch.ops.ns.op.

    The function is exported once per input shape signature (jax.export) and its StableHLO is inlined into
    torch_tpu's programs (strict, fused, torch.compile); no JAX runs on later calls. On CPU tensors the op
    runs the function with JAX's own CPU backend. Autograd: reverse mode through jax.vjp of `fn` (a
    jax.custom_vjp inside fn is honoured), or `vjp(*inputs, *output_cotangents) -> input cotangents`, a JAX
    function exported the same way. Pallas kernels work when pallas_call(..., interpret=True) on plugins
    without a Mosaic compiler (the CPU plugin). Returns the op (torch.ops.ns.op).
    """
    if fn is None:  # decorator form: @jax_op("ns::op")
        return lambda f: jax_op(name, f, num_outputs=num_outputs, num_inputs=num_inputs, vjp=vjp)
    _export.import_jax()
    names = _arg_names(fn, num_inputs)
    op = _define(name, fn, names, num_outputs)
    _add_autograd(op, names, vjp)
    ns, short = name.split("::", 1)
    return getattr(getattr(torch.ops, ns), short)


def _add_autograd(op: _JaxOp, names, vjp):
    n = op.num_inputs
    fn = op.fn

    if vjp is None:
        import jax

        def vjp(*args):
            primals, cts = args[:n], args[n:]
            float_idx = [i for i, p in enumerate(primals) if jax.numpy.issubdtype(p.dtype, jax.numpy.inexact)]

            def f(*floats):
                full = list(primals)
                for i, v in zip(float_idx, floats):
                    full[i] = v
                return fn(*full)

            out, pullback = jax.vjp(f, *[primals[i] for i in float_idx])
            leaves, tree = jax.tree_util.tree_flatten(out)
            ct_leaves = []
            it = iter(cts)
            for leaf in leaves:
                if jax.numpy.issubdtype(leaf.dtype, jax.numpy.inexact):
                    ct_leaves.append(next(it).astype(leaf.dtype))
                else:
                    ct_leaves.append(jax.numpy.zeros(leaf.shape, jax.dtypes.float0))
            grads = pullback(jax.tree_util.tree_unflatten(tree, ct_leaves))
            return tuple(grads)
        float_inputs = None  # decided per call from the dtypes
    else:
        float_inputs = "all"

    bwd_name = op.qualname + "_backward"
    holder = {}

    def backward(ctx, *grads):
        inputs = ctx.saved_tensors
        float_in = [i for i, t in enumerate(inputs) if t.is_floating_point()] if float_inputs is None \
            else list(range(n))
        float_out = [g for g, is_f in zip(grads, ctx.float_outputs) if is_f]
        bwd = holder.get(len(float_in))
        if bwd is None:
            bwd = holder[len(float_in)] = _backward_op(bwd_name, vjp, n, len(float_out), len(float_in))
        outs = bwd(*inputs, *[g.contiguous() for g in float_out])
        outs = (outs,) if isinstance(outs, torch.Tensor) else outs
        result = [None] * n
        for i, g in zip(float_in, outs):
            result[i] = g
        return tuple(result)

    def setup_context(ctx, inputs, output):
        outs = (output,) if isinstance(output, torch.Tensor) else output
        ctx.float_outputs = [o.is_floating_point() for o in outs]
        ctx.save_for_backward(*inputs)

    torch.library.register_autograd(op.qualname, backward, setup_context=setup_context, lib=_libraries[
        op.qualname.split("::")[0]])


def _backward_op(qualname, vjp, n_in, n_ct, n_grads):
    # One op per number of float inputs (dtypes decide which inputs have gradients).
    name = qualname if n_grads == n_in else f"{qualname}{n_grads}"
    if name in _ops:
        ns, short = name.split("::", 1)
        return getattr(getattr(torch.ops, ns), short)
    names = [f"p{i}" for i in range(n_in)] + [f"ct{i}" for i in range(n_ct)]
    _define(name, vjp, names, n_grads)
    ns, short = name.split("::", 1)
    return getattr(getattr(torch.ops, ns), short)


def custom_jax_kernel(name=None, *, num_outputs: int = 1, num_inputs: int | None = None, vjp=None):
    """Decorator form of jax_op: `@custom_jax_kernel` (op torch_tpu_jax::<function name>) or
    `@custom_jax_kernel("ns::op", num_outputs=2)`."""
    if callable(name):
        fn = name
        return jax_op(f"torch_tpu_jax::{fn.__name__}", fn)
    def wrap(fn):
        return jax_op(name or f"torch_tpu_jax::{fn.__name__}", fn, num_outputs=num_outputs, num_inputs=num_inputs,
                      vjp=vjp)
    return wrap
