"""DLRM training throughput on tpu (unsharded TorchRec, eager Strict and Fused) against CPU TorchRec in the same run.

The model is torchrec.models.dlrm.DLRM (small: 4 tables of 1000 rows x dim 16, one feature each, dense 13 ->
[64, 16], over [64, 1], batches of 32 samples with 0..7 ids per feature; large: 8 tables of 10k rows x dim 64,
batches of 512). On tpu the EmbeddingBagCollection is wrapped in
torch_tpu.torchrec.fixed_shape.FixedShapeEmbeddingBagCollection (each feature padded to a bucket of batch x 8 ids
on the host) so every step runs the same programs; tpu runs Strict, Fused and torch.compile(model) (Strict
around it); the KeyedJaggedTensors come from the CPU as a data loader makes them.
Each row: samples/s (median over the timed steps of forward, backward, SGD step, loss read back), the ratio to CPU,
and the programs compiled during the timed steps (new to the process after warm-up; 0 means every step reused the
warm-up's programs). CPU: the same model and batches with fbgemm's CPU kernels.

`--sharded table_wise,row_wise,column_wise` adds 2-process DistributedModelParallel runs over tpu_dist (one child
process per rank, kernel unfused_tpu, the dense part under DDP, the sharded EmbeddingBagCollection behind the same
fixed-shape wrapper: row-wise tables padded per row block), each rank training on its own batch of BATCH samples:
samples/s counts both ranks' samples (2 x BATCH per step, the slower rank's median step), against the unsharded
tpu Strict run of the same process above; "compiled after warm-up" is the larger of the two ranks'. The sharded
runs take at least 4 warm-up steps (DDP rebuilds its buckets after the first iterations).

    python benchmarks/dlrm.py [--steps 20] [--size small|large] [--sharded table_wise,row_wise,column_wise]
"""
import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import torch_tpu  # noqa: F401
from torchrec.models.dlrm import DLRM
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from torch_tpu.torchrec.fixed_shape import FixedShapeEmbeddingBagCollection

# --size: (tables, rows, dim, dense features, batch, max ids per sample and feature); a feature's bucket holds
# a whole batch of the most ids. The sharded ranks read the size from DLRM_SIZE, which main() sets.
SIZES = {"small": (4, 1000, 16, 13, 32, 8), "large": (8, 10_000, 64, 13, 512, 8)}
TABLES, ROWS, DIM, DENSE, BATCH, MAX_IDS = SIZES[os.environ.get("DLRM_SIZE", "small")]
BUCKET = BATCH * MAX_IDS


def make_model(device="cpu"):
    torch.manual_seed(0)
    tables = [EmbeddingBagConfig(name=f"t{i}", embedding_dim=DIM, num_embeddings=ROWS, feature_names=[f"f{i}"])
              for i in range(TABLES)]
    return DLRM(embedding_bag_collection=EmbeddingBagCollection(tables=tables, device=torch.device(device)),
                dense_in_features=DENSE, dense_arch_layer_sizes=[64, DIM], over_arch_layer_sizes=[64, 1])


def make_batches(n, seed=1):
    g = torch.Generator().manual_seed(seed)
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


def sharded_rank(sharding, rank, world, init, warmup, steps, out):
    """One rank of a 2-process DistributedModelParallel run (a child of --sharded)."""
    import torch.distributed as dist
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology
    from torchrec.distributed.types import ShardingEnv

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    dist.init_process_group("tpu_dist", init_method=f"file://{init}", rank=rank, world_size=world)
    device = torch.device("tpu", rank)
    torch.tpu.set_device(device)
    model = make_model("meta")  # the sharder places and initialises each rank's shards
    constraints = {f"t{i}": ParameterConstraints(sharding_types=[sharding], compute_kernels=["unfused_tpu"])
                   for i in range(TABLES)}
    planner = EmbeddingShardingPlanner(topology=Topology(world_size=world, compute_device="tpu",
                                                         local_world_size=world), constraints=constraints)
    sharders = [EmbeddingBagCollectionSharder()]
    plan = planner.collective_plan(model, sharders, dist.GroupMember.WORLD)
    dmp = DistributedModelParallel(model, env=ShardingEnv.from_process_group(dist.GroupMember.WORLD), device=device,
                                   plan=plan, sharders=sharders)
    arch = dmp.module.sparse_arch
    # A row-wise feature's ids may all fall in one row block: its bucket holds a batch's worth in each block.
    bucket = BUCKET * (world if sharding == "row_wise" else 1)
    arch.embedding_bag_collection = FixedShapeEmbeddingBagCollection(arch.embedding_bag_collection,
                                                                     [bucket] * TABLES, device=device)
    # Each rank its own batches (another seed per rank), as a data-parallel loader would give them.
    batches = make_batches(warmup + steps, seed=1 + rank)
    times, compiled = run(dmp, batches, "tpu", warmup)
    with open(out, "w") as f:
        json.dump({"times": times, "compiled": compiled}, f)
    dist.barrier()
    dist.destroy_process_group()


