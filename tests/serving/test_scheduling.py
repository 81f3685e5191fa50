"""vLLM's scheduling features on device tpu (torch_tpu.vllm), one engine per process (vllm_scheduling.py):
n-gram speculative decoding, prefix caching and chunked prefill each give Hugging Face's float64 greedy
tokens; plus torch_tpu's rejection-sampler kernels against a per-request walk written from vLLM's Triton
kernels.
"""
import os
import sys

import pytest
import torch

pytest.importorskip("vllm")  # not installed: skipped; a broken install fails collection

sys.path.insert(0, os.path.dirname(__file__))
import tiny_models  # noqa: E402
import vllm_scheduling as child  # noqa: E402  (its constants; it imports vllm only in its features)
from vllm_greedy import run_child  # noqa: E402

from torch_tpu.vllm import kernels  # noqa: E402

BLOCK_SIZE = 16  # the platform's KV block size


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return tiny_models.make_model("llama", str(tmp_path_factory.mktemp("llama")))


def test_ngram_speculative_decoding_equals_greedy(tmp_path):
    folder = tiny_models.make_model("llama", str(tmp_path / "cycles"), edit=tiny_models.cycle_tokens)
    result = run_child("vllm_scheduling.py", "spec", folder)
    assert result["tokens"] == tiny_models.hf_greedy(folder, child.SPEC_PROMPTS, child.MAX_TOKENS)
    c = result["counters"]
    # Drafts were proposed, some accepted, some rejected, and some accepted whole (the bonus token after them).
    assert 0 < c["num_accepted_tokens"] < c["num_draft_tokens"], c
    assert c["num_accepted_tokens_per_pos"][-1] > 0, c


def test_prefix_caching_equals_hf_and_hits(llama):
    result = run_child("vllm_scheduling.py", "prefix", llama)
    assert result["tokens"] == tiny_models.hf_greedy(llama, child.PREFIX_PROMPTS, child.MAX_TOKENS)
    first, second = result["prompt_ids"]
    common = next(i for i, (a, b) in enumerate(zip(first, second)) if a != b)
    # The first request found nothing; the second the full blocks of the prompt prefix they share.
    assert result["cached"][0] == 0
    assert result["cached"][1] == common // BLOCK_SIZE * BLOCK_SIZE > 0


def test_chunked_prefill_equals_hf(llama):
    result = run_child("vllm_scheduling.py", "chunked", llama)
    assert result["tokens"] == tiny_models.hf_greedy(llama, child.CHUNKED_PROMPTS, child.MAX_TOKENS)
    # At most CHUNK tokens a step: the long prompts took several steps (one of them five).
    assert max(result["prompt_lengths"]) > 4 * child.CHUNK


# --- rejection-sampler kernels ------------------------------------------------------------------------------
# The reference: vLLM's Triton kernels as a loop over requests and their draft positions (one Triton
# program per request), on Python lists.

def _walk(n, accept, token, bonus):
    """A request's output row: token(pos) up to and including the first rejected position, bonus if none."""
    row = []
    for pos in range(n):
        row.append(token(pos))
        if not accept(pos):
            return row
    return row + [bonus]


def _reference_greedy(out, cu, draft, argmax, bonus, is_greedy, uniform, rates):
    start = 0
    for r, end in enumerate(cu):
        if is_greedy is None or is_greedy[r]:
            if rates is None:
                row = _walk(end - start, lambda p: draft[start + p] == argmax[start + p],
                            lambda p: argmax[start + p], bonus[r])
            else:
                def ok(p):
                    return uniform[start + p] < rates[p] and draft[start + p] >= 0
                row = _walk(end - start, ok, lambda p: draft[start + p] if ok(p) else argmax[start + p], bonus[r])
            out[r][:len(row)] = row
        start = end
    return out


def _reference_random(out, cu, draft, draft_probs, target_probs, bonus, recovered, uniform, is_greedy, rates):
    start = 0
    for r, end in enumerate(cu):
        if not is_greedy[r]:
            def ok(p):
                t, d = start + p, draft[start + p]
                if d < 0:
                    return False
                if rates is not None:
                    return uniform[t] < rates[p]
                q = 1.0 if draft_probs is None else draft_probs[t][d]
                return q > 0 and target_probs[t][d] / q >= uniform[t]
            row = _walk(end - start, ok, lambda p: draft[start + p] if ok(p) else recovered[start + p], bonus[r])
            out[r][:len(row)] = row
        start = end
    return out


