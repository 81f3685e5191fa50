"""The model, data and optimizer of the sharded TorchRec test, shared by its ranks (sharded_worker.py) and its
single-process reference (test_torchrec_sharded.py)."""
import torch
from torch import nn
from torchrec.modules.embedding_configs import EmbeddingBagConfig, EmbeddingConfig, PoolingType
from torchrec.modules.embedding_modules import EmbeddingBagCollection, EmbeddingCollection
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

# unfused_tpu needs embedding dims that are multiples of 16.
TABLES = [
    EmbeddingBagConfig(name="t0", embedding_dim=16, num_embeddings=100, feature_names=["f0"]),
    EmbeddingBagConfig(name="t1", embedding_dim=32, num_embeddings=120, feature_names=["f1", "f2"]),
    EmbeddingBagConfig(name="t2", embedding_dim=16, num_embeddings=64, feature_names=["f3"],
                       pooling=PoolingType.MEAN),
]
FEATURES = ["f0", "f1", "f2", "f3"]
# Sequence (unpooled) embeddings: an EmbeddingCollection; the model sums each sample's rows itself.
SEQ_TABLES = [
    EmbeddingConfig(name="e0", embedding_dim=16, num_embeddings=50, feature_names=["s0"]),
    EmbeddingConfig(name="e1", embedding_dim=16, num_embeddings=60, feature_names=["s1"]),
]
SEQ_FEATURES = ["s0", "s1"]
MAX_LEN = 4  # ids per sample and feature: 0..3
DENSE_IN = 8
GLOBAL_BATCH = 8
STEPS = 3
FIXED_STEPS = 7  # fixed-shape runs: DDP rebuilds its buckets after the first steps; 0 new programs from step 4 on
LR = 0.1


def _width():
    return sum(t.embedding_dim * len(t.feature_names) for t in TABLES + SEQ_TABLES)


class Model(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.ebc = EmbeddingBagCollection(tables=TABLES, device=torch.device(device))
        self.ec = EmbeddingCollection(tables=SEQ_TABLES, device=torch.device(device))
        self.dense = nn.Linear(DENSE_IN, _width(), device=device)
        self.over = nn.Linear(_width(), 1, device=device)

    def forward(self, dense, kjt, seq):
        # By feature name: a sharded collection's KeyedTensor orders its keys by shard, not by the config.
        per_feature = self.ebc(kjt).to_dict()
        sequences = self.ec(seq)
        # [: batch]: fixed-shape inputs (pad_kjt) carry one padding sample past the batch.
        summed = [sequences[f].to_padded_dense(MAX_LEN)[: dense.shape[0]].sum(1) for f in SEQ_FEATURES]
        pooled = torch.cat([per_feature[f] for f in FEATURES] + summed, dim=1)
        return self.over(torch.relu(pooled + self.dense(dense))).squeeze(1)


def make_model(seed, device):
    torch.manual_seed(seed)
    return Model(device)


def initial_state(seed):
    """Every parameter's full value (float32, CPU) for `seed`, by the unsharded state-dict names."""
    g = torch.Generator().manual_seed(1000 + seed)
    state = {}
    for t in TABLES:
        state[f"ebc.embedding_bags.{t.name}.weight"] = torch.rand(t.num_embeddings, t.embedding_dim, generator=g) - 0.5
    for t in SEQ_TABLES:
        state[f"ec.embeddings.{t.name}.weight"] = torch.rand(t.num_embeddings, t.embedding_dim, generator=g) - 0.5
    width = _width()
    state["dense.weight"] = (torch.rand(width, DENSE_IN, generator=g) - 0.5) * 0.5
    state["dense.bias"] = torch.rand(width, generator=g) * 0.1
    state["over.weight"] = (torch.rand(1, width, generator=g) - 0.5) * 0.3
    state["over.bias"] = torch.zeros(1)
    return state


@torch.no_grad()
def load_initial_weights(model, seed):
    """Writes initial_state(seed) into `model`: unsharded, or sharded (each local shard gets its slice)."""
    from torch.distributed._shard.sharded_tensor import ShardedTensor

    full = initial_state(seed)
    state = model.state_dict()
    assert set(state) == set(full), sorted(state)
    for name, value in state.items():
        if isinstance(value, ShardedTensor):
            for shard in value.local_shards():
                md = shard.metadata
                piece = full[name]
                for dim, (off, size) in enumerate(zip(md.shard_offsets, md.shard_sizes)):
                    piece = piece.narrow(dim, off, size)
                shard.tensor.copy_(piece)
        else:
            value.copy_(full[name])


def _kjt(g, features, rows):
    lengths = torch.randint(0, MAX_LEN, (len(features), GLOBAL_BATCH), generator=g)
    values = torch.cat([torch.randint(0, rows[f], (int(lengths[i].sum()),), generator=g)
                        for i, f in enumerate(features)])
    return KeyedJaggedTensor(keys=features, values=values, lengths=lengths.reshape(-1))


def batches(world, steps=STEPS):
    """`steps` global batches (dense [GLOBAL_BATCH, DENSE_IN], the pooled features' KJT, the sequence features' KJT,
    labels), on the CPU."""
    g = torch.Generator().manual_seed(7)
    rows = {"f0": 100, "f1": 120, "f2": 120, "f3": 64, "s0": 50, "s1": 60}
    out = []
    for _ in range(steps):
        kjt, seq = _kjt(g, FEATURES, rows), _kjt(g, SEQ_FEATURES, rows)
        dense = torch.rand(GLOBAL_BATCH, DENSE_IN, generator=g)
        labels = torch.randint(0, 2, (GLOBAL_BATCH,), generator=g).float()
        out.append((dense, kjt, seq, labels))
    return out


def _slice_kjt(kjt, lo, hi):
    n = len(kjt.keys())
    lengths = kjt.lengths().view(n, GLOBAL_BATCH)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.reshape(-1).cumsum(0)])
    values = [kjt.values()[offsets[i * GLOBAL_BATCH + lo]:offsets[i * GLOBAL_BATCH + hi]] for i in range(n)]
    return KeyedJaggedTensor(keys=kjt.keys(), values=torch.cat(values), lengths=lengths[:, lo:hi].reshape(-1))


def rank_slice(dense, kjt, seq, labels, rank, world):
    """Rank `rank`'s contiguous share of a global batch."""
    b = GLOBAL_BATCH // world
    lo, hi = rank * b, (rank + 1) * b
    return dense[lo:hi], _slice_kjt(kjt, lo, hi), _slice_kjt(seq, lo, hi), labels[lo:hi]


def fixed_bucket(world, features):
    """Each feature's padded size for pad_kjt: every id a rank's share of a batch can hold, in each of `world`
    row blocks (a row-wise table's ids may all fall in one block)."""
    return [world * (GLOBAL_BATCH // world) * (MAX_LEN - 1)] * len(features)


def loss_fn(logits, labels):
    # A sum over the samples: the sharded tables' gradients are then the global batch's, as the reference's.
    return nn.functional.binary_cross_entropy_with_logits(logits, labels, reduction="sum")


def make_optimizer(model, name):
    """SGD or Adagrad over model.parameters(): a sharded model's local shards and dense parameters."""
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=LR)
    if name == "adagrad":
        return torch.optim.Adagrad(model.parameters(), lr=LR)
    raise ValueError(f"unknown optimizer {name!r}")