def run_sharded(sharding, warmup, steps, world=2):
    """(samples/s over both ranks, the larger rank's programs compiled after warm-up)."""
    with tempfile.TemporaryDirectory(prefix="dlrm-sharded-") as tmp:
        init = os.path.join(tmp, "store")
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank-of", sharding, str(r), str(world),
                                   init, str(warmup), str(steps), os.path.join(tmp, f"rank{r}.json")])
                 for r in range(world)]
        try:
            codes = [p.wait(timeout=1200) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        if any(codes):
            raise SystemExit(f"sharded {sharding}: a rank failed ({codes})")
        ranks = []
        for r in range(world):
            with open(os.path.join(tmp, f"rank{r}.json")) as f:
                ranks.append(json.load(f))
    step = max(statistics.median(x["times"]) for x in ranks)
    return world * BATCH / step, max(x["compiled"] for x in ranks)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--sharded", default="", help="comma-separated sharding types for 2-process runs")
    parser.add_argument("--size", choices=sorted(SIZES), default=os.environ.get("DLRM_SIZE", "small"))
    parser.add_argument("--rank-of", nargs=7, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_of:
        sharding, rank, world, init, warmup, steps, out = args.rank_of
        return sharded_rank(sharding, int(rank), int(world), init, int(warmup), int(steps), out)
    if args.size != os.environ.get("DLRM_SIZE", "small"):  # the sizes are read at import: start again with them
        os.environ["DLRM_SIZE"] = args.size
        os.execv(sys.executable, [sys.executable] + sys.argv)
    batches = make_batches(args.warmup + args.steps)
    base = make_model()
    cpu_times, _ = run(copy.deepcopy(base), batches, "cpu", args.warmup)
    cpu_rate = BATCH / statistics.median(cpu_times)
    print(f"platform: {torch.tpu.get_device_name()}; DLRM {TABLES} tables x {ROWS} rows x dim {DIM}, batch {BATCH}, "
          f"{args.warmup} warm-up + {args.steps} timed steps")
    print(f"{'run':<14}{'samples/s':>12}{'vs CPU':>9}{'compiled after warm-up':>25}")
    print(f"{'cpu torchrec':<14}{cpu_rate:>12.1f}{1.0:>9.2f}{'-':>25}")
    rates = {}
    for mode in ["strict", "fused", "compiled"]:
        torch_tpu.set_eager_mode("strict" if mode == "compiled" else mode)
        model = copy.deepcopy(base)
        arch = model.sparse_arch
        arch.embedding_bag_collection = FixedShapeEmbeddingBagCollection(arch.embedding_bag_collection,
                                                                         [BUCKET] * TABLES)
        model.to("tpu")
        if mode == "compiled":  # torch.compile(model): the dense and over arch as graphs, SGD in strict
            model = torch.compile(model, backend="tpu")
        times, compiled = run(model, batches, "tpu", args.warmup)
        rate = BATCH / statistics.median(times)
        print(f"{'tpu ' + mode:<14}{rate:>12.1f}{rate / cpu_rate:>9.2f}{compiled:>25}", flush=True)
        rates[mode] = rate
    torch_tpu.set_eager_mode("strict")
    for sharding in [x for x in args.sharded.split(",") if x]:
        rate, compiled = run_sharded(sharding, max(args.warmup, 4), args.steps)
        print(f"{'2 x ' + sharding:<14}{rate:>12.1f}{rate / cpu_rate:>9.2f}{compiled:>25}"
              f"   ({rate / rates['strict']:.2f}x tpu strict)", flush=True)


if __name__ == "__main__":
    main()
