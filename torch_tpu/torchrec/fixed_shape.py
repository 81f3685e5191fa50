"""Fixed-shape TorchRec inputs on tpu: one set of programs per size bucket instead of one per batch.

A KeyedJaggedTensor's sizes (the ids per feature) change from batch to batch, and every op on them compiles once
per size. `pad_kjt` pads each feature's values, on the host, to a size bucket: the padding is one extra sample
per feature (stride B + 1) whose bag holds padding ids (0, weight 0), so samples 0..B-1 pool exactly what they
pooled before, for sum, mean and weighted pooling, and the extra sample's row is dropped (its gradient is zero).
Padding past the last offset is no alternative: `nn.EmbeddingBag(include_last_offset=True)` requires the last
offset to be the number of ids. `length_per_key` is set from the host's counts, so TorchRec reads no lengths back
from the device either.

`FixedShapeEmbeddingBagCollection` wraps an EmbeddingBagCollection on tpu: it takes the KeyedJaggedTensor on the
CPU (as a data loader makes it), pads it, uploads it and returns the KeyedTensor of the B real samples, so a model
(e.g. DLRM, whose sparse arch calls its EmbeddingBagCollection) runs unchanged around it.

Sharded collections (DistributedModelParallel's ShardedEmbeddingBagCollection) take the same wrapper. Table-wise
and column-wise shards see every id of their features, so the padded sizes fix their all-to-all splits too. A
row-wise table splits each feature's ids by row block (`block_bucketize_sparse_features`): how many land on each
rank depends on the data, so the padding is per row block instead (`row_blocks`): each block gets padding ids of
its own first row up to its bucket, and every rank receives the same number of ids every step.
"""
from typing import Callable, Dict, List, Optional, Union

import torch

from torchrec.sparse.jagged_tensor import KeyedJaggedTensor, KeyedTensor


def next_power_of_two(n: int) -> int:
    """The default bucket: the smallest power of two >= n (1 for n = 0)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def pad_kjt(kjt: KeyedJaggedTensor, bucket: Union[Callable[[int], int], List[int]] = next_power_of_two,
            row_blocks: Optional[Dict[str, List[int]]] = None) -> KeyedJaggedTensor:
    """`kjt` (on the CPU, stride B) with each feature's values padded to its bucket: a KeyedJaggedTensor of stride
    B + 1 whose last sample per feature holds the padding. `bucket`: a function from a feature's number of ids to
    its padded size, or one size per feature. `row_blocks`: for features of row-wise sharded tables, the first row
    of each shard's block (ascending); such a feature is padded block by block (a size per feature is split
    evenly over its blocks, a function applies to each block's count) with padding ids of each block's first row."""
    if kjt.values().device.type != "cpu":
        raise ValueError(f"pad_kjt: pad on the host, before the upload (got values on {kjt.values().device}): "
                         "padding on the device would itself compile once per size")
    if kjt.variable_stride_per_key():
        raise ValueError("pad_kjt: variable batch sizes per feature are not supported")
    keys, b = kjt.keys(), kjt.stride()
    counts = kjt.length_per_key()
    fixed = isinstance(bucket, (list, tuple))
    if fixed and len(bucket) != len(keys):
        raise ValueError(f"pad_kjt: {len(bucket)} bucket sizes for {len(keys)} features")
    row_blocks = row_blocks or {}
    values, weights, pads, sizes = [], [], [], []
    w = kjt.weights_or_none()
    for i, (key, v) in enumerate(zip(keys, kjt.values().split(counts))):
        starts = row_blocks.get(key, [0])
        # Ids per block (one block: the whole feature), then each block's bucket and its padding ids.
        block = torch.bucketize(v, torch.tensor(starts[1:], dtype=v.dtype), right=True)
        have = torch.bincount(block, minlength=len(starts)).tolist()
        want = [bucket[i] // len(starts)] * len(starts) if fixed else [bucket(c) for c in have]
        for start, c, s in zip(starts, have, want):
            if s < c:
                where = f" in its row block from {start}" if len(starts) > 1 else ""
                raise ValueError(f"pad_kjt: feature {key!r} has {c} ids{where}, more than its bucket of {s}")
        pad = torch.cat([v.new_full((s - c,), start) for start, c, s in zip(starts, have, want)])
        values += [v, pad]
        pads.append(len(pad))
        sizes.append(counts[i] + len(pad))
    lengths = kjt.lengths().view(len(keys), b)
    lengths = torch.cat([lengths, torch.tensor(pads, dtype=lengths.dtype).view(-1, 1)], 1).reshape(-1)
    if w is not None:
        for x, p in zip(w.split(counts), pads):
            weights += [x, x.new_zeros(p)]
    return KeyedJaggedTensor(keys=keys, values=torch.cat(values), weights=torch.cat(weights) if w is not None
                             else None, lengths=lengths, stride=b + 1, length_per_key=sizes)


def row_blocks(ebc: torch.nn.Module) -> Dict[str, List[int]]:
    """Per feature of a row-wise sharded table of `ebc` (a ShardedEmbeddingBagCollection or
    ShardedEmbeddingCollection), the first row of each shard's block; {} for an unsharded collection or one without
    row-wise tables."""
    plan = getattr(ebc, "module_sharding_plan", None)
    if not plan:
        return {}
    out = {}
    configs = getattr(ebc, "_embedding_bag_configs", None) or getattr(ebc, "_embedding_configs", [])
    for config in configs:
        sharding = plan.get(config.name)
        if sharding is None or sharding.sharding_type != "row_wise":
            continue
        starts = sorted({shard.shard_offsets[0] for shard in sharding.sharding_spec.shards})
        for feature in config.feature_names:
            out[feature] = starts
    return out


class FixedShapeEmbeddingBagCollection(torch.nn.Module):
    """`ebc` (on tpu) fed bucketed inputs: forward takes a CPU KeyedJaggedTensor of B samples, pads it with
    `pad_kjt`, uploads it and returns the KeyedTensor of the B samples."""

    def __init__(self, ebc: torch.nn.Module, bucket: Union[Callable[[int], int], List[int]] = next_power_of_two,
                 device: Optional[torch.device] = None):
        super().__init__()
        self.ebc = ebc
        self.bucket = bucket
        self.device = device  # None: the tables' device at each call (the wrapper may be moved after wrapping)
        self._row_blocks = None

    def forward(self, features: KeyedJaggedTensor) -> KeyedTensor:
        kt = self.ebc(self._padded(features))
        return KeyedTensor(keys=kt.keys(), length_per_key=kt.length_per_key(),
                           values=kt.values()[: features.stride()])

    # Host work, as a data loader's: under torch.compile it runs as is (not traced: its sizes depend on the data),
    # and the compiled graph receives the padded, fixed-size batch.
    @torch._dynamo.disable
    def _padded(self, features: KeyedJaggedTensor) -> KeyedJaggedTensor:
        device = self.device or next(self.ebc.parameters()).device
        if self._row_blocks is None:
            self._row_blocks = row_blocks(self.ebc)
        return pad_kjt(features, self.bucket, self._row_blocks).to(device, non_blocking=True)

    # What a model asks its EmbeddingBagCollection (DLRM: embedding_bag_configs()).
    def embedding_bag_configs(self):
        return self.ebc.embedding_bag_configs()

    def is_weighted(self) -> bool:
        return self.ebc.is_weighted()
