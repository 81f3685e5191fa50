"""One vllm.LLM engine for test_fp8.py: greedy tokens, the full-vocabulary log-probabilities of every prompt
position and decode step, and the FP8 layers' weights as the engine holds them, saved with torch.save.

argv: model folder, output file, engine overrides as JSON (quantization, dtype, kv_cache_dtype, ...). Given a
list of overrides instead, builds an engine with each and emits the [type, message] of what each raised.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vllm_greedy import emit, make_llm  # noqa: E402

MAX_TOKENS = 4


def fp8_layers(model):
    """{module name: (fp8 weight [out, in] as bytes, weight_scale, kernel class)} of the FP8 linear layers,
    and the names of the layers left unquantized."""
    import torch

    quantized, plain = {}, []
    for name, module in model.named_modules():
        kernel = getattr(getattr(module, "quant_method", None), "fp8_linear", None)
        if kernel is not None:
            w = module.weight.detach().t()  # the kernels hold it [in, out]
            quantized[name] = (w.contiguous().view(torch.uint8).cpu(), module.weight_scale.detach().float().cpu(),
                               type(kernel).__name__)
        elif hasattr(module, "weight") and module.weight is not None and module.weight.dim() == 2:
            plain.append(name)
    return quantized, plain


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  the test asserts vLLM's error
        return [type(e).__name__, str(e)]
    return None


def main():
    folder, out, overrides = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    import torch
    import tiny_models
    from vllm import SamplingParams

    if isinstance(overrides, list):
        emit([_error(lambda: make_llm(folder, **o)) for o in overrides])
        return
    llm = make_llm(folder, max_logprobs=-1, **overrides)
    # logprobs=-1: the whole vocabulary, before any sampling parameter is applied.
    params = SamplingParams(temperature=0, max_tokens=MAX_TOKENS, ignore_eos=True, logprobs=-1, prompt_logprobs=-1)
    outs = llm.generate(tiny_models.PROMPTS, params)

    def dense(pos):
        row = torch.full((len(pos),), float("nan"), dtype=torch.float64)
        for t, lp in pos.items():
            row[t] = lp.logprob
        return row

    result = {"runs": [{
        "prompt_ids": list(o.prompt_token_ids),
        "tokens": list(o.outputs[0].token_ids),
        # prompt_logprobs[0] is None (the first token has no prediction)
        "prompt": torch.stack([dense(p) for p in o.prompt_logprobs[1:]]),
        "decode": torch.stack([dense(p) for p in o.outputs[0].logprobs]),
    } for o in outs]}
    result["layers"], result["plain"] = llm.apply_model(fp8_layers)[0]
    torch.save(result, out)
    emit({"saved": out})


if __name__ == "__main__":
    main()
