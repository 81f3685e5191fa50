"""Bounded dynamic shapes (torch_tpu/compile/buckets.py): a graph with symbolic sizes is traced
once per size bucket and replayed for every length in it, with the results of eager CPU.

Programs are counted as traced graph calls: compiled-graph calls minus replays (a call that
is not a replay traces, and flushes one program). Float results are compared with CPU within
1e-5 (relative and absolute) of float64 plus 4x the error CPU float32 makes against it."""
import pytest
import torch
import torch.nn.functional as F
from torch_tpu import _C
from torch_tpu.compile import buckets

from conftest import assert_close, assert_within_cpu_error


def _traced():
    return _C._executor_stats()["compiled_graphs"] - _C._fused_stats()["replays"]


def _data(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _doubled(inputs):
    return [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def _assert_like_cpu(got, fn, *inputs):
    """got (tpu results of fn on the inputs) against fn on CPU, within CPU's own float32 error."""
    want = _flat(fn(*inputs))
    exact = _flat(fn(*_doubled(inputs)))
    got = _flat(got)
    assert len(got) == len(want)
    for g, w, e in zip(got, want, exact):
        assert_within_cpu_error(g, w, e)


def _lengths_in(buckets_seen):
    return len({buckets.bucket(n) for n in buckets_seen})


def test_reductions_over_a_dynamic_length_trace_once_per_bucket(mode):
    def f(x, w):
        n = x.shape[1]
        return (torch.softmax(x @ w, dim=1), x.mean(1), x.var(1), x.std(1, correction=0), x.amax(1),
                x.argmax(1), x.logsumexp(1), x.cumsum(1), (x * n).sum(), x.sum(), x.norm(dim=1),
                (x > 0).all(1), x.max(1).values, x.min(1).indices)

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    w = _data(6, 6, seed=100)
    lengths = [3, 4, 5, 7, 8, 6, 9, 13, 16, 11]
    traced = _traced()
    for i, n in enumerate(lengths):
        x = _data(2, n, 6, seed=i)
        _assert_like_cpu(compiled(x.to("tpu"), w.to("tpu")), f, x, w)
    assert _traced() - traced == _lengths_in(lengths) == 3


def test_views_slices_and_concatenation_along_a_dynamic_length(mode):
    def f(x, y):
        n = x.shape[1]
        merged = x.reshape(2 * n, 6)  # the length merged with the batch: moves eager elements
        return (merged, merged.sum(0), x[:, -1], x[:, -3:], x[:, 1:], x[:, :-1], torch.cat([x, y], 1),
                torch.cat([x, y], 1).sum(1), torch.cat([x, y], 2), F.pad(x, (0, 0, 1, 2), value=5.0),
                x.view(2, n, 2, 3), x.transpose(1, 2).reshape(12, n), x[:, 2:], x.flatten())

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    lengths = [5, 7, 6, 9, 12]
    traced = _traced()
    for i, n in enumerate(lengths):
        x, y = _data(2, n, 6, seed=i), _data(2, n, 6, seed=i + 50)
        _assert_like_cpu(compiled(x.to("tpu"), y.to("tpu")), f, x, y)
    assert _traced() - traced == _lengths_in(lengths) == 2


def test_index_ops_never_read_the_padding(mode):
    # Padded token ids and positions are replaced by 0: an embedding of 10 rows indexed by
    # positions 0..n-1 of a bucket of 16 stays in range, and no error flag is raised.
    table, pos_table = _data(50, 4), _data(10, 4, seed=1)

    def f(ids, table, pos_table):
        n = ids.shape[1]
        h = F.embedding(ids, table) + F.embedding(torch.arange(n, device=ids.device), pos_table)
        return h, torch.gather(h, 2, (ids % 4).unsqueeze(-1)), h.index_select(1, torch.arange(n - 1, -1, -1, device=ids.device))

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    for n in (3, 9, 10):
        ids = torch.randint(0, 50, (2, n), generator=torch.Generator().manual_seed(n))
        _assert_like_cpu(compiled(ids.to("tpu"), table.to("tpu"), pos_table.to("tpu")), f, ids, table, pos_table)


def test_advanced_indexing_along_a_dynamic_length(mode):
    # x[idx] along the padded length: fixed indices (a negative one counts from the real end), an
    # index as long as the length (its padding reads row 0), a mask's causal positions (HF's masks).
    def f(x):
        n = x.shape[1]
        positions = torch.arange(n, device=x.device)
        causal = positions[None, :] <= positions[:, None]
        reversed_positions = torch.arange(n - 1, -1, -1, device=x.device)
        return (x[:, torch.tensor([0, -1, 2], device=x.device)], x[:, reversed_positions] * 2,
                causal[positions][:, positions].to(x.dtype).sum(1), x[:, (positions * 3) % n].sum(1))

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    lengths = [5, 7, 6, 9, 12]
    traced = _traced()
    for i, n in enumerate(lengths):
        x = _data(2, n, 4, seed=i)
        _assert_like_cpu(compiled(x.to("tpu")), f, x)
    assert _traced() - traced == _lengths_in(lengths) == 2


def test_an_index_past_the_real_length_raises_as_in_eager(mode):
    # Position n of a length-n dimension lies inside the bucket's padding: it raises IndexError as
    # eager does, rather than reading the padding.
    def f(x, i):
        return x[:, i]

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    traced = _traced()
    for n in (5, 6):
        x = _data(2, n, 4, seed=n)
        ok = torch.tensor([0, n - 1, -n])
        _assert_like_cpu(compiled(x.to("tpu"), ok.to("tpu")), f, x, ok)
        for bad in (n, -n - 1):
            with pytest.raises(IndexError):
                f(x, torch.tensor([0, bad, 1]))
            with pytest.raises(IndexError, match="out of range"):
                compiled(x.to("tpu"), torch.tensor([0, bad, 1], device="tpu")).cpu()
    _assert_like_cpu(compiled(x.to("tpu"), ok.to("tpu")), f, x, ok)  # usable afterwards
    assert _traced() - traced == 1  # one bucket: every call ran its program


def test_scatter_adds_and_runtime_positions(mode):
    # Padded index entries add nothing (their source elements are zeroed); a slice or select
    # at a symbolic position of a static dimension reads at the real position; repeat tiles a
    # static dimension.
    table = _data(16, 3, seed=7)

    def f(ids, src, table):
        n = ids.shape[0]
        acc = torch.zeros(6, 3, dtype=src.dtype, device=src.device).index_add(0, ids, src)
        sc = torch.zeros(6, 3, dtype=src.dtype, device=src.device).scatter_add(0, ids.unsqueeze(1).expand(n, 3), src)
        return acc, sc, table[n:n + 2], table[n], table[:n].sum(0), src.repeat(1, 2)

    compiled = torch.compile(f, backend="tpu")
    lengths = [5, 7, 9, 12]
    traced = _traced()
    for n in lengths:
        ids = torch.randint(0, 6, (n,), generator=torch.Generator().manual_seed(n))
        src = _data(n, 3, seed=n)
        ids_t, src_t = ids.to("tpu"), src.to("tpu")
        torch._dynamo.mark_dynamic(ids_t, 0)
        torch._dynamo.mark_dynamic(src_t, 0)
        _assert_like_cpu(compiled(ids_t, src_t, table.to("tpu")), f, ids, src, table)
    assert _traced() - traced == _lengths_in(lengths) == 2


def test_graphs_that_cannot_run_padded_run_at_exact_sizes(mode):
    # A symbolic padding amount (padding a length up to a multiple) has no rule; with dynamic=True
    # a width of 3 that must equal a static 3 (duck sizing) cannot be padded. Both run exactly.
    def pad_to_8(x):
        n = x.shape[0]
        return F.pad(x, (0, 0, 0, 8 - n % 8)).sum(1)

    def add_rows(ids, src):
        return torch.zeros(6, 3, dtype=src.dtype, device=src.device).index_add(0, ids, src)

    for f in (pad_to_8, add_rows):
        compiled = torch.compile(f, backend="tpu", dynamic=True)
        lengths = [5, 6, 7]
        traced = _traced()
        for n in lengths:
            ids = torch.randint(0, 6, (n,), generator=torch.Generator().manual_seed(n))
            x = _data(n, 3, seed=n)
            args = (x,) if f is pad_to_8 else (ids, x)
            _assert_like_cpu(compiled(*[a.to("tpu") for a in args]), f, *args)
        assert _traced() - traced >= len(lengths)


class _TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb, self.pos = torch.nn.Embedding(50, 16), torch.nn.Embedding(64, 16)
        self.ln, self.qkv, self.head = torch.nn.LayerNorm(16), torch.nn.Linear(16, 48), torch.nn.Linear(16, 50)

    def forward(self, ids):
        n = ids.shape[1]
        h = self.emb(ids) + self.pos(torch.arange(n, device=ids.device))
        q, k, v = self.qkv(self.ln(h)).split(16, -1)
        h = h + F.scaled_dot_product_attention(q, k, v, is_causal=True)
        logits = self.head(h)
        return F.cross_entropy(logits.view(-1, 50), ids.view(-1)), logits[:, -1].argmax(-1)


def _train_over_lengths(make_model, lengths, low_id=0):
    """A compiled (dynamic=True) training step of make_model() at each length against CPU float32 and float64
    (loss, last-token argmax, every gradient); returns the graphs traced over all of them."""
    cpu, cpu64, tpu = make_model(), make_model().double(), make_model().to("tpu")
    compiled = torch.compile(tpu, backend="tpu", dynamic=True)
    traced = _traced()
    for n in lengths:
        ids = torch.randint(low_id, 50, (2, n), generator=torch.Generator().manual_seed(n))
        for m in (cpu, cpu64, tpu):
            m.zero_grad()
        loss, last = compiled(ids.to("tpu"))
        want_loss, want_last = cpu(ids)
        exact_loss, _ = cpu64(ids)
        for value in (loss, want_loss, exact_loss):
            value.backward()
        assert_within_cpu_error(loss, want_loss, exact_loss, floor=1e-6, rtol=1e-6)
        assert torch.equal(last.cpu(), want_last)
        for (name, p), p64, q in zip(cpu.named_parameters(), cpu64.parameters(), tpu.parameters()):
            assert_within_cpu_error(q.grad, p.grad, p64.grad, floor=1e-6, rtol=1e-5, msg=name)
    return _traced() - traced


def test_training_step_over_variable_lengths(mode):
    lengths = [5, 7, 6, 12, 9, 3]
    # a forward and a backward program per bucket (4, 8, 16)
    assert _train_over_lengths(_TinyLM, lengths) == 2 * _lengths_in(lengths) == 6


class _HeadsLM(torch.nn.Module):
    """Attention over (batch, heads, length, head size): the one-op attention (AttentionKernels.cpp), its padded
    keys masked by the bucket rule; 4 query heads over 2 key heads, a causal triangle or a key padding mask."""

    def __init__(self, masking):
        super().__init__()
        torch.manual_seed(0)
        self.masking = masking
        self.emb, self.pos = torch.nn.Embedding(50, 16), torch.nn.Embedding(64, 16)
        self.ln, self.q, self.kv = torch.nn.LayerNorm(16), torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 50)

    def forward(self, ids):
        b, n = ids.shape
        h = self.emb(ids) + self.pos(torch.arange(n, device=ids.device))
        x = self.ln(h)
        q = self.q(x).view(b, n, 4, 4).transpose(1, 2)
        k, v = (t.reshape(b, n, 2, 4).transpose(1, 2) for t in self.kv(x).split(8, -1))
        if self.masking == "causal":
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=(ids % 5 != 0)[:, None, None, :], enable_gqa=True)
        logits = self.head(h + a.transpose(1, 2).reshape(b, n, 16))
        return F.cross_entropy(logits.view(-1, 50), ids.view(-1)), logits[:, -1].argmax(-1)


