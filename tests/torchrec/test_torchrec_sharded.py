"""TorchRec's DistributedModelParallel on device tpu over tpu_dist: 2 processes (tests/torchrec/sharded_worker.py)
shard an EmbeddingBagCollection + EmbeddingCollection + dense model table-wise, row-wise and column-wise with the unfused_tpu compute
kernel, or as the planner chooses on "tpu"; forward and SGD / Adagrad steps must equal the unsharded model trained on the
whole batch in one process, and a torch.distributed.checkpoint (DCP) save loaded into a fresh sharded model must
give the trained model's outputs.

Skipped where torchrec is not installed (`make torchrec-deps`; `make test-torchrec` runs this folder).
"""
import os
import sys

import pytest
import torch

pytest.importorskip("fbgemm_gpu")
pytest.importorskip("torchrec")

import sharded_common as common  # noqa: E402
from dist_harness import ROOT, launch_commands  # noqa: E402

WORLD = 2
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sharded_worker.py")
TIMEOUT = 240  # seconds for both ranks; a run takes ~30 s on the 2-core CI machine


def _reference(dtype, device, optimizer, steps=common.STEPS):
    """Per-step outputs of the unsharded model on the whole batch (in `dtype` on `device`) and its outputs on the
    first batch after training. The sharded run averages its ranks' gradients: DDP the dense ones, and TorchRec's
    all-to-all backward the tables' (torchrec.distributed.comm_ops gradient division, on by default): the
    reference, whose loss is the sum of the ranks' losses, divides every gradient by the world size."""
    model = common.make_model(0, device="cpu")
    common.load_initial_weights(model, 0)
    model = model.to(device=device, dtype=dtype)
    opt = common.make_optimizer(model, optimizer)
    outputs = []
    batches = common.batches(WORLD, steps)
    for dense, kjt, seq, labels in batches:
        out = model(dense.to(device=device, dtype=dtype), kjt.to(device), seq.to(device))
        loss = common.loss_fn(out, labels.to(device=device, dtype=dtype))
        outputs.append(out.detach().cpu())
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.grad /= WORLD
        opt.step()
    dense, kjt, seq, _ = batches[0]
    with torch.no_grad():
        trained = model(dense.to(device=device, dtype=dtype), kjt.to(device), seq.to(device)).cpu()
    return outputs, trained


def _assert_within_float32_error(got, want32, exact, sl):
    """got (a rank's samples `sl` of the global batch) against exact (CPU float64): within 4x the larger error the
    unsharded float32 runs (want32: CPU and tpu) make on the global batch, plus 16 float32 roundings of the largest
    magnitude. tests/torchrec/test_torchrec_unsharded.py allows 4 roundings; sharding sums each bag in another
    order (row-wise: two ranks' partial sums added after the exchange, mean bags divided after it), which the
    unsharded runs do not share: measured up to ~10 roundings at the output (row-wise, forward of step 0)."""
    exact = exact.double()
    assert all(got.shape == w[sl].shape for w in want32) and got.dtype == torch.float32
    eps = torch.finfo(torch.float32).eps
    err32 = max((w.double() - exact).abs().max().item() for w in want32)
    tol = 4 * err32 + 16 * eps * exact.abs().max().item()
    torch.testing.assert_close(got.double(), exact[sl], atol=tol, rtol=0)


_REFERENCES = {}


def _references(optimizer, steps=common.STEPS):
    if (optimizer, steps) not in _REFERENCES:
        _REFERENCES[optimizer, steps] = {"exact": _reference(torch.float64, "cpu", optimizer, steps),
                                         "cpu32": _reference(torch.float32, "cpu", optimizer, steps),
                                         "tpu32": _reference(torch.float32, "tpu", optimizer, steps)}
    return _REFERENCES[optimizer, steps]


def _run(scenario, optimizer, mode, tmp_path, *extra):
    init = tmp_path / "store"
    cmds = [[sys.executable, WORKER, scenario, str(r), str(WORLD), str(init), str(tmp_path), optimizer, *extra]
            for r in range(WORLD)]
    launch_commands(cmds, mode, timeout=TIMEOUT, env={"SHARDED_WORKER_DUMP_AFTER": str(TIMEOUT - 20)})
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
@pytest.mark.parametrize("scenario,optimizer", [("table_wise", "sgd"), ("row_wise", "adagrad"),
                                                ("column_wise", "sgd"), ("planner", "adagrad")])
