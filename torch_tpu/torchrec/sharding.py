"""What TorchRec's sharded path (DistributedModelParallel over tpu_dist, docs/torchrec.md "Sharding") needs on
device tpu beyond kernels; installed with torchrec's unfused_tpu ops (torch_tpu.torchrec.register_torchrec_kernels).

- `ShardedTensor.device` on a rank that holds no shard of a table (table-wise sharding: the table lives on the
  other rank) asks `torch.cuda.current_device()` for any process group but gloo's; for a tpu_dist group it is
  this process's tpu device. Registered through torch's `custom_sharded_op_impl`, so every other case stays
  torch's own.
"""
import torch

_installed = False


def _tpu_dist(pg) -> bool:
    try:
        return pg is not None and pg._get_backend_name() == "tpu_dist"
    except RuntimeError:
        return False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    from torch.distributed._shard.sharded_tensor import custom_sharded_op_impl
    from torch.distributed._shard.sharded_tensor._ops.tensor_ops import tensor_device

    @custom_sharded_op_impl(torch.Tensor.device.__get__)
    def _sharded_tensor_device(types, args=(), kwargs=None, pg=None):
        st = args[0]
        if not st._local_shards and _tpu_dist(pg):
            return torch.device("tpu", torch.tpu.current_device())
        return tensor_device(types, args, kwargs, pg)