def _reference_recovered(cu, draft, draft_probs, target_probs, inv_q):
    out, start = [], 0
    for r, end in enumerate(cu):
        for t in range(start, end):
            if draft_probs is None:
                prob = [0.0 if v == draft[t] else p for v, p in enumerate(target_probs[t])]
            else:
                prob = [max(p - q, 0.0) for p, q in zip(target_probs[t], draft_probs[t])]
            score = [p * iq for p, iq in zip(prob, inv_q[r])]
            out.append(max(range(len(score)), key=lambda v: (score[v], -v)))  # first maximum
        start = end
    return out


def _case(seed, draft_counts, vocab=11, max_spec_len=3):
    g = torch.Generator().manual_seed(seed)
    cu = torch.tensor(draft_counts).cumsum(0).to(torch.int32)
    n = int(cu[-1])
    target_probs = torch.rand(n, vocab, generator=g).softmax(-1)
    draft_probs = torch.rand(n, vocab, generator=g).softmax(-1)
    argmax = target_probs.argmax(-1)
    # Drafts: half equal to the argmax (accepted under greedy), some padding (-1).
    draft = torch.where(torch.rand(n, generator=g) < 0.5, argmax, torch.randint(0, vocab, (n,), generator=g))
    draft = torch.where(torch.rand(n, generator=g) < 0.1, -1, draft).to(torch.int32)
    return dict(cu=cu, draft=draft, argmax=argmax, target_probs=target_probs, draft_probs=draft_probs,
                bonus=torch.randint(0, vocab, (len(draft_counts), 1), generator=g),
                uniform=torch.rand(n, generator=g, dtype=torch.float64),
                is_greedy=torch.rand(len(draft_counts), generator=g) < 0.5,
                rates=torch.tensor([0.9, 0.6, 0.3]), recovered=torch.randint(0, vocab, (n,), generator=g).to(torch.int32),
                inv_q=torch.rand(len(draft_counts), vocab, generator=g).reciprocal(), max_spec_len=max_spec_len)


CASES = [(0, [3, 0, 2, 3, 1]), (1, [3, 3, 3]), (2, [1]), (3, [0, 0]), (4, [2, 0, 3, 3, 3, 1, 0, 2])]


def _tpu(t):
    return None if t is None else t.to("tpu")


@pytest.mark.parametrize("seed,counts", CASES)
@pytest.mark.parametrize("greedy_rows", ["all", "some"])
@pytest.mark.parametrize("synthetic", [False, True])
def test_rejection_greedy_sample_kernel(seed, counts, greedy_rows, synthetic):
    c = _case(seed, counts)
    is_greedy = None if greedy_rows == "all" else c["is_greedy"]
    rates = c["rates"] if synthetic else None
    out = torch.full((len(counts), c["max_spec_len"] + 1), -1, dtype=torch.int32)
    expected = _reference_greedy(out.tolist(), c["cu"].tolist(), c["draft"].tolist(), c["argmax"].tolist(),
                                 c["bonus"].flatten().tolist(), None if is_greedy is None else is_greedy.tolist(),
                                 c["uniform"].tolist(), None if rates is None else rates.tolist())
    got = out.to("tpu")
    kernels.rejection_greedy_sample_kernel(got, _tpu(c["cu"]), _tpu(c["draft"]), _tpu(c["argmax"]), _tpu(c["bonus"]),
                                           _tpu(is_greedy), c["max_spec_len"], _tpu(c["uniform"]), _tpu(rates),
                                           synthetic)
    assert got.cpu().tolist() == expected


@pytest.mark.parametrize("seed,counts", CASES)
@pytest.mark.parametrize("draft_probs", [False, True])
@pytest.mark.parametrize("synthetic", [False, True])
def test_rejection_random_sample_kernel(seed, counts, draft_probs, synthetic):
    c = _case(seed, counts)
    dp = c["draft_probs"] if draft_probs else None
    rates = c["rates"] if synthetic else None
    out = torch.full((len(counts), c["max_spec_len"] + 1), -1, dtype=torch.int32)
    expected = _reference_random(out.tolist(), c["cu"].tolist(), c["draft"].tolist(),
                                 None if dp is None else dp.tolist(), c["target_probs"].tolist(),
                                 c["bonus"].flatten().tolist(), c["recovered"].tolist(), c["uniform"].tolist(),
                                 c["is_greedy"].tolist(), None if rates is None else rates.tolist())
    got = out.to("tpu")
    kernels.rejection_random_sample_kernel(got, _tpu(c["cu"]), _tpu(c["draft"]), _tpu(dp), _tpu(c["target_probs"]),
                                           _tpu(c["bonus"]), _tpu(c["recovered"]), _tpu(c["uniform"]),
                                           _tpu(c["is_greedy"]), c["max_spec_len"], c["target_probs"].shape[1],
                                           _tpu(rates), dp is None, synthetic)
    assert got.cpu().tolist() == expected