def test_dmp_matches_unsharded(scenario, optimizer, mode, tmp_path):
    if mode == "debug" and os.environ.get("TORCH_TPU_DIST_ALL_MODES", "0") in ("", "0"):
        pytest.skip("debug mode under TORCH_TPU_DIST_ALL_MODES=1 (as make test-dist): strict and fused always")
    _check(scenario, _references(optimizer), _run(scenario, optimizer, mode, tmp_path))


@pytest.mark.parametrize("scenario,optimizer", [("table_wise", "sgd"), ("row_wise", "adagrad"),
                                                ("column_wise", "sgd")])
def test_fixed_shape_dmp_compiles_nothing_after_warm_up(scenario, optimizer, tmp_path):
    """The same run with its inputs padded to fixed shapes (torch_tpu.torchrec.fixed_shape: FixedShapeEmbeddingBag
    Collection around the sharded bag collection, pad_kjt for the sequence features; row-wise tables padded per row
    block): the same values against the unsharded model, and no program new to a rank after the warm-up steps (DDP
    rebuilds its buckets after the first iterations; from step 4 on nothing), where unpadded inputs compile per batch."""
    records = _run(scenario, optimizer, "strict", tmp_path, "fixed")
    _check(scenario, _references(optimizer, common.FIXED_STEPS), records)
    for rec in records:
        assert len(rec["compiled"]) == common.FIXED_STEPS
        assert rec["compiled"][-1] == rec["compiled"][3], rec["compiled"]


def _check(scenario, reference, records):
    exact, _ = reference["exact"]
    cpu32, trained_cpu32 = reference["cpu32"]
    tpu32, trained_tpu32 = reference["tpu32"]
    b = common.GLOBAL_BATCH // WORLD
    for r, rec in enumerate(records):
        plan = rec["plan"]
        assert set(plan) == {t.name for t in common.TABLES + common.SEQ_TABLES}
        for name, (sharding_type, kernel, ranks, placements) in plan.items():
            assert kernel == "unfused_tpu", (name, kernel)
            if scenario != "planner":
                assert sharding_type == scenario, (name, sharding_type)
            assert sharding_type in ("table_wise", "row_wise", "column_wise")
            # Shards go on device tpu:(rank % LOCAL_WORLD_SIZE).
            assert all(p.endswith(f"tpu:{int(p.split('/')[0].split(':')[1]) % WORLD}") for p in placements), placements
        if scenario == "row_wise":
            assert all(len(ranks) == WORLD for _, _, ranks, _ in plan.values()), plan
        if scenario == "column_wise":  # t1 (32 columns) in two 16-column shards, one per rank
            assert len(plan["t1"][2]) == WORLD and len(plan["t1"][3]) == WORLD, plan
        # The optimizer sees every local shard (model.parameters()), and each got a gradient.
        assert all(has_grad for _, shape, has_grad in rec["params"] if shape != (0,)), rec["params"]
        for step, got in enumerate(rec["outputs"]):
            sl = slice(r * b, (r + 1) * b)
            _assert_within_float32_error(got, (cpu32[step], tpu32[step]), exact[step], sl)
        # DCP: the fresh model (another seed) differs until the checkpoint is loaded, then equals the trained one.
        assert not torch.equal(rec["fresh_before_load"], rec["trained"])
        torch.testing.assert_close(rec["after_load"], rec["trained"], rtol=0, atol=0)
        _, trained_exact = reference["exact"]
        sl = slice(r * b, (r + 1) * b)
        _assert_within_float32_error(rec["trained"], (trained_cpu32, trained_tpu32), trained_exact, sl)
    assert records[0]["plan"] == records[1]["plan"]
    held = {n for rec in records for n, shape, _ in rec["params"] if n.startswith("e") and shape != (0,)}
    assert held == ({f"ebc.embedding_bags.{t.name}.weight" for t in common.TABLES} |
                    {f"ec.embeddings.{t.name}.weight" for t in common.SEQ_TABLES})


