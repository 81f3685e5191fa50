"""What TorchRec's sharded path (DistributedModelParallel over tpu_dist, docs/torchrec.md "Sharding") needs on
device tpu beyond kernels; installed with torchrec's unfused_tpu ops (torch_tpu.torchrec.register_torchrec_kernels).

- `ShardedTensor.device` on a rank that holds no shard of a table (table-wise sharding: the table lives on the
  other rank) asks `torch.cuda.current_device()` for any process group but gloo's; for a tpu_dist group it is
  this process's tpu device. Registered through torch's `custom_sharded_op_impl`, so every other case stays
  torch's own.
- torchrec's unfused_tpu kernels (`BatchedTPUEmbeddingBag`, and `BatchedTPUEmbedding` of EmbeddingCollection) do not list its tables' weights by table
  (`_param_per_table`, which torchrec 1.9.2's other kernels fill), so the sharded collection registers empty
  placeholders as `embedding_bags.<table>.weight`: `model.parameters()` misses the tables and an optimizer built
  from it never trains them. After each such kernel is built, its per-table weights (the parameters the lookups
  use) are listed there, as the DENSE kernel does; a group holding two shards of one table (column-wise on one
  rank) is left as torchrec made it.
- The FUSED and DENSE compute kernels raise a NotImplementedError naming unfused_tpu when built for tpu (below);
  unfused_tpu's ValueError for a table width not a multiple of 16 names the tables and what to do instead.
"""
import inspect

import torch

_installed = False


def _tpu_dist(pg) -> bool:
    """The group has a backend for tpu tensors (tpu_dist, under whichever name the group was created with)."""
    if pg is None:
        return False
    try:
        pg._get_backend(torch.device("tpu"))
        return True
    except RuntimeError:
        return False


# torchrec's pooled unfused_tpu tables (TPUEmbeddingBagUnfused) take only widths that are multiples of 16 (the
# TPU's lanes) and say only that; this names the tables and what to do.
_DIM_MESSAGE = ("{kernel} on tpu: TorchRec's unfused_tpu compute kernel needs each pooled table shard's "
                "embedding_dim to be a multiple of 16; the shards of {tables} are not. Pad those tables' embedding_dim "
                "to a multiple of 16 (column-wise sharding: shard widths that are), or keep them out of "
                "DistributedModelParallel: an unsharded EmbeddingBagCollection on tpu takes any embedding_dim")


def _list_tpu_kernel_params(cls) -> None:
    init = cls.__init__

    def __init__(self, config, *args, **kwargs):
        try:
            init(self, config, *args, **kwargs)
        except ValueError as e:
            if "multiple of 16" not in str(e):
                raise
            raise ValueError(_DIM_MESSAGE.format(kernel=cls.__name__, tables=", ".join(
                f"'{t.name}' ({t.local_cols} columns)" for t in config.embedding_tables if t.local_cols % 16))) from e
        if getattr(self, "_use_batched_lookup", False) or self._param_per_table:
            return
        names = [t.name for t in config.embedding_tables]
        if len(set(names)) == len(names):
            self._param_per_table = {name: m.weight for name, m in zip(names, self._emb_modules)}

    __init__.__wrapped__ = init
    cls.__init__ = __init__


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    import torchrec.distributed.batched_embedding_kernel as kernels

    for name in ("BatchedTPUEmbeddingBag", "BatchedTPUEmbedding"):  # pooled and sequence (EmbeddingCollection)
        if hasattr(kernels, name):  # else a torchrec without the unfused_tpu kernel
            _list_tpu_kernel_params(getattr(kernels, name))
    for name, (kernel, module) in _KERNEL_MODULES.items():
        if hasattr(kernels, name):
            _refuse_on_tpu(getattr(kernels, name), kernel, module)
    from torch.distributed._shard.sharded_tensor import custom_sharded_op_impl
    from torch.distributed._shard.sharded_tensor._ops.tensor_ops import tensor_device

    @custom_sharded_op_impl(torch.Tensor.device.__get__)
    def _sharded_tensor_device(types, args=(), kwargs=None, pg=None):
        st = args[0]
        if not st._local_shards and _tpu_dist(pg):
            return torch.device("tpu", torch.tpu.current_device())
        return tensor_device(types, args, kwargs, pg)


