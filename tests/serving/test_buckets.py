"""Fixed-shape serving steps (torch_tpu.vllm.buckets, TpuModelRunner): the bucket arithmetic and warm-up
plan, and, end to end, that after vLLM's warm-up on tpu (Strict and Fused mode) serving batches of other
sizes and prompt lengths compiles no new program while the greedy tokens still equal Hugging Face greedy.
"""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("vllm")  # not installed: skipped; a broken install fails collection

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
import buckets_child  # noqa: E402  (its SAMPLED table; it imports vllm only in main())
import tiny_models  # noqa: E402

from torch_tpu.vllm import buckets  # noqa: E402


# (max_tokens, max_reqs, block_size, max_model_len, table_width) the warm-up plans are checked over
PLAN_CONFIGS = [(32, 8, 16, 128, 8), (64, 16, 16, 128, 8), (100, 4, 16, 100, 7), (24, 8, 4, 40, 10)]


def test_bucket_padding():
    assert [buckets.bucket(n) for n in (0, 1, 2, 3, 5, 8, 9)] == [1, 1, 2, 4, 8, 8, 16]
    assert [buckets.padded(n, 64, 8) for n in (1, 7, 8, 9, 33, 64)] == [8, 8, 8, 16, 64, 64]
    assert buckets.padded(65, 100, 8) == 100  # capped at the configured maximum
    assert buckets.sizes(64, 8) == [8, 16, 32, 64]
    assert buckets.sizes(100, 8) == [8, 16, 32, 64, 100]
    assert buckets.sizes(5, 8) == [5]
    for maximum, minimum in [(64, 8), (100, 8), (5, 8), (48, 1)]:
        assert buckets.sizes(maximum, minimum) == sorted({buckets.padded(n, maximum, minimum)
                                                          for n in range(1, maximum + 1)})
    # width: blocks covering the longest sequence, a power of two, at most the table's width
    assert [buckets.width(s, 16, 8) for s in (1, 16, 17, 33, 65, 127)] == [1, 1, 2, 4, 8, 8]
    assert buckets.width(100, 16, 6) == 6
    assert buckets.widths(128, 16, 8) == [1, 2, 4, 8]


@pytest.mark.parametrize("max_tokens,max_reqs,block_size,max_model_len,table_width", PLAN_CONFIGS)
def test_warm_up_plan_reaches_every_serving_shape(max_tokens, max_reqs, block_size, max_model_len, table_width):
    """Every (token bucket, width) and (token bucket, request bucket) pair of any step the scheduler can
    form (n tokens over r requests, longest sequence L: r <= n <= r * L, L < max_model_len) is reached
    by some warm-up step, and every warm-up step is such a step."""
    def pairs(n, r, seq_len):
        big_n = buckets.padded(n, max_tokens, buckets.MIN_TOKENS)
        return {("w", big_n, buckets.width(seq_len, block_size, table_width)),
                ("r", big_n, buckets.padded(r, max_reqs, buckets.MIN_REQS))}

    plan = buckets.warm_up_plan(max_tokens, max_reqs, block_size, max_model_len, table_width)
    warmed = set()
    for n, r, seq_len in plan:
        assert 1 <= r <= min(n, max_reqs) and n <= min(max_tokens, r * seq_len) and seq_len < max_model_len
        warmed |= pairs(n, r, seq_len)
    needed = set()
    for seq_len in range(1, max_model_len):
        for r in range(1, max_reqs + 1):
            for n in range(r, min(max_tokens, r * seq_len) + 1):
                needed |= pairs(n, r, seq_len)
    assert needed <= warmed
    assert len(plan) == len(set(plan))


@pytest.mark.parametrize("max_tokens,max_reqs,block_size,max_model_len,table_width", PLAN_CONFIGS)
def test_whole_step_plan_reaches_every_serving_triple(max_tokens, max_reqs, block_size, max_model_len,
                                                      table_width):
    """Fused mode keys a step's graph by (token bucket, request bucket, width) at once: the whole-step
    plan reaches every triple a scheduler step can form, and only such steps."""
    def triple(n, r, seq_len):
        return (buckets.padded(n, max_tokens, buckets.MIN_TOKENS), buckets.padded(r, max_reqs, buckets.MIN_REQS),
                buckets.width(seq_len, block_size, table_width))

    plan = buckets.warm_up_plan(max_tokens, max_reqs, block_size, max_model_len, table_width, whole_steps=True)
    for n, r, seq_len in plan:
        assert 1 <= r <= min(n, max_reqs) and n <= min(max_tokens, r * seq_len) and seq_len < max_model_len
    needed = {triple(n, r, seq_len) for seq_len in range(1, max_model_len) for r in range(1, max_reqs + 1)
              for n in range(r, min(max_tokens, r * seq_len) + 1)}
    assert {triple(*s) for s in plan} == needed
    assert len(plan) == len(needed)


