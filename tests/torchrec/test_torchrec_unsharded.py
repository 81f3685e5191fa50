"""TorchRec on device tpu, unsharded: the fbgemm ops a KeyedJaggedTensor / KeyedTensor runs (torch_tpu's kernels,
csrc/aten/JaggedKernels.cpp) against fbgemm's own CPU kernels, and an EmbeddingBagCollection (sum and mean
pooling, weighted features) forward and backward against CPU, in every eager mode.

Skipped where torchrec is not installed (`make torchrec-deps`; `make test-torchrec` runs this folder).
"""
import copy

import pytest
import torch

pytest.importorskip("fbgemm_gpu")  # not installed: skipped; a broken install fails collection
pytest.importorskip("torchrec")

from conftest import assert_close  # noqa: E402
from torchrec.modules.embedding_configs import EmbeddingBagConfig, PoolingType  # noqa: E402
from torchrec.modules.embedding_modules import EmbeddingBagCollection  # noqa: E402
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor, KeyedTensor  # noqa: E402

fbgemm = torch.ops.fbgemm


def _tpu(x):
    return None if x is None else x.to("tpu")


def _leaf(x, device):
    """A fresh leaf on `device` that requires grad (never the caller's tensor itself)."""
    return x.detach().clone().to(device).requires_grad_()


def _assert_within_cpu_error(got, want32, exact):
    """got (tpu) against exact (CPU float64): within 4x the error CPU float32 (want32) makes on this computation,
    plus 4 float32 roundings of the largest magnitude (where CPU's float32 result happens to be exact).
    want32 may be a list of CPU float32 results (see _cpu_float32_runs): the error is the largest of them.
    EmbeddingBagCollection returns float32 whatever its tables' dtype (`.float()`), so `exact` may be the float64
    computation's float32 rounding."""
    exact = exact.double()
    runs = want32 if isinstance(want32, (list, tuple)) else [want32]
    assert got.device.type == "tpu" and got.shape == runs[0].shape and got.dtype == runs[0].dtype
    eps = torch.finfo(torch.float32).eps
    scale = exact.abs().max().item() if exact.numel() else 0.0
    cpu_error = max((w.double() - exact).abs().max().item() for w in runs) if exact.numel() else 0.0
    tol = 4 * cpu_error + 4 * eps * scale
    torch.testing.assert_close(got.detach().cpu().double(), exact.detach(), atol=tol, rtol=0)


NATIVE_OPS = ["asynchronous_complete_cumsum", "asynchronous_exclusive_cumsum", "asynchronous_inclusive_cumsum",
              "permute_2D_sparse_data", "permute_2D_sparse_data_input1D", "permute_1D_sparse_data", "invert_permute",
              "offsets_range", "segment_sum_csr", "dense_to_jagged_forward", "jagged_to_padded_dense_forward",
              "jagged_to_padded_dense_backward", "permute_pooled_embs", "permute_pooled_embs_auto_grad",
              "permute_multi_embedding_function", "permute_multi_embedding", "kt_regroup_arguments",
              "jagged_2d_to_dense", "jagged_1d_to_dense", "regroup_keyed_tensor"]


def test_kernels_registered_after_fbgemm_import():
    # torch_tpu.torchrec's import hook registered them when fbgemm_gpu finished importing; again is a no-op.
    import torch_tpu.torchrec

    for op in NATIVE_OPS:
        dump = torch._C._dispatch_dump(f"fbgemm::{op}")
        assert any(line.startswith("PrivateUse1:") and "JaggedKernels.cpp" in line for line in dump.splitlines()), op
    assert torch_tpu.torchrec.register_kernels() is True


# ---- the fbgemm ops against fbgemm's CPU kernels ---------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32])
def test_cumsums(mode, dtype):
    g = torch.Generator().manual_seed(0)
    for shape in [(7,), (3, 5), (0,), (2, 0)]:
        x = torch.randint(0, 9, shape, generator=g).to(dtype)
        assert_close(fbgemm.asynchronous_complete_cumsum(_tpu(x)), fbgemm.asynchronous_complete_cumsum(x))
        assert_close(fbgemm.asynchronous_exclusive_cumsum(_tpu(x)), fbgemm.asynchronous_exclusive_cumsum(x))
        assert_close(fbgemm.asynchronous_inclusive_cumsum(_tpu(x)), fbgemm.asynchronous_inclusive_cumsum(x))


def _sparse(T, B, g, trailing=()):
    lengths = torch.randint(0, 4, (T, B), generator=g)
    lengths[1, :] = 0  # one feature with no values at all
    lengths[0, 1] = 0  # an empty bag inside a feature
    n = int(lengths.sum())
    values = torch.randint(0, 1000, (n, *trailing), generator=g)
    weights = torch.rand(n, generator=g)
    return lengths, values, weights


