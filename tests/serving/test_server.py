"""`vllm serve` on device tpu (torch_tpu.vllm) answering the `openai` client: completions and chat greedy
equal Hugging Face greedy (float64, CPU), streaming, a client leaving mid-stream, bad requests, and 64
concurrent requests on a KV cache too small for them (vLLM must preempt).

One server process for the module, killed (with its engine process) in the fixture's finalizer; every
wait has a deadline and every request a timeout.
"""
import concurrent.futures
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("vllm")  # not installed: skipped; a broken install fails collection
openai = pytest.importorskip("openai")

sys.path.insert(0, os.path.dirname(__file__))
import tiny_models  # noqa: E402
from vllm_greedy import LLM_ARGS  # noqa: E402

MAX_TOKENS = 12
# 32 blocks of 16 tokens (tiny Llama, float32: 2 layers x K and V x 2 kv heads x 16 x 4 bytes = 512 bytes a
# token): one max_model_len request fits (16 blocks), 64 concurrent ones (2-3 blocks each) do not.
KV_BYTES = 32 * 16 * 512
STARTUP_S = 600  # engine start + first compiles in Strict mode on 2 CPU cores
REQUEST_S = 300


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def _metric(base, name):
    """Sum of a Prometheus counter or gauge over its labels (vLLM's /metrics)."""
    text = _get(base + "/metrics")[1]
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("server")
    folder = tiny_models.make_model("llama", str(tmp / "llama"))
    port = _free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", folder, "--host", "127.0.0.1",
           "--port", str(port), "--dtype", LLM_ARGS["dtype"], "--max-model-len", str(LLM_ARGS["max_model_len"]),
           "--kv-cache-memory-bytes", str(KV_BYTES), "--max-num-seqs", "64", "--enforce-eager",
           "--seed", str(LLM_ARGS["seed"])]
    env = dict(os.environ, TORCH_TPU_EAGER_MODE="strict", TORCH_TPU_VLLM_DEVICE="tpu")
    log = open(tmp / "server.log", "w")
    # A session of its own: the finalizer kills the API server and the engine process it spawned together.
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def tail():
        log.flush()
        return (tmp / "server.log").read_text()[-6000:]

    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            assert proc.poll() is None, f"vllm serve exited with {proc.returncode}:\n{tail()}"
            assert time.monotonic() < deadline, f"vllm serve not healthy after {STARTUP_S} s:\n{tail()}"
            try:
                if _get(base + "/health", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(2)
        client = openai.OpenAI(base_url=base + "/v1", api_key="EMPTY", timeout=REQUEST_S, max_retries=0)
        yield dict(folder=folder, base=base, client=client, tail=tail)
    finally:
        # SIGTERM lets vLLM shut down; SIGKILL then takes whatever of the session is left (its engine process).
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        log.close()


def _complete(server, prompt, max_tokens=MAX_TOKENS, **kw):
    return server["client"].completions.create(
        model=server["folder"], prompt=prompt, max_tokens=max_tokens, temperature=0,
        extra_body={"ignore_eos": True, "return_token_ids": True}, **kw)


def test_completions_greedy_equals_hf(server):
    out = _complete(server, tiny_models.PROMPTS)  # one request, a batch of prompts
    tokens = [c.token_ids for c in sorted(out.choices, key=lambda c: c.index)]
    assert tokens == tiny_models.hf_greedy(server["folder"], tiny_models.PROMPTS, MAX_TOKENS)
    assert {c.finish_reason for c in out.choices} == {"length"}


def test_chat_greedy_equals_hf(server):
    from transformers import AutoTokenizer

    messages = [{"role": "user", "content": tiny_models.PROMPTS[0]}]
    out = server["client"].chat.completions.create(
        model=server["folder"], messages=messages, max_tokens=MAX_TOKENS, temperature=0,
        extra_body={"ignore_eos": True, "return_token_ids": True})
    templated = AutoTokenizer.from_pretrained(server["folder"]).apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True)
    assert out.choices[0].token_ids == tiny_models.hf_greedy(server["folder"], [templated], MAX_TOKENS)[0]


def test_streaming_concatenates_to_the_full_text(server):
    prompt = tiny_models.PROMPTS[2]
    full = _complete(server, prompt).choices[0].text
    chunks = [c.choices[0].text for c in _complete(server, prompt, stream=True) if c.choices]
    assert len(chunks) > 1 and "".join(chunks) == full

    messages = [{"role": "user", "content": prompt}]
    kw = dict(model=server["folder"], messages=messages, max_tokens=MAX_TOKENS, temperature=0,
              extra_body={"ignore_eos": True})
    full = server["client"].chat.completions.create(**kw).choices[0].message.content
    chunks = [c.choices[0].delta.content or "" for c in server["client"].chat.completions.create(stream=True, **kw)
              if c.choices]
    assert len([c for c in chunks if c]) > 1 and "".join(chunks) == full


def test_client_leaving_mid_stream_does_not_break_the_server(server):
    base = server["base"]
    generated = _metric(base, "vllm:generation_tokens_total")
    stream = _complete(server, tiny_models.PROMPTS[0], max_tokens=200, stream=True)
    for i, _ in enumerate(stream):
        if i == 2:
            break
    stream.close()  # drops the connection with the request still generating
    deadline = time.monotonic() + REQUEST_S
    while _metric(base, "vllm:num_requests_running") + _metric(base, "vllm:num_requests_waiting") > 0:
        assert time.monotonic() < deadline, server["tail"]()
        time.sleep(1)
    # vLLM aborted it: it stopped well before its 200 tokens.
    assert _metric(base, "vllm:generation_tokens_total") - generated < 200
    test_completions_greedy_equals_hf(server)  # the next requests still answer, correctly
    assert _get(base + "/health")[0] == 200


def test_bad_requests_get_vllm_errors(server):
    client, model = server["client"], server["folder"]
    with pytest.raises(openai.BadRequestError, match="maximum context length is 256 tokens"):
        client.completions.create(model=model, prompt="the quick brown fox " * 100, max_tokens=4)
    with pytest.raises(openai.BadRequestError, match="temperature must be non-negative"):
        client.completions.create(model=model, prompt="a", max_tokens=4, temperature=-1)
    with pytest.raises(openai.BadRequestError, match=re.escape("top_p must be in (0, 1]")):
        client.completions.create(model=model, prompt="a", max_tokens=4, top_p=0)
    test_completions_greedy_equals_hf(server)  # and keeps serving


def test_64_concurrent_requests_with_preemption(server):
    # 64 prompts (each of PROMPTS with a corpus word appended, so they share prefixes), 24 tokens each:
    # 2-3 KV blocks a request against 31 usable blocks, so the scheduler must preempt and recompute.
    words = list(dict.fromkeys(" ".join(tiny_models.CORPUS[:6]).split()))
    prompts = [f"{tiny_models.PROMPTS[i % 6]} {words[i // 6]}" for i in range(64)]
    assert len(set(prompts)) == 64
    before = _metric(server["base"], "vllm:num_preemptions_total")
    with concurrent.futures.ThreadPoolExecutor(64) as pool:
        outs = list(pool.map(lambda p: _complete(server, p, max_tokens=24).choices[0].token_ids, prompts))
    assert outs == tiny_models.hf_greedy(server["folder"], prompts, 24)
    assert _metric(server["base"], "vllm:num_preemptions_total") > before