LONG = " ".join(tiny_models.CORPUS[:5])  # ~40 tokens: a chunked prefill at 32 tokens per step


def _batches():
    prompts = tiny_models.PROMPTS
    return [
        [[p, 4 + 2 * i] for i, p in enumerate(prompts)],
        [[prompts[1], 9]],
        [[LONG, 12], [prompts[0], 3], [prompts[5], 7]],
        [[p, 10 - i] for i, p in enumerate(prompts + [LONG, "the"])],
    ]


def _serve(tmp_path, folder, batches, mode, scheduling, *args, **env):
    """buckets_child.py's result: tokens per batch and the programs serving added after warm-up."""
    batches_file = tmp_path / "batches.json"
    batches_file.write_text(json.dumps(batches))
    env = dict(os.environ, TORCH_TPU_EAGER_MODE=mode, TORCH_TPU_VLLM_DEVICE="tpu",
               VLLM_ENABLE_V1_MULTIPROCESSING="0", **env)
    proc = subprocess.run([sys.executable, os.path.join(HERE, "buckets_child.py"), folder, str(batches_file),
                           scheduling, *args], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads([l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1][len("RESULT "):])


@pytest.mark.parametrize("scheduling", ["sync", "async"])
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_no_compiles_after_warm_up_and_greedy_equals_hf(tmp_path, mode, scheduling):
    """Batches of 6, 1, 3 and 8 requests with different prompt lengths and max_tokens (so the decode
    batch shrinks as requests finish), long prompts over chunked prefill: 0 new programs after warm-up,
    and every request's tokens equal HF greedy. Strict: one program per op, warmed over bucket pairs;
    Fused: one graph per step, warmed over every (tokens, requests, width) triple. Sync (the default
    on the CPU plugins) reads every step's tokens back before the next; async scheduling (vLLM's default)
    takes carried-over requests' last tokens from the previous step on the device."""
    folder = tiny_models.make_model("llama", str(tmp_path / "llama"))
    batches = _batches()
    result = _serve(tmp_path, folder, batches, mode, scheduling)

    unique = sorted({p for batch in batches for p, _ in batch})
    longest = max(m for batch in batches for _, m in batch)
    reference = dict(zip(unique, tiny_models.hf_greedy(folder, unique, longest)))
    for batch, got in zip(batches, result["tokens"]):
        assert got == [reference[p][:m] for p, m in batch]
    assert result["async"] == (scheduling == "async")
    assert result["new_programs"] == 0, result
    # The forward of a serving step is a replayed step graph once its bucket's captures agreed (step_graph.py).
    assert result["step_graphs"]["replays"] > 0, result["step_graphs"]


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_sampling_runs_at_the_request_bucket(tmp_path, mode):
    """The same batches with seeded sampling (temperature, top-k, top-p and min-p, mixed with greedy in one
    batch): the sampler runs on the padded request rows with its state padded too, so Strict compiles no
    program after warm-up; every request's tokens equal the unbucketed runner's (TORCH_TPU_VLLM_BUCKETS=0:
    vLLM's own preparation, the sampler on the real rows), as a seeded request draws from its own
    generator whatever rows surround it."""
    folder = tiny_models.make_model("llama", str(tmp_path / "llama"))
    prompts = tiny_models.PROMPTS
    batches = _batches() + [[[prompts[2], 11], [prompts[3], 13]]]  # greedy, and greedy with penalties
    bucketed = _serve(tmp_path, folder, batches, mode, "sync", "sampled")
    plain = _serve(tmp_path, folder, batches, "strict", "sync", "sampled", TORCH_TPU_VLLM_BUCKETS="0")
    assert bucketed["tokens"] == plain["tokens"]
    unique = sorted({p for batch in batches for p, _ in batch})
    reference = dict(zip(unique, tiny_models.hf_greedy(folder, unique, max(m for b in batches for _, m in b))))
    expected = [[reference[p][:m] for p, m in batch] for batch in batches]
    n = len(buckets_child.SAMPLED)
    pairs = [(got, want, i % n) for g, e in zip(bucketed["tokens"], expected)
             for i, (got, want) in enumerate(zip(g, e))]
    assert all(got == want for got, want, kind in pairs if kind == 0)  # the greedy requests of a mixed batch
    assert any(got != want for got, want, kind in pairs if kind == 1)  # greedy with penalties differs
    assert any(got != want for got, want, kind in pairs if kind > 1)  # and the others did sample
    if mode == "strict":
        assert bucketed["new_programs"] == 0, bucketed