@pytest.mark.parametrize("permute", [[3, 0, 2, 1], [2, 2, 0], [1], [0, 1, 2, 3, 3, 1]])
@pytest.mark.parametrize("lengths_dtype", [torch.int64, torch.int32])
def test_permute_2D_sparse_data(mode, permute, lengths_dtype):
    g = torch.Generator().manual_seed(1)
    lengths, values, weights = _sparse(4, 3, g)
    lengths = lengths.to(lengths_dtype)
    perm = torch.tensor(permute, dtype=torch.int32)  # fbgemm's CPU kernel takes int32 (as torchrec passes)
    want = fbgemm.permute_2D_sparse_data(perm, lengths, values, weights)
    got = fbgemm.permute_2D_sparse_data(_tpu(perm), _tpu(lengths), _tpu(values), _tpu(weights))
    assert_close(got, want, rtol=0, atol=0)
    # With the sum the caller already knows (KeyedJaggedTensor.permute passes it): no host read.
    total = want[1].numel()
    got = fbgemm.permute_2D_sparse_data(_tpu(perm), _tpu(lengths), _tpu(values), None, total)
    assert got[2] is None
    assert_close(got[:2], want[:2], rtol=0, atol=0)


def test_permute_2D_sparse_data_2d_values_and_input1D(mode):
    g = torch.Generator().manual_seed(2)
    lengths, values, weights = _sparse(3, 4, g, trailing=(2,))
    perm = torch.tensor([2, 0, 1], dtype=torch.int32)
    # fbgemm's CPU kernel reads values as 1-D; rows of [N, 2] values move together, as each column alone.
    cols = [fbgemm.permute_2D_sparse_data(perm, lengths, values[:, c].contiguous(), None) for c in range(2)]
    got = fbgemm.permute_2D_sparse_data(_tpu(perm), _tpu(lengths), _tpu(values), None)
    assert_close(got[:2], [cols[0][0], torch.stack([cols[0][1], cols[1][1]], 1)], rtol=0, atol=0)
    flat = lengths.reshape(-1)
    want = fbgemm.permute_2D_sparse_data_input1D(perm, flat, values[:, 0], 4, weights, int(lengths.sum()))
    got = fbgemm.permute_2D_sparse_data_input1D(_tpu(perm), _tpu(flat), _tpu(values[:, 0]), 4, _tpu(weights),
                                                int(lengths.sum()))
    assert_close(got, want, rtol=0, atol=0)


def test_permute_1D_sparse_data(mode):
    g = torch.Generator().manual_seed(15)
    lengths, values, weights = _sparse(2, 3, g)
    flat = lengths.reshape(-1)
    perm = torch.tensor([5, 0, 3, 3, 1], dtype=torch.int32)  # segments, repeated and dropped
    want = fbgemm.permute_1D_sparse_data(perm, flat, values, weights)
    got = fbgemm.permute_1D_sparse_data(_tpu(perm), _tpu(flat), _tpu(values), _tpu(weights))
    assert_close(got, want, rtol=0, atol=0)


def test_offsets_range_and_segment_sum_csr(mode):
    offsets = torch.tensor([0, 2, 2, 5, 9])
    for dtype in [torch.int64, torch.int32]:
        want = fbgemm.offsets_range(offsets.to(dtype), 11)
        assert_close(fbgemm.offsets_range(_tpu(offsets.to(dtype)), 11), want)
    csr = torch.tensor([0, 1, 1, 3, 4], dtype=torch.int32)
    g = torch.Generator().manual_seed(16)
    for values in [torch.randn(9, generator=g), torch.randint(-5, 5, (8,), generator=g)]:
        want = fbgemm.segment_sum_csr(2, csr, values)
        assert_close(fbgemm.segment_sum_csr(2, _tpu(csr), _tpu(values)), want)


def test_dense_to_jagged_forward_backward(mode):
    lengths = torch.tensor([2, 0, 3, 1])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    dense = torch.randn(4, 3, 2, generator=torch.Generator().manual_seed(17))
    outs = []
    for dev in ["cpu", "tpu"]:
        d = _leaf(dense, dev)
        values, _ = fbgemm.dense_to_jagged(d, [offsets.to(dev)])
        r = torch.randn(values.shape, generator=torch.Generator().manual_seed(18)).to(dev)
        (values * r).sum().backward()
        outs.append((values.detach(), d.grad))
    assert_close(outs[1], outs[0], rtol=0, atol=0)
    got = fbgemm.dense_to_jagged_forward(_tpu(dense), [_tpu(offsets)], 6)
    assert_close(got, fbgemm.dense_to_jagged_forward(dense, [offsets], 6))


