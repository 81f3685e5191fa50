"""torch.optim's fused kernels on tpu (Adam/AdamW/SGD with fused=True) against CPU's fused kernels.

transformers' Trainer defaults to optim="adamw_torch_fused", which calls aten::_fused_adamw_.
"""
import pytest
import torch

CONFIGS = [
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    (torch.optim.Adam, dict(lr=1e-2, weight_decay=0.1, amsgrad=True, maximize=True)),
    (torch.optim.Adam, dict(lr=torch.tensor(3e-3), betas=(0.8, 0.99))),  # tensor lr: the tensor_lr overload
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.5, dampening=0.1, maximize=True)),
    (torch.optim.SGD, dict(lr=0.1)),  # no momentum buffers
]


def _run(cls, kwargs, device, dtype, fused, steps=5):
    torch.manual_seed(0)
    params = [torch.randn(5, 3), torch.randn(7), torch.randn(())]
    grads = [[torch.randn_like(p) for p in params] for _ in range(steps)]
    q = [p.to(dtype).to(device).requires_grad_() for p in params]
    opt = cls(q, fused=fused, **kwargs)
    for step in grads:
        for p, g in zip(q, step):
            p.grad = g.to(dtype).to(device)
        opt.step()
    return [t.detach().cpu().double() for p in q
            for t in [p] + [v for k, v in sorted(opt.state[p].items()) if k != "step" and torch.is_tensor(v)]]


@pytest.mark.parametrize("cls,kwargs", CONFIGS, ids=lambda c: getattr(c, "__name__", None))
def test_fused_step_matches_cpu(mode, cls, kwargs):
    exact = _run(cls, kwargs, "cpu", torch.float64, fused=False)
    cpu = _run(cls, kwargs, "cpu", torch.float32, fused=True)
    tpu = _run(cls, kwargs, "tpu", torch.float32, fused=True)
    assert len(tpu) == len(exact)
    for t, c, e in zip(tpu, cpu, exact):
        # Within a few times CPU's own float32 error from float64 (rounding order differs).
        tol = 4 * (c - e).abs().max().item() + 1e-6
        torch.testing.assert_close(t, e, atol=tol, rtol=0)


def test_fused_adamw_bfloat16_params(mode):
    # Reduced-precision state computes in float32 and stores bfloat16, as CPU's fused kernel does.
    kwargs = dict(lr=1e-2, weight_decay=0.1)
    cpu = _run(torch.optim.AdamW, kwargs, "cpu", torch.bfloat16, fused=True)
    tpu = _run(torch.optim.AdamW, kwargs, "tpu", torch.bfloat16, fused=True)
    for t, c in zip(tpu, cpu):
        torch.testing.assert_close(t, c, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("found_inf", [0.0, 1.0])
@pytest.mark.parametrize("op", ["_fused_adamw_", "_fused_adam_", "_fused_sgd_"])
def test_grad_scale_and_found_inf(mode, op, found_inf):
    # The unscaled gradient is written back; found_inf == 1 leaves every tensor unchanged (AMP's skipped step).
    def run(device):
        torch.manual_seed(0)
        lists = [[torch.randn(4, 3).to(device), torch.randn(6).to(device)] for _ in range(5)]
        scale = torch.tensor(8.0).to(device)
        inf = torch.tensor([found_inf]).to(device)
        if op == "_fused_sgd_":
            params, grads, bufs = lists[:3]
            torch._fused_sgd_(params, grads, bufs, weight_decay=0.01, momentum=0.9, lr=0.1, dampening=0.0,
                              nesterov=False, maximize=False, is_first_step=False, grad_scale=scale, found_inf=inf)
            out = params + grads + bufs
        else:
            params, grads, m, v, vmax = lists
            vmax = [t.abs() for t in vmax]
            v = [t.abs() for t in v]
            steps = [torch.tensor(3.0).to(device) for _ in params]
            getattr(torch, op)(params, grads, m, v, vmax, steps, lr=1e-2, beta1=0.9, beta2=0.999,
                               weight_decay=0.1, eps=1e-8, amsgrad=True, maximize=False, grad_scale=scale,
                               found_inf=inf)
            out = params + grads + m + v + vmax
        return [t.cpu() for t in out]

    for t, c in zip(run("tpu"), run("cpu")):
        torch.testing.assert_close(t, c, atol=1e-6, rtol=1e-5)


def test_fused_adam_rejects_mismatched_lists(mode):
    p = [torch.zeros(3, device="tpu")]
    with pytest.raises(RuntimeError, match="_fused_adamw_"):
        torch._fused_adamw_(p, p, p, [], [], [], lr=1e-3, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8,
                            amsgrad=False, maximize=False)