@pytest.mark.parametrize("seed,counts", [case for case in CASES if sum(case[1])])
@pytest.mark.parametrize("draft_probs", [False, True])
def test_sample_recovered_tokens_kernel(seed, counts, draft_probs):
    c = _case(seed, counts)
    dp = c["draft_probs"] if draft_probs else None
    expected = _reference_recovered(c["cu"].tolist(), c["draft"].tolist(), None if dp is None else dp.tolist(),
                                    c["target_probs"].tolist(), c["inv_q"].tolist())
    got = torch.empty(len(expected), dtype=torch.int32, device="tpu")
    kernels.sample_recovered_tokens_kernel(got, _tpu(c["cu"]), _tpu(c["draft"]), _tpu(dp), _tpu(c["target_probs"]),
                                           _tpu(c["inv_q"]), c["target_probs"].shape[1], 8192, dp is None, False)
    assert got.cpu().tolist() == expected


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
def test_expand_kernel(dtype):
    # [a, b, c] over cumulative counts [2, 5, 6] -> [a, a, b, b, b, c]; replace_from -> replace_to; at most
    # MAX_NUM_TOKENS per request; positions past the last request untouched.
    values = torch.tensor([3, 0, 7], dtype=dtype)
    cu = torch.tensor([2, 5, 6], dtype=torch.int32)
    for max_tokens, expected in [(8, [3, 3, 9, 9, 9, 7, -1, -1]), (2, [3, 3, 9, 9, -1, 7, -1, -1])]:
        out = torch.full((8,), -1, dtype=dtype, device="tpu")
        kernels.expand_kernel(out, values.to("tpu"), cu.to("tpu"), 0, 9, max_tokens)
        assert out.cpu().tolist() == torch.tensor(expected, dtype=dtype).tolist()


@pytest.mark.parametrize("env,plugin,expected", [
    (None, ("cpu", "/x/xla_cpu_pjrt.so"), False),  # the CPU plugins: no device time to overlap
    (None, ("libtpu", "/x/libtpu.so"), True),
    (None, ("TORCH_TPU_PJRT_PLUGIN", "/x/pjrt_c_api_cpu_plugin.so"), False),  # an explicit path, by its name
    (None, ("TORCH_TPU_PJRT_PLUGIN", "/x/xla_cuda_plugin.so"), True),
    ("1", ("cpu", "/x/xla_cpu_pjrt.so"), True),
    ("0", ("libtpu", "/x/libtpu.so"), False),
])
def test_async_scheduling_default(monkeypatch, env, plugin, expected):
    """Where the platform keeps vLLM's async scheduling (device tpu): the variable decides, else the plugin."""
    from torch_tpu import _plugins
    from torch_tpu.vllm import platform
    monkeypatch.setattr(platform, "_DEVICE", "tpu")
    monkeypatch.setattr(_plugins, "candidates", lambda: [plugin])
    if env is None:
        monkeypatch.delenv(platform.ASYNC_ENV, raising=False)
    else:
        monkeypatch.setenv(platform.ASYNC_ENV, env)
    assert platform._async_scheduling_pays() is expected


def test_async_scheduling_variable_checked(monkeypatch):
    from torch_tpu.vllm import platform
    monkeypatch.setattr(platform, "_DEVICE", "tpu")
    monkeypatch.setenv(platform.ASYNC_ENV, "yes")
    with pytest.raises(ValueError, match="TORCH_TPU_VLLM_ASYNC_SCHEDULING must be '0' or '1'"):
        platform._async_scheduling_pays()
    monkeypatch.setattr(platform, "_DEVICE", "cpu")  # device cpu: always off, as vLLM's CPU platform
    monkeypatch.setenv(platform.ASYNC_ENV, "1")
    assert platform._async_scheduling_pays() is False

