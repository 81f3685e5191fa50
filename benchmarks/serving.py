"""Serving benchmark: vLLM on tpu (torch_tpu.vllm) vs the same plugin on device cpu (CPU eager PyTorch, the
baseline) vs Hugging Face `generate` on tpu, one request at a time.

A fixed request set: --prompts prompts (token ids cut from a fixed corpus, lengths 4 .. 51 tokens) of a
tiny random-weight Llama written to a temporary folder (tests/serving/tiny_models.make_model), each
generating --max-tokens greedy tokens (end-of-sequence ignored). All requests arrive at once, at t0.
Each engine runs in a child process of its own (vLLM keeps process-wide state):

- vllm-tpu: vllm.LLM on device tpu in --mode (default strict); LLM() includes the runner's warm-up over
  the fixed-shape buckets, then compile_cache_stats() is reset, so "programs" counts what serving added.
- vllm-tpu-async (not in the default set): the same with vLLM's async scheduling (the engine schedules step
  N+1 while step N runs; off by default on the CPU plugins), to measure what it brings.
- vllm-tpu-no-graphs (not in the default set): vllm-tpu without step graphs (TORCH_TPU_VLLM_STEP_GRAPHS=0:
  the forward runs vLLM's model code every step in the mode's eager path), to measure what they bring.
- vllm-cpu: the same plugin with TORCH_TPU_VLLM_DEVICE=cpu (vLLM's CPU model runner, eager PyTorch).
- hf-tpu: transformers generate on tpu, batch 1, the requests one after the other (one untimed generate
  first, as its warm-up); "programs" counts what the timed requests added (its decode shapes grow with
  the sequence, so it keeps compiling).

vLLM engines are driven through LLMEngine.add_request / step() with DELTA outputs, each token stamped
when step() returns it. Reported: output tokens/s over the whole set, time to first token (from t0, so it
includes queueing), inter-token latency (mean gap between a request's consecutive tokens), and ratios
against vllm-cpu measured in the same run (no absolute-time thresholds anywhere).

    python benchmarks/serving.py                               # 64 prompts x 128 tokens
    python benchmarks/serving.py --prompts 16 --max-tokens 32  # a quick run
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "serving"))

ENGINES = ("vllm-tpu", "vllm-tpu-async", "vllm-tpu-no-graphs", "vllm-cpu", "hf-tpu")
DEFAULT_ENGINES = ("vllm-tpu", "vllm-cpu", "hf-tpu")
BASELINE = "vllm-cpu"


def build_prompts(folder, count):
    """count prompts of token ids: windows of the tokenized corpus, 4 .. 51 tokens long."""
    import tiny_models
    import transformers as tf

    tok = tf.AutoTokenizer.from_pretrained(folder)
    ids = tok(" ".join(tiny_models.CORPUS[:30])).input_ids
    prompts = []
    for i in range(count):
        length = 4 + (i * 13) % 48
        start = (i * 7) % (len(ids) - length)
        prompts.append(ids[start:start + length])
    return prompts


def default_max_model_len(prompts, max_tokens):
    """The smallest power of two that holds the longest prompt and its new tokens."""
    need = max(len(x) for x in prompts) + max_tokens + 1
    return 1 << (need - 1).bit_length()


def kv_cache_bytes(folder, prompts, max_tokens, max_model_len, block_size=16):
    """KV-cache bytes for every request's blocks at once (+25 %, and one longest request, the least vLLM
    accepts), float32.

    Sized to the workload, the same for every engine (Strict mode donates the cache's buffer to its
    writes, so its size no longer sets a step's cost; before donation every write copied the cache)."""
    import transformers as tf

    c = tf.AutoConfig.from_pretrained(folder)
    head = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    per_block = c.num_hidden_layers * c.num_key_value_heads * head * 2 * 4 * block_size
    blocks = sum(-(-(len(p) + max_tokens) // block_size) for p in prompts)
    return (blocks + blocks // 4 + -(-max_model_len // block_size) + 1) * per_block


# --- children ----------------------------------------------------------------------------------------

def _vllm_child(args, prompts):
    import torch_tpu.device as tpu_device
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import RequestOutputKind

    on_tpu = os.environ.get("TORCH_TPU_VLLM_DEVICE", "tpu") == "tpu"
    t = time.perf_counter()
    llm = LLM(model=args.model, dtype="float32", max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
              max_num_batched_tokens=args.max_num_batched_tokens, kv_cache_memory_bytes=args.kv_cache_bytes,
              enforce_eager=True, seed=0)
    startup = time.perf_counter() - t
    engine = llm.llm_engine
    if on_tpu:
        tpu_device.reset_compile_cache_stats()
    params = SamplingParams(temperature=0, max_tokens=args.max_tokens, ignore_eos=True,
                            output_kind=RequestOutputKind.DELTA)
    stamps = {str(i): [] for i in range(len(prompts))}
    tokens = {str(i): [] for i in range(len(prompts))}
    t0 = time.perf_counter()
    for i, ids in enumerate(prompts):
        engine.add_request(str(i), {"prompt_token_ids": ids}, params)
    while engine.has_unfinished_requests():
        outs = engine.step()
        now = time.perf_counter()
        for o in outs:
            new = list(o.outputs[0].token_ids)
            tokens[o.request_id].extend(new)
            stamps[o.request_id].extend([now] * len(new))
    result = {"t0": t0, "stamps": [stamps[str(i)] for i in range(len(prompts))],
              "tokens": [tokens[str(i)] for i in range(len(prompts))], "startup_s": startup,
              "async": engine.vllm_config.scheduler_config.async_scheduling}
    if on_tpu:
        stats = tpu_device.compile_cache_stats()
        result.update(programs=stats["memory"]["misses"], compiles=stats["compiles"])
    return result


def _hf_child(args, prompts):
    import torch
    import torch_tpu.device as tpu_device
    import transformers as tf

    class Stamps(tf.generation.streamers.BaseStreamer):
        def __init__(self):
            self.times, self.tokens, self.prompt_seen = [], [], False

        def put(self, value):
            ids = value.reshape(-1).tolist()  # reads the token back: the stamp is when it exists
            if not self.prompt_seen:  # generate first puts the prompt
                self.prompt_seen = True
                return
            self.tokens.extend(ids)
            self.times.extend([time.perf_counter()] * len(ids))

        def end(self):
            pass

    t = time.perf_counter()
    model = tf.AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).to("tpu").eval()
    n = args.max_tokens
    gen = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=model.config.pad_token_id)
    with torch.no_grad():
        model.generate(torch.tensor([prompts[0]], device="tpu"), **gen)  # warm-up
    startup = time.perf_counter() - t
    tpu_device.reset_compile_cache_stats()
    stamps, tokens = [], []
    t0 = time.perf_counter()
    with torch.no_grad():
        for ids in prompts:
            s = Stamps()
            model.generate(torch.tensor([ids], device="tpu"), streamer=s, **gen)
            stamps.append(s.times)
            tokens.append(s.tokens)
    stats = tpu_device.compile_cache_stats()
    return {"t0": t0, "stamps": stamps, "tokens": tokens, "startup_s": startup,
            "programs": stats["memory"]["misses"], "compiles": stats["compiles"]}


def child_main(args):
    with open(args.prompts_file) as f:
        prompts = json.load(f)
    result = _hf_child(args, prompts) if args.child == "hf-tpu" else _vllm_child(args, prompts)
    with open(args.out, "w") as f:
        json.dump(result, f)


# --- parent ------------------------------------------------------------------------------------------

def summarize(result):
    t0, stamps = result["t0"], result["stamps"]
    total = sum(len(s) for s in stamps)
    end = max(s[-1] for s in stamps if s)
    ttft = [s[0] - t0 for s in stamps if s]
    gaps = [b - a for s in stamps for a, b in zip(s, s[1:])]
    return {"tok_s": total / (end - t0), "ttft_s": statistics.mean(ttft),
            "itl_ms": 1e3 * statistics.mean(gaps) if gaps else float("nan"), "wall_s": end - t0,
            "tokens": total}


def run_engine(engine, args, folder, prompts_file, workdir):
    out = os.path.join(workdir, f"{engine}.json")
    env = dict(os.environ, VLLM_ENABLE_V1_MULTIPROCESSING="0", TORCH_TPU_EAGER_MODE=args.mode,
               TORCH_TPU_VLLM_DEVICE="cpu" if engine == "vllm-cpu" else "tpu")
    if engine == "vllm-tpu-async":
        env["TORCH_TPU_VLLM_ASYNC_SCHEDULING"] = "1"
    if engine == "vllm-tpu-no-graphs":
        env["TORCH_TPU_VLLM_STEP_GRAPHS"] = "0"
    cmd = [sys.executable, os.path.abspath(__file__), "--child", engine, "--model", folder,
           "--prompts-file", prompts_file, "--out", out, "--max-tokens", str(args.max_tokens),
           "--max-model-len", str(args.max_model_len), "--max-num-seqs", str(args.max_num_seqs),
           "--max-num-batched-tokens", str(args.max_num_batched_tokens), "--kv-cache-bytes", str(args.kv_cache_bytes)]
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-6000:])
        raise SystemExit(f"{engine} failed (exit {proc.returncode})")
    with open(out) as f:
        result = json.load(f)
    result["process_s"] = time.perf_counter() - t
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--engines", default=",".join(DEFAULT_ENGINES), help=f"comma-separated subset of {ENGINES}")
    p.add_argument("--mode", default="strict", help="TORCH_TPU_EAGER_MODE of the tpu engines")
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--max-num-batched-tokens", type=int, default=512)
    p.add_argument("--max-model-len", type=int, default=0, help="0: the smallest power of two that fits")
    p.add_argument("--kv-cache-mib", type=float, default=0,
                   help="0: what the request set needs, with a quarter to spare (see kv_cache_bytes)")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per engine process")
    p.add_argument("--json", help="also write the summary here")
    # child-only
    p.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--prompts-file", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--kv-cache-bytes", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child_main(args)

    engines = [e for e in args.engines.split(",") if e]
    unknown = set(engines) - set(ENGINES)
    if unknown:
        raise SystemExit(f"unknown engines {sorted(unknown)}; choose from {ENGINES}")
    import tiny_models

    with tempfile.TemporaryDirectory(prefix="serving-bench-") as workdir:
        folder = tiny_models.make_model("llama", os.path.join(workdir, "llama"))
        prompts = build_prompts(folder, args.prompts)
        if not args.max_model_len:
            args.max_model_len = default_max_model_len(prompts, args.max_tokens)
        args.kv_cache_bytes = (int(args.kv_cache_mib * (1 << 20)) if args.kv_cache_mib else
                               kv_cache_bytes(folder, prompts, args.max_tokens, args.max_model_len))
        prompts_file = os.path.join(workdir, "prompts.json")
        with open(prompts_file, "w") as f:
            json.dump(prompts, f)
        print(f"{len(prompts)} prompts ({min(map(len, prompts))}-{max(map(len, prompts))} tokens) x "
              f"{args.max_tokens} new tokens; mode {args.mode}; max_num_seqs {args.max_num_seqs}, "
              f"max_num_batched_tokens {args.max_num_batched_tokens}, max_model_len {args.max_model_len}, "
              f"KV cache {args.kv_cache_bytes / (1 << 20):.1f} MiB",
              flush=True)
        results = {}
        for engine in engines:
            results[engine] = run_engine(engine, args, folder, prompts_file, workdir)
            print(f"  {engine}: done in {results[engine]['process_s']:.0f} s", flush=True)

    summary = {e: {**summarize(r), **{k: r.get(k) for k in ("programs", "compiles", "startup_s", "async")}}
               for e, r in results.items()}
    ref_tokens = results[BASELINE]["tokens"] if BASELINE in results else None
    for e, r in results.items():
        summary[e]["tokens_equal_baseline"] = (None if ref_tokens is None else
                                               sum(a == b for a, b in zip(r["tokens"], ref_tokens)))
    base = summary.get(BASELINE)

    def ratio(e, key, invert=False):
        if base is None:
            return "-"
        x = base[key] / summary[e][key] if invert else summary[e][key] / base[key]
        return f"{x:.2f}x"

    head = (f"{'engine':<18} {'out tok/s':>10} {'vs cpu':>7} {'TTFT s':>8} {'vs cpu':>7} {'ITL ms':>8} "
            f"{'vs cpu':>7} {'startup s':>9} {'programs':>8} {'compiled':>8} {'= cpu':>6}")
    print(head)
    print("-" * len(head))
    for e, s in summary.items():
        programs = "-" if s["programs"] is None else str(s["programs"])
        compiled = "-" if s["compiles"] is None else str(s["compiles"])
        equal = "-" if s["tokens_equal_baseline"] is None else f"{s['tokens_equal_baseline']}/{len(prompts)}"
        print(f"{e:<18} {s['tok_s']:>10.1f} {ratio(e, 'tok_s'):>7} {s['ttft_s']:>8.3f} {ratio(e, 'ttft_s'):>7} "
              f"{s['itl_ms']:>8.2f} {ratio(e, 'itl_ms'):>7} {s['startup_s']:>9.1f} {programs:>8} {compiled:>8} {equal:>6}")
    print("vs cpu: ratio to vllm-cpu in this run (tok/s: higher is better; TTFT, ITL: lower is better). "
          "programs: programs the timed part added (tpu engines; compiled: of them, compiled by XLA rather than "
          "loaded from the persistent cache). = cpu: requests whose tokens equal vllm-cpu's.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