@pytest.mark.parametrize("masking", ["causal", "key_mask"])
def test_attention_training_step_over_variable_lengths(mode, masking):
    lengths = [5, 7, 6, 12, 9, 3]
    traced = _train_over_lengths(lambda: _HeadsLM(masking), lengths, low_id=1)
    assert traced == 2 * _lengths_in(lengths) == 6


class _CachedDecoder(torch.nn.Module):
    """A decoder whose key/value cache grows by one position per call (torch.cat)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb, self.pos = torch.nn.Embedding(40, 16), torch.nn.Embedding(128, 16)
        self.qkv, self.head = torch.nn.Linear(16, 48), torch.nn.Linear(16, 40)

    def forward(self, ids, past_k, past_v):
        start, n = past_k.shape[1], ids.shape[1]
        h = self.emb(ids) + self.pos(torch.arange(start, start + n, device=ids.device))
        q, k, v = self.qkv(h).split(16, -1)
        k, v = torch.cat([past_k, k], 1), torch.cat([past_v, v], 1)
        attn = ((q @ k.transpose(1, 2)) / 4.0).softmax(-1)
        return self.head(attn @ v + h)[:, -1], k, v


def _decode(model, steps, device):
    ids = torch.tensor([[1, 2, 3]], device=device)
    k = v = torch.zeros(1, 0, 16, device=device)
    logits, k, v = model(ids, k, v)
    tokens = []
    for _ in range(steps):
        ids = logits.argmax(-1, keepdim=True)
        tokens.append(int(ids))
        logits, k, v = model(ids, k, v)
    return tokens


def test_kv_cache_decoding_compiles_log_n_programs(mode):
    cpu, tpu = _CachedDecoder().eval(), _CachedDecoder().to("tpu").eval()
    compiled = torch.compile(tpu, backend="tpu", dynamic=True)
    steps = 40
    traced = _traced()
    with torch.no_grad():
        assert _decode(compiled, steps, "tpu") == _decode(cpu, steps, "cpu")
    # the prompt (an empty cache: a static graph), then cache lengths 3..42 in buckets 4..64
    assert _traced() - traced == 1 + _lengths_in(range(3, 3 + steps)) == 6


def test_mark_dynamic_and_custom_buckets(mode):
    def f(x):
        return x.softmax(0), x.mean(0)

    compiled = torch.compile(f, backend="tpu")
    buckets.set_buckets([8, 32])
    try:
        lengths = [3, 8, 20, 32, 33, 35]
        traced = _traced()
        for i, n in enumerate(lengths):
            x = _data(n, 4, seed=i)
            xt = x.to("tpu")
            torch._dynamo.mark_dynamic(xt, 0)
            _assert_like_cpu(compiled(xt), f, x)
        # buckets 8 and 32; lengths above the largest bucket run at their own size
        assert _traced() - traced == 2 + 2
    finally:
        buckets.set_buckets(None)


def test_random_ops_run_at_exact_sizes_and_say_why(mode, monkeypatch, capfd):
    # Dropout's stream depends on the element count: padding would change which elements drop.
    monkeypatch.setenv("TORCH_TPU_LOG", "recompile")

    def f(x):
        return F.dropout(x, 0.5, training=True) * 2

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    lengths = [5, 6, 7]
    traced = _traced()
    for n in lengths:
        out = compiled(torch.ones(n, 3, device="tpu")).cpu()
        assert out.shape == (n, 3) and set(out.unique().tolist()) <= {0.0, 4.0}
    assert _traced() - traced == len(lengths)
    assert "not bucketed: aten.native_dropout.default draws random numbers" in capfd.readouterr().err


def test_in_place_updates_of_padded_inputs_are_written_back(mode):
    def f(x, y):
        x.add_(1)
        return (x * y).sum(0)

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    for n in (3, 5, 6):
        x, y = _data(n, 4, seed=n), _data(n, 4, seed=n + 1)
        xt, x64 = x.to("tpu"), x.double()
        assert_within_cpu_error(compiled(xt, y.to("tpu")), f(x, y), f(x64, y.double()), floor=1e-6, rtol=1e-6)
        assert_close(xt, x)


def test_buckets_can_be_turned_off(mode, monkeypatch):
    monkeypatch.setenv("TORCH_TPU_COMPILE_BUCKETS", "0")
    compiled = torch.compile(lambda x: x.mean(0), backend="tpu", dynamic=True)
    lengths = [3, 4, 5]
    traced = _traced()
    for n in lengths:
        x = _data(n, 2, seed=n)
        assert_close(compiled(x.to("tpu")), x.mean(0))
    assert _traced() - traced == len(lengths)


def test_default_compile_buckets_after_the_first_new_length(mode):
    # Without dynamic=True Dynamo compiles the first length statically and the second one as a
    # dynamic graph (automatic dynamic): from then on one program per bucket.
    def f(x):
        return x.softmax(1).sum(1)

    compiled = torch.compile(f, backend="tpu")
    lengths = [5, 6, 7, 9, 11, 6]
    traced = _traced()
    for i, n in enumerate(lengths):
        x = _data(3, n, seed=i)
        _assert_like_cpu(compiled(x.to("tpu")), f, x)
    assert _traced() - traced == 1 + _lengths_in(lengths[1:]) == 3
