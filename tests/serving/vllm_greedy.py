"""Runs vllm.LLM greedy on a tiny local model and prints the tokens as JSON (a child of test_vllm.py).

vLLM keeps process-wide state (its platform, parallel groups), so every engine gets a process of its own.
Also the helpers the other serving tests share: the engine settings (`LLM_ARGS`) and `run_child`.
"""
import json
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# Small settings every engine of these tests uses (the server test passes the same ones as flags).
LLM_ARGS = dict(dtype="float32", max_model_len=256, max_num_seqs=8, kv_cache_memory_bytes=8 << 20,
                enforce_eager=True, seed=0)


def make_llm(folder, **overrides):
    from vllm import LLM

    return LLM(model=folder, **{**LLM_ARGS, **overrides})


def emit(result) -> None:
    """The child's answer to run_child: one JSON line on stdout (vLLM logs around it)."""
    print("RESULT " + json.dumps(result), flush=True)


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # the child and everything it started are gone already
        pass


def run_child(script, *args, mode="strict", device="tpu", timeout=600):
    """Runs HERE/script with args in its own process (engine in-process, eager mode `mode`, plugin device
    `device`) and returns what it emitted.

    The child leads a process group of its own: whatever it leaves running (vLLM's worker processes under
    tensor parallelism) is killed with it when it exits, fails or passes `timeout`."""
    env = dict(os.environ, TORCH_TPU_EAGER_MODE=mode, TORCH_TPU_VLLM_DEVICE=device,
               VLLM_ENABLE_V1_MULTIPROCESSING="0")
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, script), *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        raise AssertionError(f"{script} timed out after {timeout} s\n{err[-4000:]}") from None
    finally:
        _kill_group(proc)
    assert proc.returncode == 0, err[-4000:]
    line = [l for l in out.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def main():
    folder, max_tokens = sys.argv[1], int(sys.argv[2])
    import tiny_models
    from vllm import SamplingParams

    llm = make_llm(folder)
    outs = llm.generate(tiny_models.PROMPTS, SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True))
    emit([list(o.outputs[0].token_ids) for o in outs])


if __name__ == "__main__":
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    main()
