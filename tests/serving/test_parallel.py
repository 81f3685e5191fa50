"""vLLM tensor parallelism on device tpu (torch_tpu.vllm): tensor_parallel_size=2 over the tpu_dist backend.

vLLM's multiproc executor spawns one worker process per rank (spawn), each on its own tpu device (the XLA
CPU plugin offers several); vLLM's base device communicator runs the all-reduces and all-gathers over the
tensor-parallel group, which tpu_dist stages through host memory across the processes. The engine runs in
its own process group (run_child), killed with its workers whatever happens, under a timeout.
"""
import os
import sys

import pytest

pytest.importorskip("vllm")  # not installed: skipped; a broken install fails collection

sys.path.insert(0, os.path.dirname(__file__))
import tiny_models  # noqa: E402
from vllm_greedy import run_child  # noqa: E402

MAX_TOKENS = 12


def test_tensor_parallel_2_greedy_equals_hf(tmp_path):
    # TP=1 gives these same HF float64 tokens (test_vllm.py), so TP=2 equals TP=1 too.
    folder = tiny_models.make_model("llama", str(tmp_path / "llama"))
    expected = tiny_models.hf_greedy(folder, tiny_models.PROMPTS, MAX_TOKENS)
    result = run_child("vllm_parallel.py", folder, MAX_TOKENS, timeout=600)
    assert result["tokens"] == expected

    ranks = sorted(result["ranks"], key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["world"] == 2 for r in ranks)
    assert [r["device"] for r in ranks] == ["tpu:0", "tpu:1"]
    assert all(r["weights_device"] == r["device"] for r in ranks)
    assert all(r["backend"] == "tpu_dist" for r in ranks)
    assert all(r["collectives"] > 0 for r in ranks)  # the layers' all-reduces ran on tpu_dist
    # Each rank holds half of the heads: (4 query + 2 * 2 key/value heads) * 16 / 2 rows of the fused
    # qkv projection, half of the 64 input columns of the output projection.
    assert all(r["qkv_rows"] == 64 and r["o_cols"] == 32 for r in ranks)
