"""Everything torch.compile needs to know about tpu, registered once torch._dynamo is
imported (see __init__.py for why not earlier)."""
import torch

_done = False


def register_all() -> None:
    global _done
    if _done:
        return
    _done = True
    from torch._dynamo import device_interface
    from torch._dynamo.backends import registry

    from .. import _import_hooks
    from . import backend
    from .device_interface import TpuInterface

    registry.register_backend(compiler_fn=backend.tpu_backend, name="tpu")
    # init_device_reg() registers torch's own TpuInterface (for Google's TorchTPU) the
    # first time any interface is asked for: let it run first, then replace that entry.
    device_interface.get_registered_device_interfaces()
    device_interface.register_interface_for_device("tpu", TpuInterface)
    # torch.compile(fn) with no backend: the documented hook for the default choice.
    # Graphs that touch no tpu tensor still go to inductor (backend.default_backend).
    if registry.get_default_backend() == "inductor":
        registry.set_default_backend(backend.default_backend)
    _configure_logging()
    _make_tpu_optimizers_capturable()
    _shape_grouped_mm_of_any_float_dtype()
    # backend="inductor" named explicitly: refuse tpu graphs with a clear error (below).
    import sys
    if "torch._inductor.codegen.common" in sys.modules:
        register_inductor_refusal()
    else:
        _import_hooks.after_import("torch._inductor.codegen.common", register_inductor_refusal)


def _configure_logging() -> None:
    """TORCH_TPU_LOG=recompile (or all): Dynamo's recompile log, which names the guard that
    failed (`tensor 'x' size mismatch at index 0. expected 4, actual 5`). An explicit
    TORCH_LOGS wins: torch._logging.set_logs would replace it."""
    import os
    flags = os.environ.get("TORCH_TPU_LOG", "")
    if ("recompile" in flags or "all" in flags) and not os.environ.get("TORCH_LOGS"):
        torch._logging.set_logs(recompiles=True)


def _make_tpu_optimizers_capturable() -> None:
    """Dynamo traces optimizer.step with its hyperparameter math on device ("capturable",
    step counters as device tensors) when the parameters are on cuda/xpu; it asks only
    those two. The same holds on tpu, and it is what lets the compiled step replay:
    with CPU step counters every step's bias corrections would be new host operands.
    Before Dynamo's own check, a group whose parameters are all on tpu and have no state
    yet is marked capturable, exactly as Dynamo marks a cuda group."""
    from torch._dynamo.variables.optimizer import OptimizerVariable

    original = OptimizerVariable._set_capturable
    if getattr(original, "_tpu", False):
        return

    def set_capturable(self, tx):
        opt = self.value
        for group in opt.param_groups:
            params = group.get("params", [])
            if ("capturable" in group and params and all(p.device.type == "tpu" for p in params)
                    and not any(p in opt.state for p in params)):
                group["capturable"] = True
        return original(self, tx)

    set_capturable._tpu = True
    OptimizerVariable._set_capturable = set_capturable


def _shape_grouped_mm_of_any_float_dtype() -> None:
    """torch's fake `_grouped_mm` (the meta that Dynamo traces with) demands bfloat16, cuda's limit;
    tpu runs it in every float dtype, and transformers calls it under torch.compile on tpu whatever
    the dtype (integrations/moe.py `_can_use_grouped_mm`). A tpu call is shaped by torch's own meta on
    bfloat16 stand-ins, then given its real dtype; any other call falls through to torch's meta.
    FakeTensorMode has no public per-device hook: this uses its op-implementation registry."""
    from torch._subclasses import fake_impls

    op = torch.ops.aten._grouped_mm.default

    def shape(mode, func, mat_a, mat_b, offs=None, bias=None, out_dtype=None):
        if mat_a.device.type != "tpu" or mat_a.dtype == mat_b.dtype == torch.bfloat16 or mat_a.dtype != mat_b.dtype:
            return NotImplemented
        half = torch.bfloat16
        out = func(mat_a.to(half), mat_b.to(half), offs, None if bias is None else bias.to(half), None)
        return out.to(out_dtype or mat_a.dtype)

    fake_impls.op_implementations_checks.append((lambda func: func is op, shape))


def _inductor_error() -> RuntimeError:
    return RuntimeError(
        "torch.compile: backend 'inductor' cannot compile graphs on device tpu (its tpu path "
        "generates Pallas kernels through JAX). Use torch.compile(fn, backend=\"tpu\"), or "
        "torch.compile(fn) with no backend, which picks \"tpu\" for tpu graphs.")


def register_inductor_refusal(module=None) -> None:
    """Inductor picks code generators per device (register_backend_for_device) and
    registers its Pallas one for "tpu" only when none is registered; ours refuses."""
    from torch._inductor.codegen import common

    if common.get_scheduling_for_device("tpu") is not None:
        return

    def refuse_scheduling(*args, **kwargs):
        raise _inductor_error()

    class RefusingWrapper:
        supports_caching = False

        @staticmethod
        def create(*args, **kwargs):
            raise _inductor_error()

    common.register_backend_for_device("tpu", refuse_scheduling, RefusingWrapper)
