"""The ops TorchRec's sharded path runs on tpu (csrc/aten/ShardedEmbeddingKernels.cpp) against their own CPU kernels
(torchrec's Python CPU kernels, fbgemm's C++ one), forward and backward, in every eager mode, and bad input.

Skipped where torchrec is not installed (`make torchrec-deps`; `make test-torchrec` runs this folder).
"""
import pytest
import torch

pytest.importorskip("fbgemm_gpu")
pytest.importorskip("torchrec")

import torchrec.experimental.torch_tpu.pallas.ops  # noqa: E402,F401  (defines torchrec::embedding_*, permute_pooled_embs)
from conftest import assert_close  # noqa: E402

torchrec_ops = torch.ops.torchrec
fbgemm = torch.ops.fbgemm

TORCHREC_OPS = ["embedding_pooled_lookup_offset", "embedding_pooled_lookup_offset_backward", "embedding_lookup",
                "embedding_lookup_backward", "permute_pooled_embs", "permute_pooled_embs_backward"]


def _leaf(x, device):
    return x.detach().clone().to(device).requires_grad_()


def test_kernels_registered():
    import torch_tpu.torchrec

    for op in TORCHREC_OPS:
        dump = torch._C._dispatch_dump(f"torchrec::{op}")
        assert any(line.startswith("PrivateUse1:") and "ShardedEmbeddingKernels.cpp" in line
                   for line in dump.splitlines()), op
    dump = torch._C._dispatch_dump("fbgemm::block_bucketize_sparse_features")
    assert any(line.startswith("PrivateUse1:") and "ShardedEmbeddingKernels.cpp" in line for line in dump.splitlines())
    assert torch_tpu.torchrec.register_torchrec_kernels() is True


def _bags(g, bags, rows, max_len=4, dtype=torch.int32):
    lengths = torch.randint(0, max_len, (bags,), generator=g)
    lengths[0] = 0  # an empty bag
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]).to(dtype)
    indices = torch.randint(0, rows, (int(lengths.sum()),), generator=g).to(dtype)
    indices[:2] = 3  # a repeated row
    return indices, offsets


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_embedding_pooled_lookup_offset(mode, dtype):
    g = torch.Generator().manual_seed(0)
    indices, offsets = _bags(g, 7, 10, dtype=dtype)
    weights = torch.randn(10, 16, generator=g)
    r = torch.randn(7, 16, generator=g)
    outs = []
    for dev in ["cpu", "tpu"]:
        w = _leaf(weights, dev)
        y = torchrec_ops.embedding_pooled_lookup_offset(indices.to(dev), offsets.to(dev), w, 16)
        (y * r.to(dev)).sum().backward()
        outs.append((y.detach(), w.grad))
    # Sums of a few float32 rows: the order may differ from index_add_'s, so within a few roundings.
    assert_close(outs[1], outs[0], rtol=1e-6, atol=1e-6)
    # The backward op by itself.
    grad = torchrec_ops.embedding_pooled_lookup_offset_backward(
        r.to("tpu"), indices.to("tpu"), offsets.to("tpu"), 10, 16)
    want = torchrec_ops.embedding_pooled_lookup_offset_backward(r, indices, offsets, 10, 16)
    assert grad.device.type == "tpu"
    assert_close(grad, want, rtol=1e-6, atol=1e-6)


def test_embedding_lookup(mode):
    g = torch.Generator().manual_seed(1)
    indices = torch.tensor([4, 0, 4, 9, 2], dtype=torch.int32)
    weights = torch.randn(10, 16, generator=g)
    r = torch.randn(5, 16, generator=g)
    outs = []
    for dev in ["cpu", "tpu"]:
        w = _leaf(weights, dev)
        y = torchrec_ops.embedding_lookup(indices.to(dev), w, 16)
        (y * r.to(dev)).sum().backward()
        outs.append((y.detach(), w.grad))
    assert_close(outs[1], outs[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dims,order", [([16, 32, 16], [2, 0, 1]), ([8, 8, 16, 4], [1, 3, 0, 2]),
                                        ([16, 16], [0, 0])])  # a repeated piece (cut at the width)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_torchrec_permute_pooled_embs(mode, dims, order, dtype):
    g = torch.Generator().manual_seed(2)
    offsets = torch.tensor([0] + list(torch.tensor(dims).cumsum(0)), dtype=dtype)
    perm = torch.tensor(order, dtype=dtype)
    x = torch.randn(5, sum(dims), generator=g)
    r = torch.randn(5, sum(dims), generator=g)
    outs = []
    for dev in ["cpu", "tpu"]:
        xl = _leaf(x, dev)
        y = torchrec_ops.permute_pooled_embs(xl, offsets.to(dev), perm.to(dev))
        (y * r.to(dev)).sum().backward()
        outs.append((y.detach(), xl.grad))
    assert_close(outs[1], outs[0], rtol=0, atol=0)
    back = torchrec_ops.permute_pooled_embs_backward(r.to("tpu"), offsets.to("tpu"), perm.to("tpu"))
    assert_close(back, torchrec_ops.permute_pooled_embs_backward(r, offsets, perm), rtol=0, atol=0)


