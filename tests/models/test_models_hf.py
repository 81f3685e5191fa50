"""Hugging Face model coverage: every architecture of model_zoo.ARCHS on tpu against CPU.

Each architecture is built on CPU from a tiny config (seed 0), copied to tpu with `.to("tpu")`, and run:
forward (its logits), loss, gradients (loss.backward()) and one AdamW step; decoder LMs also generate, greedy
and sampled. The reference is the same CPU model in float64: a tpu result passes when every element is within
(rtol, atol) = (1e-5, 1e-5) of float64 plus 4x the largest error CPU float32 makes on that tensor (the
OpInfo harness's `_as_accurate_as_cpu` rule: XLA sums in another order than CPU, and CPU's own error is the
scale of what float32 achieves on that input). The AdamW step is checked on tpu's own gradients (CPU float32
and float64 AdamW applied to them), so it tests the optimizer, not the gradients twice.

Greedy tokens must equal CPU's, except at a near tie: where they first differ, the float64 model must rate
the two tokens within the forward tolerance of each other. tpu's random stream differs from CPU's by design
(tests/test_random.py), so sampled tokens are checked for validity and for reproducibility under one seed.

`make test` runs the entries marked `quick` (about one per family); `make test-models` (TORCH_TPU_MODELS=all)
runs all and writes docs/model_coverage.md from the stage results recorded in model_zoo.RESULTS.
"""
import contextlib
import copy
import functools
import warnings

import pytest
import torch
import transformers

import model_zoo
from conftest import nonfinite_ok
from model_zoo import ARCHS, BY_NAME, VOCAB, make_inputs

transformers.logging.set_verbosity_error()

RTOL, ATOL = 1e-5, 1e-5
CPU_ERROR_FACTOR = 4
LR = 1e-3
NEW_TOKENS = 4
STAGES = ("forward", "loss", "backward", "adamw", "generate")


def _float64(v):
    return v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v


def _on(inputs, device):
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}


def _float64_model(model):
    m = copy.deepcopy(model).double()
    if type(m)._can_set_experts_implementation():
        # CPU's grouped_mm kernel has no float64; the eager experts loop is the same computation.
        m.set_experts_implementation("eager")
    else:
        # A model whose MoE is a sub-model (Nemotron-3.5 Transcribe's text model): each such sub-model.
        import transformers
        for sub in m.modules():
            if sub is not m and isinstance(sub, transformers.PreTrainedModel) \
                    and type(sub)._can_set_experts_implementation():
                sub.set_experts_implementation("eager")
    return m


def _loss(arch, out):
    if out.loss is not None:
        return out.loss
    # A model without a training loss (BLIP's retrieval head): the mean square of its compared output.
    return getattr(out, arch.output).float().square().mean()


def _train_forward(arch, model, inputs):
    """forward + loss + backward: (output, loss, {name: grad})."""
    out = model(**inputs)
    loss = _loss(arch, out)
    loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    return getattr(out, arch.output), loss, grads


def _adamw(model, grads):
    """One AdamW step on `model` with the given gradients (CPU tensors): its parameters after the step."""
    params = dict(model.named_parameters())
    for n, g in grads.items():
        params[n].grad = g.to(params[n].dtype)
    opt = torch.optim.AdamW([params[n] for n in grads], lr=LR, weight_decay=0.01)
    opt.step()
    return {n: params[n].detach() for n in grads}


def _generate(model, inputs, **kw):
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    with torch.no_grad():
        return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                              pad_token_id=0, **kw)


@functools.lru_cache(maxsize=None)
def reference(name):
    """The CPU float32 and float64 runs of one architecture (computed once, shared by the modes)."""
    arch = BY_NAME[name]
    torch.manual_seed(0)
    cfg = arch.config()
    initial = getattr(transformers, arch.model_class)(cfg).eval()
    inputs = make_inputs(arch, cfg)
    cpu = _train_forward(arch, copy.deepcopy(initial), inputs)
    exact = _train_forward(arch, _float64_model(initial), {k: _float64(v) for k, v in inputs.items()})
    greedy = _generate(initial, inputs, do_sample=False) if arch.generates else None
    return initial, inputs, cpu, exact, greedy


def compare(actual, cpu, exact):
    """actual, cpu, exact: equal-length lists of tensors. (ok, err, tol) at the worst element (largest
    err / tol), tol = rtol|exact| + atol + 4 x CPU float32's largest error on that tensor."""
    worst = (0.0, 0.0, 1.0)  # ratio, err, tol
    for a, e, r in zip(actual, cpu, exact):
        a, e, r = (t.detach().cpu().double() for t in (a, e, r))
        if a.shape != r.shape:
            return False, float("inf"), 0.0
        cpu_err = CPU_ERROR_FACTOR * (e - r).abs().max()
        tol = cpu_err + ATOL + RTOL * r.abs()
        err = (a - r).abs()
        err = torch.where(a.isnan() & r.isnan(), 0.0, torch.where(a.isnan() | r.isnan(), float("inf"), err))
        ratio = err / tol
        i = int(ratio.reshape(-1).argmax())
        if ratio.reshape(-1)[i].item() >= worst[0]:
            worst = (ratio.reshape(-1)[i].item(), err.reshape(-1)[i].item(), tol.reshape(-1)[i].item())
    return worst[0] <= 1.0, worst[1], worst[2]


