"""DLRM training throughput on tpu (unsharded TorchRec, eager Strict and Fused) against CPU TorchRec in the same run.

The model is torchrec.models.dlrm.DLRM (4 tables of 1000 rows x dim 16, one feature each, dense 13 -> [64, 16],
over [64, 1]); a batch is 32 samples with 0..7 ids per feature. On tpu the EmbeddingBagCollection is wrapped in
torch_tpu.torchrec.fixed_shape.FixedShapeEmbeddingBagCollection (each feature padded to a 256-id bucket on the
host) so every step runs the same programs; the KeyedJaggedTensors come from the CPU as a data loader makes them.
Each row: samples/s (median over the timed steps of forward, backward, SGD step, loss read back), the ratio to CPU,
and the programs compiled during the timed steps (new to the process after warm-up; 0 means every step reused the
warm-up's programs). CPU: the same model and batches with fbgemm's CPU kernels.
"""
import argparse
import copy
import statistics
import time

import torch

import torch_tpu  # noqa: F401
from torchrec.models.dlrm import DLRM
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from torch_tpu.torchrec.fixed_shape import FixedShapeEmbeddingBagCollection

TABLES, ROWS, DIM, DENSE, BATCH, MAX_IDS, BUCKET = 4, 1000, 16, 13, 32, 8, 256


def make_model():
    torch.manual_seed(0)
    tables = [EmbeddingBagConfig(name=f"t{i}", embedding_dim=DIM, num_embeddings=ROWS, feature_names=[f"f{i}"])
              for i in range(TABLES)]
    return DLRM(embedding_bag_collection=EmbeddingBagCollection(tables=tables, device=torch.device("cpu")),
                dense_in_features=DENSE, dense_arch_layer_sizes=[64, DIM], over_arch_layer_sizes=[64, 1])


def make_batches(n):
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(n):
        lengths = torch.randint(0, MAX_IDS, (TABLES * BATCH,), generator=g)
        values = torch.randint(0, ROWS, (int(lengths.sum()),), generator=g)
        kjt = KeyedJaggedTensor(keys=[f"f{i}" for i in range(TABLES)], values=values, lengths=lengths)
        out.append((torch.rand(BATCH, DENSE, generator=g), kjt, torch.randint(0, 2, (BATCH,), generator=g).float()))
    return out


def run(model, batches, device, warmup):
    """Seconds per step of each timed step, and the programs compiled during them (tpu)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    times, compiled_before = [], None
    for i, (dense, kjt, label) in enumerate(batches):
        if i == warmup and device == "tpu":
            torch.tpu.synchronize()
            compiled_before = torch.tpu.compile_cache_stats()["memory"]["misses"]
        t0 = time.perf_counter()
        logits = model(dense.to(device), kjt).squeeze(-1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, label.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    compiled = None
    if device == "tpu":
        compiled = torch.tpu.compile_cache_stats()["memory"]["misses"] - compiled_before
    return times, compiled


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    batches = make_batches(args.warmup + args.steps)
    base = make_model()
    cpu_times, _ = run(copy.deepcopy(base), batches, "cpu", args.warmup)
    cpu_rate = BATCH / statistics.median(cpu_times)
    print(f"platform: {torch.tpu.get_device_name()}; DLRM {TABLES} tables x {ROWS} rows x dim {DIM}, batch {BATCH}, "
          f"{args.warmup} warm-up + {args.steps} timed steps")
    print(f"{'run':<14}{'samples/s':>12}{'vs CPU':>9}{'compiled after warm-up':>25}")
    print(f"{'cpu torchrec':<14}{cpu_rate:>12.1f}{1.0:>9.2f}{'-':>25}")
    for mode in ["strict", "fused"]:
        torch_tpu.set_eager_mode(mode)
        model = copy.deepcopy(base)
        arch = model.sparse_arch
        arch.embedding_bag_collection = FixedShapeEmbeddingBagCollection(arch.embedding_bag_collection,
                                                                         [BUCKET] * TABLES)
        model.to("tpu")
        times, compiled = run(model, batches, "tpu", args.warmup)
        rate = BATCH / statistics.median(times)
        print(f"{'tpu ' + mode:<14}{rate:>12.1f}{rate / cpu_rate:>9.2f}{compiled:>25}")
    torch_tpu.set_eager_mode("strict")


if __name__ == "__main__":
    main()
