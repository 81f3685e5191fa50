"""The Hugging Face stack on tpu: accelerate's Accelerator, transformers' Trainer and device_map.

transformers finds tpu through torch.accelerator; accelerate through torch_tpu's adapter of its default
device and get_max_memory (torch_tpu/_integrations.py; explicit CPU choices: tests/test_accelerate.py).
Every run is compared with the same run on CPU, within a few times CPU's own float32 error against float64.
"""
import contextlib
import functools
import os

import pytest
import torch

import accelerate  # noqa: E402  (requirements.txt installs both: a missing one is a failure, not a skip)
import transformers  # noqa: E402
from accelerate import Accelerator  # noqa: E402
from accelerate.state import AcceleratorState  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, TrainerCallback  # noqa: E402

transformers.logging.set_verbosity_error()


@contextlib.contextmanager
def accelerate_device(name):
    """accelerate's process-wide state, made afresh for `name` ("tpu" = what torch_tpu configured)."""
    old = os.environ.get("ACCELERATE_TORCH_DEVICE")
    if name != "tpu":
        os.environ["ACCELERATE_TORCH_DEVICE"] = name
    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("ACCELERATE_TORCH_DEVICE", None)
        else:
            os.environ["ACCELERATE_TORCH_DEVICE"] = old
        AcceleratorState._reset_state(reset_partial_state=True)


def assert_matches_cpu(tpu, cpu, exact, what):
    """tpu within 4x CPU float32's largest error against float64, plus a float32 ulp's worth (1e-6 of the
    largest value; transformers computes the loss in float32 even for a float64 model): rounding order differs."""
    tpu, cpu, exact = (torch.as_tensor(v, dtype=torch.float64) for v in (tpu, cpu, exact))
    tol = 4 * (cpu - exact).abs().max().item() + 1e-6 * max(1.0, exact.abs().max().item())
    err = (tpu - exact).abs().max().item()
    assert err <= tol, f"{what}: tpu differs from float64 by {err:.3g}, CPU float32 by {tol / 4:.3g}"


# ---- device selection ------------------------------------------------------------------------

def test_accelerator_and_training_args_pick_tpu(mode, tmp_path):
    from transformers.utils import is_torch_tpu_available

    assert is_torch_tpu_available()
    with accelerate_device("tpu"):
        acc = Accelerator()
        assert acc.device.type == "tpu"
        assert acc.state.distributed_type == accelerate.DistributedType.NO
        # Trainer's device (TrainingArguments) and its accelerator's agree.
        args = TrainingArguments(output_dir=str(tmp_path), report_to=[])
        assert args.device == torch.device("tpu", 0)


# ---- Accelerator.prepare ----------------------------------------------------------------------

def _accelerate_run(device, dtype=torch.float32, steps=5, mixed_precision=None):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 4)).to(dtype)
    g = torch.Generator().manual_seed(1)
    xs = torch.randn(steps * 4, 8, generator=g, dtype=dtype)
    ys = torch.randint(0, 4, (steps * 4,), generator=g)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs, ys), batch_size=4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    devices = set()
    model[0].register_forward_hook(lambda mod, args, out: devices.add(out.dtype))  # bfloat16 under autocast
    with accelerate_device(device):
        acc = Accelerator(mixed_precision=mixed_precision)
        model, opt, loader = acc.prepare(model, opt, loader)
        losses = []
        for x, y in loader:
            devices |= {x.device.type, y.device.type, next(model.parameters()).device.type}
            out = model(x)
            devices.add(out.dtype)  # float32: accelerate converts autocast outputs back
            loss = torch.nn.functional.cross_entropy(out, y)
            acc.backward(loss)
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        params = torch.cat([p.detach().reshape(-1).cpu().double() for p in model.parameters()])
    return losses, params, devices


def _accelerate_initial_params():
    return _accelerate_run("cpu", steps=0)[1]


