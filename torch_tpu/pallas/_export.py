"""JAX export -> StableHLO text that torch_tpu programs inline (no JAX after this, per shape signature).

How the StableHLO version gap is handled: the JAX that exports (jaxlib's StableHLO) is usually newer than
the compiler inside the PJRT plugin. We (1) ask the plugin which StableHLO version it reads
(`stablehlo_current_version`, a PJRT plugin attribute) and serialize the module as a portable artifact at
that version: if the module uses an op or attribute the plugin's version does not have, this fails here,
with a clear error, instead of as an unreadable plugin parse error; then (2) print the functions in MLIR's
generic op form without locations, symbols renamed apart from our `@main` and made private. Generic form
prints only the attributes that are set, so a module that passes (1) prints text the older parser reads.
"""
from __future__ import annotations

import itertools
import threading

import torch

_counter = itertools.count()
_lock = threading.Lock()

_TORCH_TO_JAX = {
    torch.float32: "float32", torch.float64: "float64", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.int8: "int8", torch.int16: "int16", torch.int32: "int32", torch.int64: "int64", torch.uint8: "uint8",
    torch.bool: "bool",
}
_JAX_TO_TORCH = {v: k for k, v in _TORCH_TO_JAX.items()}


def import_jax():
    try:
        import jax  # noqa: F401
    except ImportError as e:  # JAX is an optional dependency
        raise ImportError("torch_tpu.pallas needs JAX: pip install 'torch_tpu[jax]' (or jax and jaxlib)") from e
    return jax


def jax_dtype(t: torch.dtype):
    import jax.numpy as jnp
    try:
        return jnp.dtype(_TORCH_TO_JAX[t])
    except KeyError:
        raise TypeError(f"torch_tpu.pallas: dtype {t} has no JAX equivalent") from None


def torch_dtype(d) -> torch.dtype:
    import numpy as np
    name = np.dtype(d).name
    try:
        return _JAX_TO_TORCH[name]
    except KeyError:
        raise TypeError(f"torch_tpu.pallas: JAX dtype {name} has no torch equivalent") from None


def specs(sig):
    """ShapeDtypeStructs for a signature ((shape, torch dtype), ...)."""
    jax = import_jax()
    return [jax.ShapeDtypeStruct(tuple(shape), jax_dtype(dt)) for shape, dt in sig]


def eval_shape(fn, sig):
    """The flat outputs of fn on `sig`: [(shape, torch dtype)], and whether fn returns a tuple/list."""
    jax = import_jax()
    with jax.enable_x64(True):
        out = jax.eval_shape(fn, *specs(sig))
    is_seq = isinstance(out, (tuple, list))
    leaves = jax.tree_util.tree_leaves(out)
    if not is_seq and len(leaves) != 1:
        raise TypeError("torch_tpu.pallas: a JAX function must return one array or a tuple of arrays")
    return [(tuple(o.shape), torch_dtype(o.dtype)) for o in leaves], is_seq


def _jax_platform() -> str:
    import torch_tpu._C as C
    name = C._platform_name().lower()
    if "tpu" in name:
        return "tpu"
    if "cuda" in name or "gpu" in name:
        return "cuda"
    if "rocm" in name:
        return "rocm"
    return "cpu"


def _version_tuple(v: str):
    return tuple(int(x) for x in v.split(".")) if v else ()


def target_version() -> str:
    """The StableHLO version to check exports against: the plugin's, or JAX's own if older / unknown."""
    from jax._src.lib.mlir.dialects import hlo
    import torch_tpu._C as C
    plugin, _ = C._plugin_stablehlo_versions()
    ours = hlo.get_current_version()
    if plugin and _version_tuple(plugin) < _version_tuple(ours):
        return plugin
    return ours


# torch.get_float32_matmul_precision() -> jax.default_matmul_precision: a JAX function's float32 dots are
# exported as exactly as torch's own matmuls at that setting (JAX's default would be one bf16 pass on TPU).
_MATMUL_PRECISION = {"highest": "highest", "high": "high", "medium": "default"}


def export_text(fn, sig, name: str, matmul_precision: str = "highest"):
    """Exports fn for `sig` and returns (entry symbol, functions text)."""
    jax = import_jax()
    from jax import export
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    with jax.enable_x64(True), jax.default_matmul_precision(_MATMUL_PRECISION[matmul_precision]):
        exp = export.export(jax.jit(fn, keep_unused=True), platforms=[_jax_platform()])(*specs(sig))
    text = exp.mlir_module()
    target = target_version()
    try:
        hlo.serialize_portable_artifact_str(text, target)
    except Exception as e:  # noqa: BLE001 - the MLIR binding raises a plain Exception/ValueError
        raise RuntimeError(
            f"{name}: the JAX function uses StableHLO features newer than version {target}, the newest the "
            f"PJRT plugin's compiler reads; use an older jax/jaxlib or a newer plugin ({e})") from None
    with _lock:
        prefix = f"tpu_jax{next(_counter)}_"
    with jmlir.make_ir_context():
        module = ir.Module.parse(text)
        funcs, entry = [], None
        for op in list(module.body.operations):
            opname = op.operation.name
            if opname != "func.func":
                if opname.startswith("sdy."):  # sharding metadata: meaningless for one device
                    continue
                raise RuntimeError(f"{name}: the exported module holds a top-level {opname}, which torch_tpu "
                                   "cannot inline")
            funcs.append(op)
        for op in funcs:
            old = ir.StringAttr(op.attributes["sym_name"]).value
            new = prefix + old
            ir.SymbolTable.replace_all_symbol_uses(old, new, module.operation)
            op.attributes["sym_name"] = ir.StringAttr.get(new)
            op.attributes["sym_visibility"] = ir.StringAttr.get("private")
            for attr in ("arg_attrs", "res_attrs"):  # jax.result_info, mhlo.sharding, mhlo.layout_mode
                if attr in op.attributes:
                    del op.attributes[attr]
            if old == "main":
                entry = new
                n_in = len(ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value).inputs)
                if n_in != len(sig):  # e.g. a token or an effect argument that jax.export added
                    raise RuntimeError(f"{name}: the exported @main takes {n_in} arguments for {len(sig)} "
                                       "tensors; torch_tpu cannot call it")
        if entry is None:
            raise RuntimeError(f"{name}: the exported module has no @main")
        body = "\n".join(op.operation.get_asm(print_generic_op_form=True, enable_debug_info=False)
                         for op in funcs)
    return entry, body