# ---- FUSED / DENSE compute kernels: a clear error -----------------------------------------------------------
# TorchRec's FUSED kernel (fbgemm's SplitTableBatchedEmbeddingBagsCodegen) and DENSE kernel (data-parallel tables,
# DenseTableBatchedEmbeddingBagsCodegen) run fbgemm's generated table-batched embedding code, which exists for
# CUDA/MTIA and the CPU only. torchrec's kernel modules for them (Batched{Fused,Dense}Embedding[Bag]) raise this
# when built for a tpu device (the DENSE one would otherwise fail asking torch.cuda for its device), and fbgemm's
# SplitTableBatchedEmbeddingBagsCodegen built directly on tpu raises it from the first fbgemm op it calls.
_FUSED_MESSAGE = ("{where} on tpu: TorchRec's {kernel} compute kernel (fbgemm's {module}) has no tpu "
                  "implementation; shard the tables with compute kernel 'unfused_tpu' (ParameterConstraints("
                  "compute_kernels=['unfused_tpu']), or the sharders of torch_tpu.torchrec.sharding.tpu_sharders(), "
                  "whose planner choices are unfused_tpu)")
_KERNEL_MODULES = {"BatchedFusedEmbeddingBag": ("FUSED", "SplitTableBatchedEmbeddingBagsCodegen"),
                   "BatchedFusedEmbedding": ("FUSED", "SplitTableBatchedEmbeddingCodegen"),
                   "BatchedDenseEmbeddingBag": ("DENSE", "DenseTableBatchedEmbeddingBagsCodegen"),
                   "BatchedDenseEmbedding": ("DENSE", "DenseTableBatchedEmbeddingBagsCodegen")}
_error_libs = []


def _refuse_on_tpu(cls, kernel, module) -> None:
    init = cls.__init__
    signature = inspect.signature(init)

    def __init__(self, *args, **kwargs):
        device = signature.bind(self, *args, **kwargs).arguments.get("device")
        if device is not None and torch.device(device).type == "tpu":
            raise NotImplementedError(_FUSED_MESSAGE.format(where=f"torchrec {cls.__name__}", kernel=kernel,
                                                            module=module))
        init(self, *args, **kwargs)

    __init__.__wrapped__ = init
    cls.__init__ = __init__


def install_fbgemm_errors() -> None:
    """Registers the raising tpu kernel of fbgemm's get_infos_metadata (idempotent); fbgemm_gpu must be imported."""
    if _error_libs:
        return
    lib = torch.library.Library("fbgemm", "IMPL")

    def raise_(*args, **kwargs):
        raise NotImplementedError(_FUSED_MESSAGE.format(where="fbgemm::get_infos_metadata", kernel="FUSED",
                                                        module="SplitTableBatchedEmbeddingBagsCodegen"))
    try:
        lib.impl("get_infos_metadata", raise_, "PrivateUse1")
    except RuntimeError:  # not defined by this fbgemm release: the kernel then fails as any op without a tpu kernel
        return
    _error_libs.append(lib)


# ---- sharders whose planner choices run on tpu -----------------------------------------------------------------
# The sharding types checked on tpu (tests/torchrec/test_torchrec_sharded.py).
TPU_SHARDING_TYPES = ("table_wise", "row_wise", "column_wise")
_sharder_classes = {}


def _tpu_sharder_class(base):
    """`base` (a torchrec sharder class) offering the planner, on "tpu", only what runs there: the unfused_tpu
    kernel and table-, row- and column-wise sharding (on other devices it is torchrec's own)."""
    if base not in _sharder_classes:
        from torchrec.distributed.embedding_types import EmbeddingComputeKernel

        def sharding_types(self, compute_device_type):
            types = base.sharding_types(self, compute_device_type)
            return [t for t in types if t in TPU_SHARDING_TYPES] if compute_device_type == "tpu" else types

        def compute_kernels(self, sharding_type, compute_device_type):
            kernels = base.compute_kernels(self, sharding_type, compute_device_type)
            if compute_device_type != "tpu":
                return kernels
            return [k for k in kernels if k == EmbeddingComputeKernel.UNFUSED_TPU.value]

        _sharder_classes[base] = type(f"Tpu{base.__name__}", (base,), {
            "sharding_types": sharding_types, "compute_kernels": compute_kernels, "__doc__": _tpu_sharder_class.__doc__})
    return _sharder_classes[base]


def tpu_sharders(**kwargs):
    """[EmbeddingBagCollection sharder, EmbeddingCollection sharder] for tpu (kwargs: torchrec's sharders'), for
    EmbeddingShardingPlanner.plan / collective_plan and DistributedModelParallel(sharders=...)."""
    from torchrec.distributed.embedding import EmbeddingCollectionSharder
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder

    return [_tpu_sharder_class(EmbeddingBagCollectionSharder)(**kwargs),
            _tpu_sharder_class(EmbeddingCollectionSharder)(**kwargs)]
