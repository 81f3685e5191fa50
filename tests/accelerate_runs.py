"""Small CPU-or-tpu training runs through accelerate and transformers (used by tests/test_accelerate.py).

Run as a script it prints one JSON line with the runs named on the command line, so the same code runs in
a plain CPU process (TORCH_DEVICE_BACKEND_AUTOLOAD=0: torch_tpu never loads) and under `accelerate launch`.

usage: accelerate_runs.py OUT_DIR [trainer_cpu] [accelerator_cpu] [accelerator]
"""
import json
import sys

import torch

STEPS = 4
GPT2_TINY = dict(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def _data(n):
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 64, (12,), generator=g) for _ in range(n)]


def _model():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(**GPT2_TINY))


def trainer_cpu(out_dir):
    """TrainingArguments(use_cpu=True): losses, and the devices of the parameters and of every batch."""
    from transformers import Trainer, TrainingArguments
    seen = set()

    class Seen(Trainer):
        def compute_loss(self, model, inputs, *args, **kwargs):
            seen.update(v.device.type for v in inputs.values())
            seen.update(p.device.type for p in model.parameters())
            return super().compute_loss(model, inputs, *args, **kwargs)

    args = TrainingArguments(output_dir=out_dir, use_cpu=True, per_device_train_batch_size=4, max_steps=STEPS,
                             logging_steps=1, learning_rate=3e-3, seed=0, report_to=[], save_strategy="no",
                             disable_tqdm=True, dataloader_num_workers=0)
    data = [{"input_ids": ids, "labels": ids.clone()} for ids in _data(STEPS * 4)]
    trainer = Seen(model=_model(), args=args, train_dataset=data)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"losses": losses, "devices": sorted(seen), "args_device": str(args.device)}


def accelerator_run(cpu):
    """A plain accelerate loop; cpu=None leaves the choice to accelerate (and `accelerate launch --cpu`)."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    AcceleratorState._reset_state(reset_partial_state=True)  # a state made earlier in the process decides nothing
    acc = Accelerator() if cpu is None else Accelerator(cpu=cpu)
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = torch.utils.data.DataLoader(torch.stack(_data(STEPS * 4)), batch_size=4)
    model, opt, loader = acc.prepare(model, opt, loader)
    seen, losses = set(), []
    for ids in loader:
        seen.add(ids.device.type)
        seen.update(p.device.type for p in model.parameters())
        loss = model(input_ids=ids, labels=ids).loss
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return {"losses": losses, "devices": sorted(seen), "acc_device": str(acc.device)}


RUNS = {
    "trainer_cpu": trainer_cpu,
    "accelerator_cpu": lambda out_dir: accelerator_run(True),
    "accelerator": lambda out_dir: accelerator_run(None),
}

if __name__ == "__main__":
    import transformers
    transformers.logging.set_verbosity_error()
    out_dir, *names = sys.argv[1:]
    result = {name: RUNS[name](out_dir) for name in names}
    result["tpu_loaded"] = "torch_tpu" in sys.modules
    print("RESULT " + json.dumps(result))
