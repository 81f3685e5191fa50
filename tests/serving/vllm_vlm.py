"""Runs vllm.LLM greedy on the tiny vision-language model (tiny_models.make_vlm) with image inputs and prints
the tokens as JSON (a child of test_vllm.py), and what vLLM answers to a prompt with one image too many."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    folder, max_tokens = sys.argv[1], int(sys.argv[2])
    import tiny_models
    from vllm import SamplingParams
    from vllm_greedy import emit, make_llm

    llm = make_llm(folder, limit_mm_per_prompt={"image": 1})
    images = tiny_models.vlm_images()
    params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    prompts = [{"prompt": p, "multi_modal_data": {"image": images[i]}} for p, i in tiny_models.vlm_requests()]
    tokens = [list(o.outputs[0].token_ids) for o in llm.generate(prompts, params)]
    try:  # BLIP-2 takes one image per prompt: refused on the host, before any device work
        llm.generate([{"prompt": "hello", "multi_modal_data": {"image": images[:2]}}], params)
        refused = None
    except Exception as e:  # noqa: BLE001 - the test checks the type and message
        refused = f"{type(e).__name__}: {e}"
    # The engine keeps serving after the refusal.
    again = list(llm.generate([prompts[0]], params)[0].outputs[0].token_ids)
    emit({"tokens": tokens, "refused": refused, "again": again})


if __name__ == "__main__":
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    main()
