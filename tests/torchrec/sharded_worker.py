"""One rank of a 2-process DistributedModelParallel run over tpu_dist (tests/torchrec/test_torchrec_sharded.py).

usage: sharded_worker.py SCENARIO RANK WORLD INIT_FILE OUT_DIR OPTIMIZER
  SCENARIO: table_wise | row_wise | column_wise (every table sharded so, kernel unfused_tpu), or planner
  (the planner picks sharding types and kernels on "tpu", from torch_tpu.torchrec.sharding.tpu_sharders()).
  OPTIMIZER: sgd | adagrad.

Each rank builds the same EmbeddingBagCollection + EmbeddingCollection + dense model (seeded), shards it, runs forward and a few
optimizer steps on its slice of a global batch, saves the sharded model with torch.distributed.checkpoint,
loads that into a freshly initialized sharded model and runs it again. Rank r writes what it saw to
OUT_DIR/rank{r}.pt; the test compares it with the unsharded model run on the whole batch in one process.
"""
import faulthandler
import os
import sys

import torch
import torch.distributed as dist

import sharded_common as common  # the model, batches and loss the test's reference uses too


def main():
    # A hang shows where each rank waits (the test's bound kills the ranks a little later).
    faulthandler.dump_traceback_later(float(os.environ.get("SHARDED_WORKER_DUMP_AFTER", "240")), exit=True)
    scenario, rank, world, init, out_dir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    optimizer = sys.argv[6]
    # "fixed": the inputs padded to fixed shapes (torch_tpu.torchrec.fixed_shape), and more steps, so that the
    # steps after the warm-up can be seen to compile nothing.
    fixed = sys.argv[7:] == ["fixed"]
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    import torch_tpu  # noqa: F401
    import torch.distributed.checkpoint as dcp
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints, Topology
    from torchrec.distributed.embedding import EmbeddingCollectionSharder
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.types import ShardingEnv
    from torch_tpu.torchrec.sharding import tpu_sharders

    dist.init_process_group("tpu_dist", init_method=f"file://{init}", rank=rank, world_size=world)
    device = torch.device("tpu", rank % int(os.environ["LOCAL_WORLD_SIZE"]))
    torch.tpu.set_device(device)

    def sharded(seed):
        model = common.make_model(seed, device="meta")
        constraints = None
        if scenario != "planner":
            # min_partition 16: column-wise shards of 16 columns (unfused_tpu's multiple), so t1 spans both ranks.
            constraints = {t.name: ParameterConstraints(sharding_types=[scenario], compute_kernels=["unfused_tpu"],
                                                        min_partition=16)
                           for t in common.TABLES + common.SEQ_TABLES}
        planner = EmbeddingShardingPlanner(topology=Topology(world_size=world, compute_device="tpu",
                                                             local_world_size=world),
                                           constraints=constraints)
        sharders = tpu_sharders() if scenario == "planner" else [EmbeddingBagCollectionSharder(),
                                                                 EmbeddingCollectionSharder()]
        plan = planner.collective_plan(model, sharders, dist.GroupMember.WORLD)
        dmp = DistributedModelParallel(model, env=ShardingEnv.from_process_group(dist.GroupMember.WORLD),
                                       device=device, plan=plan, sharders=sharders, init_data_parallel=True)
        common.load_initial_weights(dmp, seed)
        return dmp, plan

    dmp, plan = sharded(seed=0)
    record = {"plan": {name: (ps.sharding_type, ps.compute_kernel, list(ps.ranks or []),
                              [str(s.placement) for s in getattr(ps.sharding_spec, "shards", [])])
                       for mod in plan.plan.values() for name, ps in mod.items()}}
    batches = common.batches(world, common.FIXED_STEPS if fixed else common.STEPS)
    opt = common.make_optimizer(dmp, optimizer)
    inputs = lambda k, sq: (k.to(device), sq.to(device))  # noqa: E731
    if fixed:
        from torch_tpu.torchrec.fixed_shape import FixedShapeEmbeddingBagCollection, pad_kjt, row_blocks

        # The bag collection behind the wrapper (it takes the batch's CPU KJT); the sequence features padded as
        # the wrapper pads (the model drops the padding sample's row).
        dmp.module.ebc = FixedShapeEmbeddingBagCollection(dmp.module.ebc, common.fixed_bucket(world, common.FEATURES),
                                                          device=device)
        seq_blocks = row_blocks(dmp.module.ec)
        inputs = lambda k, sq: (k, pad_kjt(sq, common.fixed_bucket(world, common.SEQ_FEATURES),  # noqa: E731
                                           seq_blocks).to(device))
    losses, outputs, compiled = [], [], []
    for step, batch in enumerate(batches):
        d, k, sq, y = common.rank_slice(*batch, rank, world)
        out = dmp(d.to(device), *inputs(k, sq))
        loss = common.loss_fn(out, y.to(device))
        outputs.append(out.detach().cpu())
        opt.zero_grad()
        loss.backward()
        if step == 0:
            # (Names as without the fixed-shape wrapper.)
            record["params"] = [(n.replace("ebc.ebc.", "ebc."), tuple(p.shape), p.grad is not None)
                                for n, p in dmp.named_parameters()]
        opt.step()
        losses.append(loss.detach().cpu())
        torch.tpu.synchronize()
        compiled.append(torch.tpu.compile_cache_stats()["memory"]["misses"])  # programs new to this process
    record["outputs"], record["losses"], record["compiled"] = outputs, losses, compiled

    if fixed:
        dmp.module.ebc = dmp.module.ebc.ebc  # unwrapped: the state dict's names, and device inputs, as before

    # DCP: save the trained sharded model, load it into a sharded model initialized with another seed.
    ckpt = os.path.join(out_dir, "ckpt")
    dcp.save(dmp.state_dict(), checkpoint_id=ckpt)
    dist.barrier()
    fresh, _ = sharded(seed=1)
    d, k, sq, _ = common.rank_slice(*batches[0], rank, world)
    with torch.no_grad():
        record["fresh_before_load"] = fresh(d.to(device), k.to(device), sq.to(device)).cpu()
        state = fresh.state_dict()
        dcp.load(state, checkpoint_id=ckpt)  # in place: the state dict's tensors are the model's (sharded) storage
        record["after_load"] = fresh(d.to(device), k.to(device), sq.to(device)).cpu()
        record["trained"] = dmp(d.to(device), k.to(device), sq.to(device)).cpu()
    torch.save(record, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