def test_permute_2D_sparse_data_empty(mode):
    lengths = torch.zeros(3, 2, dtype=torch.long)  # no values at all
    values, weights = torch.zeros(0, dtype=torch.long), torch.zeros(0)
    for perm in [torch.tensor([2, 0], dtype=torch.int32), torch.zeros(0, dtype=torch.int32)]:
        want = fbgemm.permute_2D_sparse_data(perm, lengths, values, weights)
        got = fbgemm.permute_2D_sparse_data(_tpu(perm), _tpu(lengths), _tpu(values), _tpu(weights))
        assert_close(got, want, rtol=0, atol=0)


def test_permute_2D_sparse_data_backward(mode):
    g = torch.Generator().manual_seed(3)
    lengths, _, weights = _sparse(4, 2, g)
    values = torch.randn(weights.numel(), generator=g)
    perm = torch.tensor([2, 3, 0, 1], dtype=torch.int32)
    grads = []
    for dev in ["cpu", "tpu"]:
        v = _leaf(values, dev)
        w = _leaf(weights, dev)
        _, pv, pw = fbgemm.permute_2D_sparse_data(perm.to(dev), lengths.to(dev), v, w)
        r = torch.arange(pv.numel(), dtype=torch.float32).to(dev)
        ((pv * r).sum() + (pw * r * r).sum()).backward()
        grads.append((v.grad, w.grad))
    assert_close(grads[1], grads[0], rtol=0, atol=0)


def test_invert_permute(mode):
    perm = torch.randperm(11, generator=torch.Generator().manual_seed(4))
    assert_close(fbgemm.invert_permute(_tpu(perm)), fbgemm.invert_permute(perm))


@pytest.mark.parametrize("folded", [False, True])
def test_jagged_to_padded_dense_forward_backward(mode, folded):
    g = torch.Generator().manual_seed(5)
    lengths = torch.tensor([2, 0, 5, 1, 3])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    n = int(lengths.sum())
    values = torch.randn((n,) if folded else (n, 3), generator=g)
    outs = []
    for dev in ["cpu", "tpu"]:
        v = _leaf(values, dev)
        # max length 4 truncates the row of 5: its last value gets no gradient.
        dense = fbgemm.jagged_to_padded_dense(v, [offsets.to(dev)], [4], -1.5)
        r = torch.randn(dense.shape, generator=torch.Generator().manual_seed(6)).to(dev)
        (dense * r).sum().backward()
        outs.append((dense.detach(), v.grad))
    assert_close(outs[1], outs[0], rtol=0, atol=0)
    for dtype in [torch.int64, torch.int32]:  # int32 offsets and values
        want = fbgemm.jagged_to_padded_dense_forward(values.to(torch.int32), [offsets.to(dtype)], [6], 7)
        got = fbgemm.jagged_to_padded_dense_forward(_tpu(values.to(torch.int32)), [_tpu(offsets.to(dtype))], [6], 7)
        assert_close(got, want)


def test_jagged_2d_and_1d_to_dense(mode):
    offsets = torch.tensor([0, 2, 2, 5])
    g = torch.Generator().manual_seed(24)
    v2, v1 = torch.randn(5, 3, generator=g), torch.randint(0, 9, (5,), generator=g)
    want = [fbgemm.jagged_2d_to_dense(v2, offsets, 4), fbgemm.jagged_1d_to_dense(v1, offsets, 4, -1)]
    assert_close([fbgemm.jagged_2d_to_dense(_tpu(v2), _tpu(offsets), 4),
                  fbgemm.jagged_1d_to_dense(_tpu(v1), _tpu(offsets), 4, -1)], want, rtol=0, atol=0)
    with torch.inference_mode():  # below autograd: their own tpu kernels
        assert_close([fbgemm.jagged_2d_to_dense(_tpu(v2), _tpu(offsets), 4),
                      fbgemm.jagged_1d_to_dense(_tpu(v1), _tpu(offsets), 4, -1)], want, rtol=0, atol=0)


