"""torch.amp.GradScaler("tpu"): _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_ with CUDA's
semantics, compared with the same ops and the same scaler loop on CPU."""
import pytest
import torch

from conftest import nonfinite_ok


def _grads(seed, bad=None):
    g = torch.Generator().manual_seed(seed)
    ts = [torch.randn(5, 3, generator=g), torch.randn(7, generator=g), torch.randn(2, 2, generator=g).half()]
    if bad is not None:
        ts[1][3] = bad
    return ts


@pytest.mark.parametrize("bad", [None, float("inf"), float("-inf"), float("nan")])
def test_unscale_and_found_inf(mode, bad):
    cpu = _grads(0, bad)
    tpu = [t.to("tpu") for t in cpu]
    inv = torch.tensor([0.125])
    found_c, found_t = torch.zeros(1), torch.zeros(1, device="tpu")
    torch._amp_foreach_non_finite_check_and_unscale_(cpu, found_c, inv)
    with nonfinite_ok():
        torch._amp_foreach_non_finite_check_and_unscale_(tpu, found_t, inv.to("tpu"))
    torch.testing.assert_close(found_t.cpu(), found_c, rtol=0, atol=0)
    for a, e in zip(tpu, cpu):
        torch.testing.assert_close(a.cpu(), e, rtol=0, atol=0, equal_nan=True)


def test_found_inf_stays_set(mode):
    found = torch.ones(1, device="tpu")
    grads = [t.to("tpu") for t in _grads(1)]
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.ones(1, device="tpu"))
    assert found.item() == 1.0


def test_update_scale_sequence(mode):
    # found_inf per step: growth every 3 clean steps, backoff (and tracker reset) on an inf
    pattern = [0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0]
    state = {d: (torch.full((1,), 1024.0, device=d), torch.zeros(1, dtype=torch.int32, device=d))
             for d in ("cpu", "tpu")}
    for f in pattern:
        for d, (scale, tracker) in state.items():
            torch._amp_update_scale_(scale, tracker, torch.full((1,), float(f), device=d), 2.0, 0.5, 3)
        torch.testing.assert_close(state["tpu"][0].cpu(), state["cpu"][0], rtol=0, atol=0)
        torch.testing.assert_close(state["tpu"][1].cpu(), state["cpu"][1], rtol=0, atol=0)


def test_update_scale_never_grows_to_inf(mode):
    for d in ("cpu", "tpu"):
        scale = torch.full((1,), 3e38, device=d)
        tracker = torch.zeros(1, dtype=torch.int32, device=d)
        with nonfinite_ok():
            torch._amp_update_scale_(scale, tracker, torch.zeros(1, device=d), 2.0, 0.5, 1)
        assert scale.item() == pytest.approx(3e38) and tracker.item() == 0


def test_bad_arguments():
    g = [torch.ones(3, device="tpu")]
    with pytest.raises(RuntimeError, match="found_inf must be a 1-element"):
        torch._amp_foreach_non_finite_check_and_unscale_(g, torch.zeros(2, device="tpu"), torch.ones(1, device="tpu"))
    with pytest.raises(RuntimeError, match="growth_tracker must be an int"):
        torch._amp_update_scale_(torch.ones(1, device="tpu"), torch.zeros(1, device="tpu"),
                                 torch.zeros(1, device="tpu"), 2.0, 0.5, 2)


def _scaler_run(device, steps=6, inf_at=(2,)):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 8, growth_interval=2)
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)) for _ in range(steps)]
    scales = []
    for i, (x, y) in enumerate(data):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        if i in inf_at:
            with nonfinite_ok():
                loss = loss * float("inf")  # an overflowing step: skipped, scale backs off
        with nonfinite_ok():
            scaler.scale(loss).backward()
            scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return [p.detach().cpu() for p in model.parameters()], scales


def test_grad_scaler_training_matches_cpu(mode):
    params_c, scales_c = _scaler_run("cpu")
    params_t, scales_t = _scaler_run("tpu")
    assert scales_t == scales_c  # 256, 512 (grown), 256 (inf), ...
    for a, e in zip(params_t, params_c):
        torch.testing.assert_close(a, e)


def test_torch_tpu_amp_defaults(mode):
    import torch_tpu.amp
    scaler = torch_tpu.amp.GradScaler(init_scale=4.0)
    assert scaler._device == "tpu" and scaler.get_scale() == 4.0
    a = torch.randn(4, 4)
    with torch_tpu.amp.autocast():
        out = a.to("tpu") @ a.to("tpu")
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), (a.bfloat16() @ a.bfloat16()), rtol=0, atol=0)