def _kjt_data(g, t, b, dtype, max_id=40):
    lengths = torch.randint(0, 4, (t * b,), generator=g).to(dtype)
    lengths[1] = 0
    indices = torch.randint(0, max_id, (int(lengths.sum()),), generator=g).to(dtype)
    return lengths, indices


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("my_size", [1, 2, 3])
@pytest.mark.parametrize("pos,sequence,weighted,keep", [(False, False, False, False), (True, True, True, False),
                                                         (False, True, False, True), (True, False, True, True)])
def test_block_bucketize_sparse_features(mode, dtype, my_size, pos, sequence, weighted, keep):
    g = torch.Generator().manual_seed(3 + my_size)
    t, b = 3, 4
    lengths, indices = _kjt_data(g, t, b, dtype)
    # Ids past block_size * my_size (40 > 7 * 3) take the modulo path.
    block_sizes = torch.tensor([7, 5, 20][:t], dtype=dtype)
    weights = torch.rand(indices.numel(), generator=g) if weighted else None
    args = dict(bucketize_pos=pos, sequence=sequence, my_size=my_size, keep_orig_idx=keep)
    want = fbgemm.block_bucketize_sparse_features(lengths, indices, block_sizes=block_sizes, weights=weights, **args)
    got = fbgemm.block_bucketize_sparse_features(lengths.to("tpu"), indices.to("tpu"),
                                                 block_sizes=block_sizes.to("tpu"),
                                                 weights=None if weights is None else weights.to("tpu"), **args)
    for w, o in zip(want, got):
        assert (w is None) == (o is None)
        if w is not None:
            assert o.device.type == "tpu" and o.dtype == w.dtype
            assert_close(o, w, rtol=0, atol=0)


def test_block_bucketize_no_ids(mode):
    lengths = torch.zeros(6, dtype=torch.int32)
    indices = torch.zeros(0, dtype=torch.int32)
    bs = torch.tensor([5, 5], dtype=torch.int32)
    want = fbgemm.block_bucketize_sparse_features(lengths, indices, False, True, bs, 2)
    got = fbgemm.block_bucketize_sparse_features(lengths.to("tpu"), indices.to("tpu"), False, True, bs.to("tpu"), 2)
    for w, o in zip(want, got):
        if w is not None:
            assert_close(o, w, rtol=0, atol=0)


def test_bad_input_raises(mode):
    tpu = lambda *ts: [t.to("tpu") for t in ts]  # noqa: E731
    w = torch.randn(10, 16, device="tpu")
    idx, off = tpu(torch.tensor([1, 12], dtype=torch.int32), torch.tensor([0, 1, 2], dtype=torch.int32))
    with pytest.raises(IndexError, match="embedding_pooled_lookup_offset"):
        torchrec_ops.embedding_pooled_lookup_offset(idx, off, w, 16).cpu()
    idx, off = tpu(torch.tensor([1, 2], dtype=torch.int32), torch.tensor([0, 1, 3], dtype=torch.int32))
    with pytest.raises(IndexError, match="embedding_pooled_lookup_offset"):  # offsets past the indices
        torchrec_ops.embedding_pooled_lookup_offset(idx, off, w, 16).cpu()
    with pytest.raises(RuntimeError, match="embedding_pooled_lookup_offset: emb_dim is 32"):
        torchrec_ops.embedding_pooled_lookup_offset(idx, off, w, 32)
    g = torch.randn(2, 16, device="tpu")
    with pytest.raises(IndexError, match="embedding_pooled_lookup_offset_backward"):
        torchrec_ops.embedding_pooled_lookup_offset_backward(g, *tpu(torch.tensor([1, 12], dtype=torch.int32),
                                                                     torch.tensor([0, 1, 2], dtype=torch.int32)),
                                                             10, 16).cpu()
    x = torch.randn(2, 32, device="tpu")
    with pytest.raises(RuntimeError, match="torchrec::permute_pooled_embs: permute_list names"):
        torchrec_ops.permute_pooled_embs(x, *tpu(torch.tensor([0, 16, 32]), torch.tensor([0, 2]))).cpu()
    with pytest.raises(RuntimeError, match="torchrec::permute_pooled_embs_backward: permute_list names"):
        torchrec_ops.permute_pooled_embs_backward(x, *tpu(torch.tensor([0, 8, 32]), torch.tensor([0, 0]))).cpu()
    lengths, indices, bs = tpu(torch.tensor([2, 1]), torch.tensor([1, 2]), torch.tensor([5]))
    with pytest.raises(RuntimeError, match="block_bucketize_sparse_features: the lengths do not sum"):
        fbgemm.block_bucketize_sparse_features(lengths, indices, False, False, bs, 2)[0].cpu()
    lengths, indices = tpu(torch.tensor([1, 1]), torch.tensor([1, -2]))
    with pytest.raises(RuntimeError, match="block_bucketize_sparse_features: .* an index is negative"):
        fbgemm.block_bucketize_sparse_features(lengths, indices, False, False, bs, 2)[0].cpu()
    with pytest.raises(NotImplementedError, match="block_bucketize_sparse_features on tpu: batch_size_per_feature"):
        fbgemm.block_bucketize_sparse_features(lengths, indices, False, False, bs, 2,
                                               total_num_blocks=torch.tensor([4], device="tpu"))