def test_jagged_to_padded_dense_two_jagged_dims(mode):
    g = torch.Generator().manual_seed(7)
    outer = torch.tensor([0, 2, 2, 5])  # 3 rows of 2, 0, 3 sub-rows
    inner_lengths = torch.tensor([1, 3, 0, 2, 4])
    inner = torch.cat([torch.zeros(1, dtype=torch.long), inner_lengths.cumsum(0)])
    values = torch.randn(int(inner_lengths.sum()), 2, generator=g)
    want = fbgemm.jagged_to_padded_dense_forward(values, [outer, inner], [3, 3], 0.5)
    got = fbgemm.jagged_to_padded_dense_forward(_tpu(values), [_tpu(outer), _tpu(inner)], [3, 3], 0.5)
    assert_close(got, want, rtol=0, atol=0)
    grad = torch.randn(want.shape, generator=g)
    want = fbgemm.jagged_to_padded_dense_backward(grad, [outer, inner], values.shape[0])
    got = fbgemm.jagged_to_padded_dense_backward(_tpu(grad), [_tpu(outer), _tpu(inner)], values.shape[0])
    assert_close(got, want, rtol=0, atol=0)


def test_jagged_to_padded_dense_empty(mode):
    offsets = torch.tensor([0, 0, 0])
    values = torch.zeros(0, 4)
    want = fbgemm.jagged_to_padded_dense_forward(values, [offsets], [3], 2.0)
    assert_close(fbgemm.jagged_to_padded_dense_forward(_tpu(values), [_tpu(offsets)], [3], 2.0), want)


def _pooled_lists(dims, perm):
    offsets = torch.tensor([0] + torch.tensor(dims).cumsum(0).tolist())
    inv = torch.argsort(perm)
    inv_offsets = torch.tensor([0] + torch.tensor(dims)[perm].cumsum(0).tolist())
    return offsets, perm, inv_offsets, inv


def test_permute_pooled_embs_auto_grad(mode):
    g = torch.Generator().manual_seed(8)
    dims = [3, 1, 4, 2]
    lists = _pooled_lists(dims, torch.tensor([2, 0, 3, 1]))
    pooled = torch.randn(5, sum(dims), generator=g)
    outs = []
    for dev in ["cpu", "tpu"]:
        x = _leaf(pooled, dev)
        y = fbgemm.permute_pooled_embs_auto_grad(x, *[t.to(dev) for t in lists])
        r = torch.randn(y.shape, generator=torch.Generator().manual_seed(9)).to(dev)
        (y * r).sum().backward()
        outs.append((y.detach(), x.grad))
    assert_close(outs[1], outs[0], rtol=0, atol=0)
    with torch.inference_mode():  # below autograd: the tpu kernel registered for the auto_grad op itself
        assert_close(fbgemm.permute_pooled_embs_auto_grad(_tpu(pooled), *[_tpu(t) for t in lists]), outs[0][0])


def _kts(device, g):
    kt1 = KeyedTensor(keys=["a", "b"], length_per_key=[2, 3], values=torch.randn(4, 5, generator=g))
    kt2 = KeyedTensor(keys=["c", "d"], length_per_key=[1, 2], values=torch.randn(4, 3, generator=g))
    return [KeyedTensor(keys=kt.keys(), length_per_key=kt.length_per_key(), values=_leaf(kt.values(), device))
            for kt in (kt1, kt2)]


@pytest.mark.parametrize("groups", [[["c", "a"], ["d", "b"]], [["c", "a"], ["a", "b", "d"], ["c"]]])
def test_permute_multi_embedding_and_regroup(mode, groups):
    # KeyedTensor regrouping through fbgemm's permute_multi_embedding (repeated keys included) and
    # regroup_keyed_tensor (its plan from kt_regroup_arguments), forward and backward.
    from torchrec.sparse.jagged_tensor import _regroup_keyed_tensors, permute_multi_embedding, regroup_kts

    outs = []
    for dev in ["cpu", "tpu"]:
        kts = _kts(dev, torch.Generator().manual_seed(21))
        res = []
        for fn in [permute_multi_embedding, regroup_kts]:
            got = fn(kts, groups)
            r = [torch.randn(t.shape, generator=torch.Generator().manual_seed(22 + i)).to(dev)
                 for i, t in enumerate(got)]
            sum((t * w).sum() for t, w in zip(got, r)).backward()
            res += [t.detach() for t in got] + [kt.values().grad.clone() for kt in kts]
            for kt in kts:
                kt.values().grad = None
        outs.append(res)
    assert_close(outs[1], outs[0])
    # ... and equal to torchrec's pure-torch regrouping on tpu, also below autograd (their own tpu kernels)
    kts = _kts("tpu", torch.Generator().manual_seed(21))
    pure = [t.detach().cpu() for t in _regroup_keyed_tensors(kts, groups)]
    assert_close(permute_multi_embedding(kts, groups), pure, rtol=0, atol=0)
    with torch.inference_mode():
        assert_close(permute_multi_embedding(kts, groups), pure, rtol=0, atol=0)
        assert_close(regroup_kts(kts, groups), pure, rtol=0, atol=0)


