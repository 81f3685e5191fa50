"""Child of test_parallel.py: vllm.LLM greedy with tensor_parallel_size=2 on the tiny Llama, the tokens and
what each worker rank holds, as JSON.

vLLM's multiproc executor spawns one worker process per rank; they meet over torch.distributed with the
platform's backend (tpu_dist). argv: model folder, max tokens.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_models  # noqa: E402
from vllm_greedy import emit, make_llm  # noqa: E402


def rank_state(worker):
    """Runs in each worker (LLM.collective_rpc): its device, the tensor-parallel group's backend and
    collective count, and the first layer's sharded projection shapes."""
    import torch
    from vllm.distributed.parallel_state import get_tp_group

    tp = get_tp_group()
    backend = tp.device_group._get_backend(torch.device(worker.device.type))
    attn = worker.model_runner.model.model.layers[0].self_attn
    return {"rank": tp.rank_in_group, "world": tp.world_size, "device": str(worker.device),
            "weights_device": str(attn.qkv_proj.weight.device),
            "backend": torch.distributed.get_backend(tp.device_group),
            "communicator": type(tp.device_communicator).__name__,
            "collectives": getattr(backend, "collective_count", None),
            "qkv_rows": attn.qkv_proj.weight.shape[0], "o_cols": attn.o_proj.weight.shape[1]}


def main():
    folder, max_tokens = sys.argv[1], int(sys.argv[2])
    from vllm import SamplingParams

    llm = make_llm(folder, tensor_parallel_size=2)
    outs = llm.generate(tiny_models.PROMPTS, SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True),
                        use_tqdm=False)
    emit({"tokens": [list(o.outputs[0].token_ids) for o in outs], "ranks": llm.collective_rpc(rank_state)})


if __name__ == "__main__":
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    main()