@functools.lru_cache(maxsize=None)
def _accelerate_reference():
    return _accelerate_run("cpu"), _accelerate_run("cpu", torch.float64)


def test_accelerator_prepare_trains_like_cpu(mode):
    (cpu_losses, cpu_params, cpu_devices), (exact_losses, exact_params, _) = _accelerate_reference()
    losses, params, devices = _accelerate_run("tpu")
    assert cpu_devices == {"cpu", torch.float32}
    assert devices == {"tpu", torch.float32}  # batches and model
    assert len(losses) == 5
    assert_matches_cpu(losses, cpu_losses, exact_losses, "losses")
    assert_matches_cpu(params, cpu_params, exact_params, "parameters after 5 AdamW steps")
    assert (cpu_params - _accelerate_initial_params()).abs().max() > 1e-3  # the steps moved the weights


def test_accelerator_bf16_mixed_precision_trains_like_cpu(mode):
    # Accelerator(mixed_precision="bf16") runs the forward under torch.autocast("tpu", torch.bfloat16).
    cpu_losses, cpu_params, cpu_seen = _accelerate_run("cpu", mixed_precision="bf16")
    losses, params, seen = _accelerate_run("tpu", mixed_precision="bf16")
    assert seen == {"tpu", torch.float32, torch.bfloat16}
    assert cpu_seen == {"cpu", torch.float32, torch.bfloat16}
    # bfloat16 matmuls: CPU's and tpu's roundings differ by a bfloat16 ulp here and there.
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(cpu_losses), atol=0, rtol=2e-2)
    torch.testing.assert_close(params, cpu_params, atol=2e-2, rtol=2e-2)


# ---- transformers.Trainer ---------------------------------------------------------------------

GPT2_TINY = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # no dropout: CPU and tpu RNGs differ


class _Devices(TrainerCallback):
    def __init__(self):
        self.seen = set()

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.seen |= {p.device.type for p in model.parameters()}


class _BatchDevices(Trainer):
    def compute_loss(self, model, inputs, *args, **kwargs):
        self.batch_devices = getattr(self, "batch_devices", set()) | {v.device.type for v in inputs.values()}
        return super().compute_loss(model, inputs, *args, **kwargs)


def _trainer_run(device, tmp, dtype=torch.float32, steps=4, bf16=False):
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**GPT2_TINY)).to(dtype)
    devices = _Devices()
    # The attention projection's output dtype: bfloat16 under autocast.
    model.transformer.h[0].attn.c_attn.register_forward_hook(lambda mod, args, out: devices.seen.add(out.dtype))
    g = torch.Generator().manual_seed(1)
    data = []
    for _ in range(steps * 4):
        ids = torch.randint(0, 64, (12,), generator=g)
        data.append({"input_ids": ids, "labels": ids.clone()})
    args = TrainingArguments(output_dir=tmp, per_device_train_batch_size=4, max_steps=steps, logging_steps=1,
                             learning_rate=3e-3, seed=0, report_to=[], save_strategy="no", disable_tqdm=True,
                             use_cpu=device == "cpu", dataloader_num_workers=0, bf16=bf16)
    with accelerate_device(device):
        trainer = _BatchDevices(model=model, args=args, train_dataset=data, callbacks=[devices])
        trainer.train()
        assert trainer.args.optim == "adamw_torch_fused"  # transformers' default: aten::_fused_adamw_
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return losses, devices.seen | trainer.batch_devices


@functools.lru_cache(maxsize=None)
def _trainer_bf16_reference(tmp):
    return _trainer_run("cpu", tmp, bf16=True)


@functools.lru_cache(maxsize=None)
def _trainer_reference(tmp):
    return _trainer_run("cpu", tmp), _trainer_run("cpu", tmp, torch.float64)