def test_kt_regroup_as_dict(mode):
    from torchrec.modules.regroup import KTRegroupAsDict

    results = []
    for dev in ["cpu", "tpu"]:
        kts = _kts(dev, torch.Generator().manual_seed(23))
        m = KTRegroupAsDict(groups=[["c", "a"], ["d", "b"]], keys=["x", "y"])
        out = m(kts)
        (out["x"].sum() * 2 + (out["y"] * out["y"]).sum()).backward()
        results.append([out["x"].detach(), out["y"].detach(), *[kt.values().grad for kt in kts]])
    assert_close(results[1], results[0])


# ---- bad input: a clear Python exception naming the op ----------------------------------------------------


def test_bad_input_raises(mode):
    lengths = _tpu(torch.tensor([[1, 2], [0, 1]]))
    values = _tpu(torch.arange(4))
    with pytest.raises(IndexError, match="permute_2D_sparse_data"):
        fbgemm.permute_2D_sparse_data(_tpu(torch.tensor([0, 2])), lengths, values, None, 4)[1].cpu()
    with pytest.raises(IndexError, match="permute_1D_sparse_data"):
        fbgemm.permute_1D_sparse_data(_tpu(torch.tensor([4])), lengths.reshape(-1), values, None, 2)[1].cpu()
    with pytest.raises(RuntimeError, match="permute_2D_sparse_data: expected 2-D lengths"):
        fbgemm.permute_2D_sparse_data(_tpu(torch.tensor([0])), values, values, None)
    with pytest.raises(RuntimeError, match="asynchronous_complete_cumsum: expected a 1-D or 2-D"):
        fbgemm.asynchronous_complete_cumsum(_tpu(torch.zeros(2, 2, 2, dtype=torch.long)))
    with pytest.raises(IndexError, match="jagged_to_padded_dense"):
        # offsets promise 5 values, there are 3
        fbgemm.jagged_to_padded_dense_forward(_tpu(torch.ones(3, 2)), [_tpu(torch.tensor([0, 2, 5]))], [4]).cpu()
    with pytest.raises(IndexError, match="invert_permute"):
        fbgemm.invert_permute(_tpu(torch.tensor([0, 3, 1]))).cpu()
    dims, perm = [2, 2], torch.tensor([0, 0])
    offsets = torch.tensor([0, 2, 4])
    with pytest.raises(RuntimeError, match="permute_pooled_embs: permute_list is not a permutation"):
        fbgemm.permute_pooled_embs(_tpu(torch.ones(2, 4)), _tpu(offsets), _tpu(perm), _tpu(offsets), _tpu(perm)).cpu()
    bad_permutes = _tpu(torch.tensor([[0, 0, 0, 0, 3, 0], [0, 0, 1, 1, 1, 0]], dtype=torch.int32))  # overlap
    with pytest.raises(RuntimeError, match="permute_multi_embedding_function: permutes"):
        fbgemm.permute_multi_embedding([_tpu(torch.ones(2, 3))], bad_permutes, _tpu(torch.tensor([3])),
                                       _tpu(torch.tensor([3])), [3])[0].cpu()
    with pytest.raises(RuntimeError, match="permute_list needs to have long/int64 type"):
        fbgemm.permute_pooled_embs(_tpu(torch.ones(2, 4)), _tpu(offsets), _tpu(perm.int()), _tpu(offsets),
                                   _tpu(perm))


# ---- KeyedJaggedTensor / KeyedTensor / EmbeddingBagCollection ----------------------------------------------


def _kjt(device, dtype=torch.float32, weighted=False):
    # features f1, f2 (table t1) and f3 (table t2), batch 4; empty bags included.
    lengths = torch.tensor([2, 0, 1, 3, 1, 1, 0, 2, 0, 4, 2, 1])
    g = torch.Generator().manual_seed(10)
    values = torch.cat([torch.randint(0, 10, (6,), generator=g), torch.randint(0, 10, (4,), generator=g),
                        torch.randint(0, 7, (7,), generator=g)])
    weights = torch.rand(values.numel(), generator=g, dtype=torch.float64).to(dtype) if weighted else None
    return KeyedJaggedTensor.from_lengths_sync(keys=["f1", "f2", "f3"], values=values.to(device),
                                               lengths=lengths.to(device), weights=_tpu(weights) if device == "tpu"
                                               else weights)


