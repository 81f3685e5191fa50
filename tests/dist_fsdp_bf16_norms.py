"""FSDP2 with bfloat16 MixedPrecisionPolicy + clip_grad_norm_ over tpu_dist, as the TorchTitan example
trains: every step's gradient norm must be finite and small (on CPU over gloo they stay below 0.02).
It once reported inf / nan / 1e11 norms on some steps: the host transport handed pooled host buffers over
zero-copy as device buffers and reused them while a program could still read them (HostStaging now
copies). Run by tests/test_dist_staging.py; by hand:

    torchrun --standalone --nproc-per-node 2 tests/dist_fsdp_bf16_norms.py
    DEV=cpu torchrun --standalone --nproc-per-node 2 tests/dist_fsdp_bf16_norms.py  # the same over gloo

Exit status 1 when any step's norm is not finite or above 1e3.
"""
import math
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

DEV = os.environ.get("DEV", "tpu")
STEPS = int(os.environ.get("STEPS", "40"))


def main():
    rank = int(os.environ["RANK"])
    if DEV == "tpu":
        torch.tpu.set_device(rank)
    dist.init_process_group("tpu_dist" if DEV == "tpu" else "gloo")
    mesh = init_device_mesh(DEV, (2,))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(6)]).to(DEV)
    for layer in model:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    bad = 0
    for step in range(STEPS):
        x = torch.randn(8, 256, generator=torch.Generator().manual_seed(step)).to(DEV)
        loss = model(x).pow(2).mean()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        norm = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
        opt.step()
        opt.zero_grad()
        # As TorchTitan's metrics do: reduce the loss (mean and max) before reading the norm. Extra
        # host reads per step (e.g. printing loss.item()) make the bug disappear.
        mean, top = loss.detach().clone(), loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        dist.all_reduce(top, op=dist.ReduceOp.MAX)
        mean.item(), top.item()
        n = norm.item()
        if not math.isfinite(n) or n > 1e3:
            bad += 1
            print(f"rank {rank} step {step}: norm {n}", flush=True)
    print(f"rank {rank}: {bad} bad norms in {STEPS} steps ({DEV})", flush=True)
    dist.destroy_process_group()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