def test_trainer_gpt2_trains_like_cpu(mode, tmp_path_factory):
    ref_dir = str(tmp_path_factory.getbasetemp() / "trainer_cpu")
    (cpu_losses, cpu_devices), (exact_losses, _) = _trainer_reference(ref_dir)
    losses, devices = _trainer_run("tpu", str(tmp_path_factory.mktemp("trainer_tpu")))
    assert cpu_devices == {"cpu", torch.float32}
    assert devices == {"tpu", torch.float32}  # the model's parameters and every batch
    assert len(losses) == 4
    assert_matches_cpu(losses, cpu_losses, exact_losses, "Trainer losses")
    assert losses[-1] < losses[0]


def test_trainer_bf16_trains_like_cpu(mode, tmp_path_factory):
    # TrainingArguments(bf16=True): the Trainer's accelerator runs the forward under torch.autocast("tpu").
    cpu_losses, cpu_devices = _trainer_bf16_reference(str(tmp_path_factory.getbasetemp() / "trainer_bf16_cpu"))
    losses, devices = _trainer_run("tpu", str(tmp_path_factory.mktemp("trainer_bf16_tpu")), bf16=True)
    assert cpu_devices == {"cpu", torch.bfloat16}
    assert devices == {"tpu", torch.bfloat16}
    # bfloat16 matmuls round differently on CPU and tpu (and CPU autocast keeps cross_entropy in float32).
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(cpu_losses), atol=0, rtol=4e-3)


# ---- from_pretrained(device_map=...) -----------------------------------------------------------

@pytest.fixture(scope="module")
def saved_gpt2(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt2_tiny")
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(**GPT2_TINY)).save_pretrained(path)
    return str(path)


def _logits(model, device):
    ids = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        return model(ids.to(device)).logits.cpu()


@pytest.mark.parametrize("kwargs", [
    dict(device_map="tpu"),
    dict(device_map="auto", max_memory={0: "1GB", "cpu": "1GB"}),
    dict(device_map="sequential", max_memory={0: "1GB", "cpu": "1GB"}),
], ids=["tpu", "auto+max_memory", "sequential+max_memory"])
def test_from_pretrained_device_map_places_on_tpu(mode, saved_gpt2, kwargs):
    cpu = GPT2LMHeadModel.from_pretrained(saved_gpt2)
    model = GPT2LMHeadModel.from_pretrained(saved_gpt2, **kwargs)
    assert {p.device.type for p in model.parameters()} == {"tpu"}
    assert model.device.type == "tpu"
    torch.testing.assert_close(_logits(model, "tpu"), _logits(cpu, "cpu"), atol=1e-5, rtol=1e-5)


def test_device_map_split_between_tpu_and_cpu(mode, saved_gpt2):
    # Too little tpu memory for the whole model (it needs 112 kB): the rest is offloaded to the CPU, as on
    # cuda: those weights wait on "meta" and accelerate's hooks bring them to tpu for each forward.
    cpu = GPT2LMHeadModel.from_pretrained(saved_gpt2)
    model = GPT2LMHeadModel.from_pretrained(saved_gpt2, device_map="sequential",
                                            max_memory={0: 100_000, "cpu": "1GB"})
    assert set(model.hf_device_map.values()) == {0, "cpu"}, model.hf_device_map
    assert {p.device.type for p in model.parameters()} == {"tpu", "meta"}
    assert model.device.type == "tpu"
    torch.testing.assert_close(_logits(model, model.device), _logits(cpu, "cpu"), atol=1e-5, rtol=1e-5)


def test_device_map_auto_without_max_memory(mode, saved_gpt2):
    # accelerate's get_max_memory sees tpu memory (torch_tpu/_integrations.py); more in tests/test_accelerate.py.
    cpu = GPT2LMHeadModel.from_pretrained(saved_gpt2)
    model = GPT2LMHeadModel.from_pretrained(saved_gpt2, device_map="auto")
    assert {p.device.type for p in model.parameters()} == {"tpu"}
    torch.testing.assert_close(_logits(model, model.device), _logits(cpu, "cpu"), atol=1e-5, rtol=1e-5)