def test_keyed_jagged_tensor_ops(mode):
    cpu, tpu = _kjt("cpu", weighted=True), _kjt("tpu", weighted=True)
    assert_close(tpu.offsets(), cpu.offsets())
    pc, pt = cpu.permute([2, 0, 1]), tpu.permute([2, 0, 1])
    assert pt.keys() == pc.keys()
    assert_close([pt.values(), pt.lengths(), pt.weights()], [pc.values(), pc.lengths(), pc.weights()], rtol=0,
                 atol=0)
    for key in ["f1", "f3"]:
        assert_close(tpu[key].to_padded_dense(3), cpu[key].to_padded_dense(3))
    # A CPU KJT moved over (pinned, asynchronous copy), split and concatenated on tpu.
    moved = cpu.pin_memory().to(torch.device("tpu"), non_blocking=True)
    moved.record_stream(torch.tpu.current_stream())
    parts = moved.split([1, 2])
    both = KeyedJaggedTensor.concat([parts[1], parts[0]])
    want = KeyedJaggedTensor.concat([cpu.split([1, 2])[1], cpu.split([1, 2])[0]])
    assert both.keys() == want.keys() == ["f2", "f3", "f1"]
    assert_close([both.values(), both.lengths(), both.weights(), both.offsets()],
                 [want.values(), want.lengths(), want.weights(), want.offsets()], rtol=0, atol=0)


def test_embedding_collection_forward_backward(mode):
    from torchrec.modules.embedding_configs import EmbeddingConfig
    from torchrec.modules.embedding_modules import EmbeddingCollection

    torch.manual_seed(19)
    ec = EmbeddingCollection(tables=[EmbeddingConfig(name="t1", embedding_dim=4, num_embeddings=10,
                                                     feature_names=["f1", "f2"]),
                                     EmbeddingConfig(name="t2", embedding_dim=4, num_embeddings=7,
                                                     feature_names=["f3"])], device=torch.device("cpu"))
    results = []
    for m, dev in [(ec, "cpu"), (copy.deepcopy(ec).to("tpu"), "tpu")]:
        out = m(_kjt(dev))
        assert list(out.keys()) == ["f1", "f2", "f3"]
        dense = [out[k].to_padded_dense(3) for k in ["f1", "f2", "f3"]]  # jagged_to_padded_dense
        r = torch.randn(3, 4, 3, 4, generator=torch.Generator().manual_seed(20)).to(dev)
        (torch.stack(dense) * r).sum().backward()
        results.append([*[d.detach() for d in dense], *[out[k].lengths() for k in out],
                        *[p.grad for p in m.parameters()]])
    # Rows are gathered and padded exactly; each weight gradient sums a few entries of r (the order may differ
    # from CPU's): float32 assert_close.
    assert_close(results[1], results[0])


def _ebc(pooling, weighted):
    torch.manual_seed(11)
    tables = [EmbeddingBagConfig(name="t1", embedding_dim=4, num_embeddings=10, feature_names=["f1", "f2"],
                                 pooling=pooling),
              EmbeddingBagConfig(name="t2", embedding_dim=3, num_embeddings=7, feature_names=["f3"],
                                 pooling=pooling)]
    return EmbeddingBagCollection(tables=tables, is_weighted=weighted, device=torch.device("cpu"))


def _run_ebc(ebc, kjt):
    kt = ebc(kjt)
    assert isinstance(kt, KeyedTensor) and kt.keys() == ["f1", "f2", "f3"]
    # regroup runs fbgemm's permute_pooled_embs_auto_grad (every key used once)
    regrouped = KeyedTensor.regroup([kt], [["f3", "f1"], ["f2"]])
    r = torch.randn(kt.values().shape, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    loss = (kt.values() * r.to(kt.values())).sum() + sum((t * t).sum() for t in regrouped)
    loss.backward()
    return [kt.values().detach(), *[t.detach() for t in regrouped]] + [p.grad for p in ebc.parameters()]


@pytest.mark.parametrize("pooling,weighted", [(PoolingType.SUM, False), (PoolingType.MEAN, False),
                                              (PoolingType.SUM, True)])
def test_embedding_bag_collection_forward_backward(mode, pooling, weighted):
    ebc = _ebc(pooling, weighted)
    ebc64 = copy.deepcopy(ebc).double()
    ebc_tpu = copy.deepcopy(ebc).to("tpu")
    assert all(p.device.type == "tpu" for p in ebc_tpu.parameters())
    want32 = _run_ebc(ebc, _kjt("cpu", weighted=weighted))
    exact = _run_ebc(ebc64, _kjt("cpu", torch.float64, weighted=weighted))
    got = _run_ebc(ebc_tpu, _kjt("tpu", weighted=weighted))
    assert len(got) == len(want32) == len(exact)
    for g, w, e in zip(got, want32, exact):
        _assert_within_cpu_error(g, w, e)


# ---- DLRM: 10 SGD or Adagrad steps ---------------------------------------------------------------------------


def _dlrm_batches(device, dtype, steps=10, B=6):
    g = torch.Generator().manual_seed(13)
    out = []
    for _ in range(steps):
        lengths = torch.randint(0, 3, (3 * B,), generator=g)
        values = torch.randint(0, 10, (int(lengths.sum()),), generator=g)
        dense = torch.randn(B, 5, generator=g, dtype=torch.float64).to(dtype)
        label = torch.randint(0, 2, (B,), generator=g).to(dtype)
        kjt = KeyedJaggedTensor.from_lengths_sync(keys=["f1", "f2", "f3"], values=values.to(device),
                                                  lengths=lengths.to(device))
        out.append((dense.to(device), kjt, label.to(device)))
    return out


def _train_dlrm(model, batches, optimizer="sgd"):
    opt = (torch.optim.Adagrad if optimizer == "adagrad" else torch.optim.SGD)(model.parameters(), lr=0.1)
    losses = []
    for dense, kjt, label in batches:
        opt.zero_grad()
        logits = model(dense, kjt).squeeze(-1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, label)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses), [p.detach() for p in model.parameters()]


