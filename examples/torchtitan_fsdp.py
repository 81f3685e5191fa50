"""TorchTitan's debug Llama 3 trained with FSDP2 over tpu_dist on device "tpu" (2 processes).

    make examples-torchtitan     # installs requirements-examples-torchtitan.txt into build/torchtitan-deps
    PYTHONPATH=.:build/torchtitan-deps torchrun --standalone --nproc-per-node 2 examples/torchtitan_fsdp.py --steps 5

TorchTitan 0.3.0's own `llama3_debugmodel` config (6 layers, dim 256, vocab 2048, 6.2 M parameters)
and its Trainer: it picks the device type from torch (`_get_available_device_type()` finds the
PrivateUse1 module `torch.tpu`) and the backend from `Backend.default_device_backend_map["tpu"]`
(tpu_dist), and applies FSDP2 over both ranks. What this script changes, each for the reason given
where it is done (docs/distributed.md, Examples, lists them too):
- offline data: the debug tokenizer and the c4_test dataset live in TorchTitan's repository, not in
  its wheel; a synthetic tokenizer and a dataloader of random token sequences (fixed seed, one
  stream per data-parallel rank) replace them through its public Configurable API;
- FlexAttention -> SDPA (Inductor has no tpu backend), parallelism.spmd_backend = "partial_dtensor"
  (the default "spmd_types" path refuses plain parameters in fully_shard: "all parameters must be
  DTensors on the full SPMD mesh"); the model keeps TorchTitan's ComplexRoPE (a complex64 buffer);
- a shim for `torch.distributed.set_timeout`, which TorchTitan 0.3.0 calls and torch 2.13 lacks.
It prints each rank's losses and gradient norms and exits non-zero unless the loss decreases and
every gradient norm is a sane value.
"""
import argparse
import math
import os
import sys
import tempfile
from dataclasses import dataclass

import torch
from torch.utils.data import IterableDataset

from torchtitan.components.dataloader import ParallelAwareDataloader
from torchtitan.components.tokenizer import BaseTokenizer
from torchtitan.models.common.attention import FlexAttention, ScaledDotProductAttention
from torchtitan.models.llama3.config_registry import llama3_debugmodel
from torchtitan.tools.logging import init_logger

VOCAB = 2048  # the debug model's vocabulary


def replace_configs(root, config_cls, make):
    """Swaps every nested `config_cls` config under `root` (TorchTitan's Config.traverse API)."""
    for _, old, parent, attr in list(root.traverse(config_cls)):
        if isinstance(attr, int):
            parent[attr] = make(old)
        else:
            setattr(parent, attr, make(old))


def shim_set_timeout():
    """TorchTitan 0.3.0 calls `torch.distributed.set_timeout(timeout, group)` after the first step,
    a function newer than the torch installed here (2.13 has only `ProcessGroup.set_timeout`)."""
    if not hasattr(torch.distributed, "set_timeout"):
        def set_timeout(timeout, group=None):
            (group or torch.distributed.distributed_c10d._get_default_group()).set_timeout(timeout)
        torch.distributed.set_timeout = set_timeout


class SyntheticTokenizer(BaseTokenizer):
    """Stands in for the debug tokenizer (tests/assets/tokenizer in TorchTitan's repository)."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseTokenizer.Config):
        pass

    def __init__(self, config, tokenizer_path=None, **kwargs):
        super().__init__()
        self.eos_id = VOCAB - 1

    def encode(self, text, *args, **kwargs):
        return [b % VOCAB for b in text.encode()]

    def decode(self, ids, *args, **kwargs):
        return " ".join(map(str, ids))

    def get_vocab_size(self):
        return VOCAB


class RandomTokens(IterableDataset):
    def __init__(self, seq_len, seed):
        self.seq_len, self.seed = seq_len, seed

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed)
        while True:
            tokens = torch.randint(0, VOCAB, (self.seq_len + 1,), generator=g)
            # No "positions": one document per sequence, so RoPE's default positions 0..seq_len-1 are
            # the same (and block-causal attention is causal, see FlexAttention below).
            yield {"input": tokens[:-1]}, tokens[1:]


class SyntheticDataLoader(ParallelAwareDataloader):
    """Stands in for the c4_test dataset: random tokens, one stream per data-parallel rank."""

    @dataclass(kw_only=True, slots=True)
    class Config(ParallelAwareDataloader.Config):
        seed: int = 0

    def __init__(self, config, *, dp_world_size, dp_rank, tokenizer, seq_len, local_batch_size,
                 snapshot_every_n_steps=None, **kwargs):
        super().__init__(RandomTokens(seq_len, config.seed + dp_rank), dp_rank=dp_rank,
                         dp_world_size=dp_world_size, batch_size=local_batch_size,
                         num_workers=0, snapshot_every_n_steps=snapshot_every_n_steps)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch", type=int, default=2, help="local batch size per rank")
    args = parser.parse_args()

    init_logger()
    shim_set_timeout()
    config = llama3_debugmodel()
    config.tokenizer = SyntheticTokenizer.Config()
    config.dataloader = SyntheticDataLoader.Config()
    config.training.steps = args.steps
    config.training.seq_len = args.seq_len
    config.training.local_batch_size = args.batch
    # FlexAttention (block-causal masks from per-document positions) runs flex_attention under
    # torch.compile with Inductor, which has no tpu backend; with one document per sequence
    # block-causal is causal, which F.scaled_dot_product_attention(is_causal=True) computes.
    replace_configs(config.model_spec.model, FlexAttention.Config, lambda _: ScaledDotProductAttention.Config())
    config.validator.enable = False
    # The default "spmd_types" path fails in fully_shard ("When dp_mesh_dims is provided, all
    # parameters must be DTensors on the full SPMD mesh"); "partial_dtensor" is plain FSDP2.
    config.parallelism.spmd_backend = "partial_dtensor"
    config.metrics.log_freq = 1
    config.debug.seed = 0  # the same initial model and losses every run
    config.dump_folder = tempfile.mkdtemp(prefix="torchtitan-tpu-")

    trainer = config.build()
    losses, grad_norms = [], []
    log = trainer.metrics_processor.log

    def record(step, global_avg_loss, global_max_loss, grad_norm, **kwargs):
        losses.append(float(global_avg_loss))
        grad_norms.append(float(grad_norm))
        return log(step, global_avg_loss, global_max_loss, grad_norm, **kwargs)
    trainer.metrics_processor.log = record
    trainer.train()
    trainer.close()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    rank = os.environ.get("RANK")
    print(f"rank {rank}: torchtitan_fsdp losses " + " ".join(f"{v:.4f}" for v in losses))
    print(f"rank {rank}: torchtitan_fsdp grad norms " + " ".join(f"{v:.4g}" for v in grad_norms))
    problems = []
    if len(losses) != args.steps or not losses[-1] < losses[0]:
        problems.append("expected one loss per step, decreasing from the first to the last")
    if not all(math.isfinite(v) and v < 100 for v in grad_norms):
        # The gradient norm of this model stays near 0.73 (measured); anything else is a wrong value.
        problems.append("a gradient norm is wrong (see docs/distributed.md, Examples)")
    if problems:
        print(f"rank {rank}: FAILED: " + "; ".join(problems))
        return 1
    print(f"rank {rank}: torchtitan_fsdp ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
