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
"""
from typing import Callable, List, Optional, Union

import torch

from torchrec.sparse.jagged_tensor import KeyedJaggedTensor, KeyedTensor


def next_power_of_two(n: int) -> int:
    """The default bucket: the smallest power of two >= n (1 for n = 0)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def pad_kjt(kjt: KeyedJaggedTensor, bucket: Union[Callable[[int], int], List[int]] = next_power_of_two
            ) -> KeyedJaggedTensor:
    """`kjt` (on the CPU, stride B) with each feature's values padded to its bucket: a KeyedJaggedTensor of stride
    B + 1 whose last sample per feature holds the padding. `bucket`: a function from a feature's number of ids to
    its padded size, or one size per feature."""
    if kjt.values().device.type != "cpu":
        raise ValueError(f"pad_kjt: pad on the host, before the upload (got values on {kjt.values().device}): "
                         "padding on the device would itself compile once per size")
    if kjt.variable_stride_per_key():
        raise ValueError("pad_kjt: variable batch sizes per feature are not supported")
    keys, b = kjt.keys(), kjt.stride()
    counts = kjt.length_per_key()
    sizes = list(bucket) if isinstance(bucket, (list, tuple)) else [bucket(c) for c in counts]
    if len(sizes) != len(keys):
        raise ValueError(f"pad_kjt: {len(sizes)} bucket sizes for {len(keys)} features")
    for key, c, s in zip(keys, counts, sizes):
        if s < c:
            raise ValueError(f"pad_kjt: feature {key!r} has {c} ids, more than its bucket of {s}")
    pads = [s - c for c, s in zip(counts, sizes)]
    lengths = kjt.lengths().view(len(keys), b)
    lengths = torch.cat([lengths, torch.tensor(pads, dtype=lengths.dtype).view(-1, 1)], 1).reshape(-1)
    values, weights = [], []
    w = kjt.weights_or_none()
    for v, p in zip(kjt.values().split(counts), pads):
        values += [v, v.new_zeros(p)]
    if w is not None:
        for x, p in zip(w.split(counts), pads):
            weights += [x, x.new_zeros(p)]
    return KeyedJaggedTensor(keys=keys, values=torch.cat(values), weights=torch.cat(weights) if w is not None
                             else None, lengths=lengths, stride=b + 1, length_per_key=sizes)


class FixedShapeEmbeddingBagCollection(torch.nn.Module):
    """`ebc` (on tpu) fed bucketed inputs: forward takes a CPU KeyedJaggedTensor of B samples, pads it with
    `pad_kjt`, uploads it and returns the KeyedTensor of the B samples."""

    def __init__(self, ebc: torch.nn.Module, bucket: Union[Callable[[int], int], List[int]] = next_power_of_two,
                 device: Optional[torch.device] = None):
        super().__init__()
        self.ebc = ebc
        self.bucket = bucket
        self.device = device  # None: the tables' device at each call (the wrapper may be moved after wrapping)

    def forward(self, features: KeyedJaggedTensor) -> KeyedTensor:
        device = self.device or next(self.ebc.parameters()).device
        padded = pad_kjt(features, self.bucket).to(device, non_blocking=True)
        kt = self.ebc(padded)
        return KeyedTensor(keys=kt.keys(), length_per_key=kt.length_per_key(),
                           values=kt.values()[: features.stride()])

    # What a model asks its EmbeddingBagCollection (DLRM: embedding_bag_configs()).
    def embedding_bag_configs(self):
        return self.ebc.embedding_bag_configs()

    def is_weighted(self) -> bool:
        return self.ebc.is_weighted()