def test_fused_kernel_names_unfused_tpu():
    # TorchRec's FUSED kernel (the planner's default choice without torch_tpu's sharders) stops with the fix.
    import torch_tpu  # noqa: F401
    from fbgemm_gpu.split_table_batched_embeddings_ops_common import EmbeddingLocation
    from fbgemm_gpu.split_table_batched_embeddings_ops_training import (ComputeDevice,
                                                                         SplitTableBatchedEmbeddingBagsCodegen)

    with pytest.raises(NotImplementedError, match="FUSED compute kernel .* compute kernel 'unfused_tpu'"):
        SplitTableBatchedEmbeddingBagsCodegen([(10, 16, EmbeddingLocation.DEVICE, ComputeDevice.CUDA)],
                                              device=torch.device("tpu"))
    # torchrec's kernel modules, as DistributedModelParallel builds them for a FUSED or DENSE plan.
    from torchrec.distributed.batched_embedding_kernel import BatchedDenseEmbeddingBag, BatchedFusedEmbeddingBag
    from torchrec.distributed.embedding_types import GroupedEmbeddingConfig
    from torchrec.modules.embedding_configs import DataType, PoolingType

    config = GroupedEmbeddingConfig(data_type=DataType.FP32, pooling=PoolingType.SUM, is_weighted=False,
                                    has_feature_processor=False, compute_kernel=None, embedding_tables=[])
    for cls, kernel in [(BatchedFusedEmbeddingBag, "FUSED"), (BatchedDenseEmbeddingBag, "DENSE")]:
        with pytest.raises(NotImplementedError, match=f"{cls.__name__} on tpu: TorchRec's {kernel} compute kernel"):
            cls(config, device=torch.device("tpu"))


def test_unfused_tpu_width_not_multiple_of_16_names_tables():
    # torchrec's pooled unfused_tpu tables take widths in multiples of 16: the error names the table and the fixes.
    import torch_tpu  # noqa: F401  (its import hook installs torch_tpu.torchrec.sharding with torchrec's kernels)
    from torchrec.distributed.batched_embedding_kernel import BatchedTPUEmbedding, BatchedTPUEmbeddingBag
    from torchrec.distributed.embedding_types import GroupedEmbeddingConfig, ShardedEmbeddingTable
    from torchrec.modules.embedding_configs import DataType, PoolingType

    tables = [ShardedEmbeddingTable(name=name, num_embeddings=10, embedding_dim=dim, feature_names=[f"f_{name}"],
                                    local_rows=10, local_cols=dim) for name, dim in [("wide", 16), ("narrow", 8)]]
    config = GroupedEmbeddingConfig(data_type=DataType.FP32, pooling=PoolingType.SUM, is_weighted=False,
                                    has_feature_processor=False, compute_kernel=None, embedding_tables=tables)
    with pytest.raises(ValueError, match=r"BatchedTPUEmbeddingBag on tpu: .* multiple of 16; the shards of 'narrow' "
                                         r"\(8 columns\) are not\. Pad .* unsharded EmbeddingBagCollection"):
        BatchedTPUEmbeddingBag(config, device=torch.device("tpu"))
    # The sequence kernel (EmbeddingCollection's) has no such limit.
    assert [w.shape[1] for w in BatchedTPUEmbedding(config, device=torch.device("tpu")).split_embedding_weights()] == [16, 8]


def test_tpu_sharders_offer_only_what_runs():
    import torch_tpu  # noqa: F401
    import torchrec.experimental.torch_tpu.pallas.ops  # noqa: F401
    from torch_tpu.torchrec.sharding import tpu_sharders

    for sharder in tpu_sharders():  # EmbeddingBagCollection's, EmbeddingCollection's
        assert sorted(sharder.sharding_types("tpu")) == ["column_wise", "row_wise", "table_wise"]
        for st in sharder.sharding_types("tpu"):
            assert sharder.compute_kernels(st, "tpu") == ["unfused_tpu"]
        assert "fused" in sharder.compute_kernels("table_wise", "cpu")  # other devices: torchrec's own choices