class Stages:
    """Per-stage outcome of one (architecture, mode): recorded for docs/model_coverage.md, asserted at the end."""

    def __init__(self, name, mode):
        self.record = model_zoo.RESULTS.setdefault((name, mode), {})
        self.failures = []

    def check(self, stage, ok, err=None, tol=None, why=""):
        self.record[stage] = dict(ok=bool(ok), err=err, tol=tol, why=why)
        if not ok:
            detail = f"err {err:.3g} > tol {tol:.3g}" if err is not None else why
            self.failures.append(f"{stage}: {detail}")

    def error(self, stage, e):
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        self.record[stage] = dict(ok=False, err=None, tol=None, why=why)
        self.failures.append(f"{stage}: {why}")


def _check_greedy(stages, arch, initial, inputs, cpu_tokens, tpu_tokens, fwd_tol):
    if tpu_tokens.shape == cpu_tokens.shape and torch.equal(tpu_tokens, cpu_tokens):
        return True
    if tpu_tokens.shape != cpu_tokens.shape:
        return False
    # A near tie: at the first position where they differ, float64 must rate both tokens within tolerance.
    m64 = _float64_model(initial)
    for b in range(cpu_tokens.shape[0]):
        diff = (tpu_tokens[b] != cpu_tokens[b]).nonzero()
        if not len(diff):
            continue
        p = int(diff[0])
        with torch.no_grad():
            logits = m64(input_ids=tpu_tokens[b:b + 1, :p]).logits[0, -1]
        gap = (logits[tpu_tokens[b, p]] - logits[cpu_tokens[b, p]]).abs().item()
        if gap > fwd_tol:
            return False
    return True


@pytest.mark.parametrize("arch", [pytest.param(a, id=a.name, marks=[pytest.mark.xfail(reason=a.xfail, strict=True)]
                                               if a.xfail else []) for a in ARCHS])
def test_model(mode, arch):
    with nonfinite_ok() if arch.nonfinite else contextlib.nullcontext():
        _run(mode, arch)


def _run(mode, arch):
    stages = Stages(arch.name, mode)
    initial, inputs, (cpu_out, cpu_loss, cpu_grads), (ex_out, ex_loss, ex_grads), cpu_greedy = reference(arch.name)
    model = copy.deepcopy(initial).to("tpu")
    fwd_tol = 0.0
    try:
        out, loss, grads = _train_forward(arch, model, _on(inputs, "tpu"))
        ok, err, tol = compare([out], [cpu_out], [ex_out])
        fwd_tol = tol
        stages.check("forward", ok, err, tol)
        stages.check("loss", *compare([loss], [cpu_loss], [ex_loss]))
        grads = {n: g.cpu() for n, g in grads.items()}
        if set(grads) != set(cpu_grads):
            stages.check("backward", False, why=f"gradients for {sorted(set(grads) ^ set(cpu_grads))[:3]} differ")
        else:
            names = sorted(cpu_grads)
            stages.check("backward", *compare([grads[n] for n in names], [cpu_grads[n] for n in names],
                                              [ex_grads[n] for n in names]))
    except Exception as e:  # noqa: BLE001 (the stage's error is the result)
        stages.error("forward" if "forward" not in stages.record else "backward", e)
        grads = None
    if grads is not None:
        try:
            after = _adamw(model, {n: g.to("tpu") for n, g in grads.items()})
            after = {n: p.cpu() for n, p in after.items()}
            cpu_after = _adamw(copy.deepcopy(initial), grads)
            ex_after = _adamw(_float64_model(initial), grads)
            names = sorted(after)
            stages.check("adamw", *compare([after[n] for n in names], [cpu_after[n] for n in names],
                                           [ex_after[n] for n in names]))
        except Exception as e:  # noqa: BLE001
            stages.error("adamw", e)
    if arch.generates:
        try:
            gen_model = copy.deepcopy(initial).to("tpu")
            tpu_inputs = _on(inputs, "tpu")
            greedy = _generate(gen_model, tpu_inputs, do_sample=False).cpu()
            ok = _check_greedy(stages, arch, initial, inputs, cpu_greedy, greedy, fwd_tol)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.manual_seed(1234)
                s1 = _generate(gen_model, tpu_inputs, do_sample=True).cpu()
                torch.manual_seed(1234)
                s2 = _generate(gen_model, tpu_inputs, do_sample=True).cpu()
            prompt = inputs["input_ids"]
            valid = (s1.shape == (prompt.shape[0], prompt.shape[1] + NEW_TOKENS)
                     and torch.equal(s1[:, :prompt.shape[1]], prompt)
                     and bool(((s1 >= 0) & (s1 < VOCAB)).all()) and torch.equal(s1, s2))
            why = "" if ok else f"greedy tokens {greedy.tolist()} != CPU {cpu_greedy.tolist()}"
            if not valid:
                why += " sampled tokens invalid or not reproducible under one seed"
            stages.check("generate", ok and valid, why=why.strip())
        except Exception as e:  # noqa: BLE001
            stages.error("generate", e)
    assert not stages.failures, f"{arch.name} ({mode}): " + "; ".join(stages.failures)
