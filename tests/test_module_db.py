"""PyTorch's own ModuleInfo database (torch.testing._internal.common_modules.module_db) on tpu against CPU.

Every module PyTorch tests its backends' nn modules with, built from each of its sample inputs on CPU (seed 0),
copied to tpu and run in train and eval mode: forward outputs, then backward with a fixed cotangent, comparing
the gradients of every floating input and every parameter. The reference is the same module and sample in
float64; tpu passes with the OpInfo harness's rule (`harness._as_accurate_as_cpu`): float32 within
(1e-5, 1e-5) of float64 plus 4x CPU float32's own largest error on that tensor, bfloat16 element by element at
least as close to float64 as CPU's bfloat16 element plus the bfloat16 tolerance.

`make test` runs float32 with at most QUICK_SAMPLES samples per module and mode; `make test-modules-full`
(TORCH_TPU_MODULE_DB=full) runs every sample in float32 and bfloat16 (see docs/op_coverage.md).
"""
import copy
import os
import sys

import pytest
import torch
from torch.testing._internal.common_modules import module_db

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "opinfo"))
import harness  # noqa: E402
from conftest import nonfinite_ok  # noqa: E402

FULL = os.environ.get("TORCH_TPU_MODULE_DB") == "full"
QUICK_SAMPLES = 1
DTYPES = [torch.float32, torch.bfloat16] if FULL else [torch.float32]


def _floats(tree, out):
    """The floating tensors of a nested output, in order."""
    if isinstance(tree, torch.Tensor):
        if tree.is_floating_point():
            out.append(tree)
    elif isinstance(tree, (tuple, list)):
        for t in tree:
            _floats(t, out)
    elif isinstance(tree, dict):
        for t in tree.values():
            _floats(t, out)
    return out


def _move(tree, device, dtype=None):
    """A copy of a sample's args on `device` (floating tensors cast to `dtype`), leaves requiring grad as given."""
    if isinstance(tree, torch.Tensor):
        t = tree.detach().to(device)
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        return t.requires_grad_(tree.requires_grad) if t.is_floating_point() else t
    if isinstance(tree, (tuple, list)):
        return type(tree)(_move(t, device, dtype) for t in tree)
    if isinstance(tree, dict):
        return {k: _move(v, device, dtype) for k, v in tree.items()}
    return tree


def _run(module, args, kwargs, cotangent_seed=0):
    """forward, then backward of sum(out * fixed cotangent): (outputs, input grads, parameter grads)."""
    outs = _floats(module(*args, **kwargs), [])
    inputs = [t for t in _floats([args, kwargs], []) if t.requires_grad]
    params = [p for p in module.parameters() if p.requires_grad]
    diff = [o for o in outs if o.requires_grad]
    grads = []
    if diff:
        g = torch.Generator().manual_seed(cotangent_seed)
        cots = [torch.randn(o.shape, generator=g, dtype=torch.float64).to(o.device, o.dtype) for o in diff]
        grads = torch.autograd.grad(diff, inputs + params, cots, allow_unused=True)
    return outs, list(grads[:len(inputs)]), list(grads[len(inputs):])


def _cases():
    for info in module_db:
        for training in (True, False):
            for dtype in DTYPES:
                yield pytest.param(info, training, dtype,
                                   id=f"{info.name}-{'train' if training else 'eval'}-{str(dtype)[6:]}")


def _build(info, sample, dtype):
    torch.manual_seed(0)
    c = sample.constructor_input
    m = info.module_cls(*c.args, **c.kwargs)
    if any(isinstance(p, torch.nn.parameter.UninitializedParameter) for p in m.parameters()):
        # Lazy modules draw their parameters at the first forward: draw them once, so every copy shares them.
        with torch.no_grad():
            fi = sample.forward_input
            m(*_move(fi.args, "cpu", torch.float32), **_move(fi.kwargs, "cpu", torch.float32))
    return m.to(dtype)


def _compare(actual, expected, ref, dtype):
    """Lists of tensors (None for a gradient that does not reach the input): same Nones, values per the rule."""
    if not len(actual) == len(expected) == len(ref):
        return False
    if any((a is None) != (e is None) for a, e in zip(actual, expected)):
        return False
    kept = [(a.cpu(), e, r) for a, e, r in zip(actual, expected, ref) if a is not None]
    if not kept:
        return True
    rtol, atol = harness.TOLERANCES[str(dtype)[6:]]
    a, e, r = (list(t) for t in zip(*kept))
    return harness._as_accurate_as_cpu(a, e, r, rtol, atol, elementwise=dtype != torch.float32)


@pytest.mark.parametrize("info,training,dtype", list(_cases()))
def test_module(mode, info, training, dtype):
    samples = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True, training=training)
    if not FULL:
        samples = samples[:QUICK_SAMPLES]
    for i, sample in enumerate(samples):
        fi = sample.forward_input
        module = _build(info, sample, dtype).train(training)
        exact = _run(copy.deepcopy(module).double(), _move(fi.args, "cpu", torch.float64),
                     _move(fi.kwargs, "cpu", torch.float64))
        cpu = _run(copy.deepcopy(module), _move(fi.args, "cpu"), _move(fi.kwargs, "cpu"))
        try:
            tpu = _run(copy.deepcopy(module).to("tpu"), _move(fi.args, "tpu"), _move(fi.kwargs, "tpu"))
        except RuntimeError as e:
            # Debug mode reports NaN/Inf made from finite inputs, also where the module masks it away itself
            # (KLDivLoss's xlogy of negative targets, PoissonNLLLoss's Stirling term at 0, as on CPU): then
            # compare the values with the check off.
            if "produced a non-finite value" not in str(e):
                raise
            with nonfinite_ok():
                tpu = _run(copy.deepcopy(module).to("tpu"), _move(fi.args, "tpu"), _move(fi.kwargs, "tpu"))
        for what, a, e, r in zip(("forward", "input grads", "parameter grads"), tpu, cpu, exact):
            assert _compare(a, e, r, dtype), f"{info.name} sample {i} ({sample.desc or 'default'}): {what} differ"