def _cpu_float32_runs(model, train, copies=4):
    """CPU float32's error on a training run, sampled: the run itself and `copies` runs from starting weights
    each moved by under half a float32 rounding (a fixed seed). Adagrad divides by the root of a row's summed
    squared gradients, so a rounding in a nearly cancelling gradient sum moves the weights by up to ~1e-6 after
    10 steps: measured on this DLRM, the perturbed CPU runs' errors against float64 spread over 4x (t2's
    embedding: 3.5e-7 to 1.8e-6), so one CPU run's error alone is a lucky or unlucky draw of float32 noise."""
    runs = [train(copy.deepcopy(model))]
    gen = torch.Generator().manual_seed(99)
    for _ in range(copies):
        moved = copy.deepcopy(model)
        with torch.no_grad():
            for p in moved.parameters():
                p.mul_(1 + (torch.rand(p.shape, generator=gen) - 0.5) * torch.finfo(torch.float32).eps)
        runs.append(train(moved))
    return runs


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
def test_dlrm_steps_equal_cpu(mode, optimizer):
    from torchrec.models.dlrm import DLRM

    torch.manual_seed(14)
    tables = [EmbeddingBagConfig(name=f"t{i}", embedding_dim=4, num_embeddings=10, feature_names=[f"f{i}"])
              for i in (1, 2, 3)]
    ebc = EmbeddingBagCollection(tables=tables, device=torch.device("cpu"))
    model = DLRM(embedding_bag_collection=ebc, dense_in_features=5, dense_arch_layer_sizes=[8, 4],
                 over_arch_layer_sizes=[8, 1])
    runs32 = _cpu_float32_runs(model, lambda m: _train_dlrm(m, _dlrm_batches("cpu", torch.float32), optimizer))
    exact = _train_dlrm(copy.deepcopy(model).double(), _dlrm_batches("cpu", torch.float64), optimizer)
    got = _train_dlrm(copy.deepcopy(model).to("tpu"), _dlrm_batches("tpu", torch.float32), optimizer)
    _assert_within_cpu_error(got[0], [r[0] for r in runs32], exact[0])
    for i, (g, e) in enumerate(zip(got[1], exact[1])):
        _assert_within_cpu_error(g, [r[1][i] for r in runs32], e)


# ---- fixed-shape inputs: one set of programs for every batch ----------------------------------------------


def test_pad_kjt_keeps_pooling_exact(mode):
    from torch_tpu.torchrec.fixed_shape import FixedShapeEmbeddingBagCollection, pad_kjt

    kjt = _kjt("cpu", weighted=True)
    padded = pad_kjt(kjt)  # 6, 4 and 7 ids -> buckets of 8, 4 and 8
    assert padded.stride() == kjt.stride() + 1 and padded.length_per_key() == [8, 4, 8]
    with pytest.raises(ValueError, match="more than its bucket"):
        pad_kjt(kjt, [4, 4, 8])
    with pytest.raises(ValueError, match="pad on the host"):
        pad_kjt(_kjt("tpu"))
    for pooling, weighted in [(PoolingType.SUM, True), (PoolingType.MEAN, False)]:
        ebc = _ebc(pooling, weighted)
        wrapped = FixedShapeEmbeddingBagCollection(copy.deepcopy(ebc).to("tpu"))
        kjt = _kjt("cpu", weighted=weighted)
        want32 = ebc(kjt).values()
        exact = copy.deepcopy(ebc).double()(_kjt("cpu", torch.float64, weighted=weighted)).values()
        _assert_within_cpu_error(wrapped(kjt).values().detach(), want32.detach(), exact.detach())


