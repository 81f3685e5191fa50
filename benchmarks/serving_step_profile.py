"""Where a serving step goes: the serving benchmark's workload (benchmarks/serving.py: a tiny random-weight
Llama, 64 prompts, greedy) driven in this process through LLMEngine.step(), and, once every request is
decoding, the mean wall time of a step, the programs a step launches and the device spans of a few steps
(torch.profiler; torch_tpu.profiler.summary). `--device cpu` runs the same plugin on device cpu (CPU eager
PyTorch, the benchmark's baseline): wall time only.

    python benchmarks/serving_step_profile.py --mode strict
    python benchmarks/serving_step_profile.py --device cpu
"""
import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "serving"))
sys.path.insert(0, HERE)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", default="strict", help="TORCH_TPU_EAGER_MODE")
    p.add_argument("--device", default="tpu", choices=("tpu", "cpu"))
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--steps", type=int, default=20, help="timed decode steps")
    p.add_argument("--profiled-steps", type=int, default=10)
    args = p.parse_args()
    os.environ.update(VLLM_ENABLE_V1_MULTIPROCESSING="0", TORCH_TPU_EAGER_MODE=args.mode,
                      TORCH_TPU_VLLM_DEVICE=args.device)
    import serving
    import tiny_models
    import torch
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import RequestOutputKind

    with tempfile.TemporaryDirectory(prefix="serving-profile-") as workdir:
        folder = tiny_models.make_model("llama", os.path.join(workdir, "llama"))
        prompts = serving.build_prompts(folder, args.prompts)
        max_tokens = 128
        max_model_len = serving.default_max_model_len(prompts, max_tokens)
        llm = LLM(model=folder, dtype="float32", max_model_len=max_model_len, max_num_seqs=64,
                  max_num_batched_tokens=512, enforce_eager=True, seed=0,
                  kv_cache_memory_bytes=serving.kv_cache_bytes(folder, prompts, max_tokens, max_model_len))
        engine = llm.llm_engine
        params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True,
                                output_kind=RequestOutputKind.DELTA)
        for i, ids in enumerate(prompts):
            engine.add_request(str(i), {"prompt_token_ids": ids}, params)
        for _ in range(10):  # the prompts' chunked prefill and the first decode steps
            engine.step()
        t = time.perf_counter()
        for _ in range(args.steps):
            engine.step()
        print(f"{args.mode}/{args.device}: {(time.perf_counter() - t) / args.steps * 1e3:.2f} ms per decode step "
              f"({args.prompts} requests)")
        if args.device != "tpu":
            return
        from torch.profiler import ProfilerActivity, profile

        from torch_tpu import _C
        from torch_tpu import profiler as tpu_profiler

        before = torch.tpu.executor_stats(), _C._fused_stats()
        for _ in range(args.steps):
            engine.step()
        after = torch.tpu.executor_stats(), _C._fused_stats()
        counts = {k: (a[k] - b[k]) / args.steps for b, a in zip(before, after)
                  for k in ("ops", "compiled_graphs", "flushes", "replays", "compiles") if k in a}
        print("per step:", ", ".join(f"{k} {v:g}" for k, v in counts.items()))
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            for _ in range(args.profiled_steps):
                engine.step()
        trace = os.path.join(workdir, "trace.json")
        prof.export_chrome_trace(trace)
        print(f"device spans of {args.profiled_steps} steps:")
        print(tpu_profiler.summary(trace, top=12))


if __name__ == "__main__":
    main()