def test_pad_kjt_row_blocks():
    """Row-wise sharded tables: each row block gets padding ids of its own first row up to its bucket, so every
    rank receives the same number of ids; the real samples are untouched (exact values)."""
    from torch_tpu.torchrec.fixed_shape import pad_kjt

    kjt = KeyedJaggedTensor(keys=["a", "b"], values=torch.tensor([1, 7, 8, 2, 9, 4, 5]),
                            lengths=torch.tensor([2, 1, 2, 2]))  # a: [1, 7], [8]; b: [2, 9], [4, 5]
    blocks = {"a": [0, 5]}  # a's table in two row blocks, rows 0-4 and 5-: ids 1 | 7, 8
    padded = pad_kjt(kjt, [8, 4], blocks)  # a: 4 ids per block; b unsharded: 4 ids
    assert padded.stride() == 3 and padded.length_per_key() == [8, 4]
    assert padded.lengths().tolist() == [2, 1, 5, 2, 2, 0]
    assert padded.values().tolist() == [1, 7, 8] + [0, 0, 0, 5, 5] + [2, 9, 4, 5]
    block_of = lambda v: int(v >= 5)  # noqa: E731
    a = padded.values()[:8].tolist()
    assert [sum(block_of(v) == k for v in a) for k in (0, 1)] == [4, 4]
    by_count = pad_kjt(kjt, lambda n: 2 * n, blocks)  # a function applies to each block's count: 1 -> 2, 2 -> 4
    assert by_count.length_per_key() == [6, 8]
    with pytest.raises(ValueError, match="in its row block from 5, more than its bucket of 1"):
        pad_kjt(kjt, [2, 4], blocks)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "torch_compile"])
def test_fixed_shape_dlrm_compiles_once(mode, compiled):
    from torchrec.models.dlrm import DLRM
    from torch_tpu.torchrec.fixed_shape import FixedShapeEmbeddingBagCollection

    torch.manual_seed(14)
    tables = [EmbeddingBagConfig(name=f"t{i}", embedding_dim=4, num_embeddings=10, feature_names=[f"f{i}"])
              for i in (1, 2, 3)]
    model = DLRM(embedding_bag_collection=EmbeddingBagCollection(tables=tables, device=torch.device("cpu")),
                 dense_in_features=5, dense_arch_layer_sizes=[8, 4], over_arch_layer_sizes=[8, 1])
    want32 = _train_dlrm(copy.deepcopy(model), _dlrm_batches("cpu", torch.float32))
    exact = _train_dlrm(copy.deepcopy(model).double(), _dlrm_batches("cpu", torch.float64))
    tpu_model = copy.deepcopy(model)
    arch = tpu_model.sparse_arch
    arch.embedding_bag_collection = FixedShapeEmbeddingBagCollection(arch.embedding_bag_collection, [12, 12, 12])
    tpu_model.to("tpu")
    # Dense features and labels on tpu, the KeyedJaggedTensors on the CPU (the wrapper pads and uploads them).
    batches = [(d.to("tpu"), kjt, y.to("tpu")) for (d, kjt, y) in _dlrm_batches("cpu", torch.float32)]
    compiles = []
    opt = torch.optim.SGD(tpu_model.parameters(), lr=0.1)
    if compiled:
        torch._dynamo.reset()
    forward = torch.compile(tpu_model, backend="tpu") if compiled else tpu_model
    graphs = torch.tpu.executor_stats()["compiled_graphs"]
    losses = []
    for dense, kjt, label in batches:
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(forward(dense, kjt).squeeze(-1), label)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        torch.tpu.synchronize()
        compiles.append(torch.tpu.compile_cache_stats()["memory"]["misses"])  # programs new to this process
    _assert_within_cpu_error(torch.stack(losses), want32[0], exact[0])
    for g, w, e in zip(tpu_model.parameters(), want32[1], exact[1]):
        _assert_within_cpu_error(g.detach(), w, e)
    # Batches of different sizes, one shape each: nothing compiles after the first two steps (the second one
    # is the first with optimizer state and an accumulated gradient).
    assert compiles[2:] == [compiles[2]] * (len(compiles) - 2), compiles
    if compiled:  # the dense arch, interaction and over arch ran as compiled graphs, forward and backward
        assert torch.tpu.executor_stats()["compiled_graphs"] - graphs >= 2 * len(batches)
