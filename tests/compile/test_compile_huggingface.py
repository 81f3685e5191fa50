"""transformers' static-cache generation compiles the model's forward with torch.compile;
on tpu it goes through backend "tpu" and gives the tokens of eager generation (and CPU).
A forward compiled with dynamic=True generates with the default (growing) cache, one program
per cache-length bucket."""
import pytest
import torch
from torch_tpu import _C
from torch_tpu.compile import buckets

from conftest import assert_within_cpu_error

import transformers  # requirements.txt installs it: a missing one is a failure, not a skip


def _tiny_gpt2():
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=64,
                                  bos_token_id=0, eos_token_id=1, pad_token_id=1)
    return transformers.GPT2LMHeadModel(cfg).eval()


def _tiny_llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=100, max_position_embeddings=64,
                                   bos_token_id=0, eos_token_id=1, pad_token_id=1)
    return transformers.LlamaForCausalLM(cfg).eval()


def _models_and_prompt(make):
    """The model on CPU and on tpu (same weights), and an 8-token prompt."""
    ids = torch.randint(2, 100, (1, 8), generator=torch.Generator().manual_seed(1))
    return make(), make().to("tpu"), ids


@pytest.mark.parametrize("make", [_tiny_gpt2, _tiny_llama], ids=["gpt2", "llama"])
def test_static_cache_generate_matches_eager(mode, make):
    cpu, tpu, ids = _models_and_prompt(make)
    want = cpu.generate(ids, max_new_tokens=6, do_sample=False)
    eager = tpu.generate(ids.to("tpu"), max_new_tokens=6, do_sample=False)
    graphs, replays = _C._executor_stats()["compiled_graphs"], _C._fused_stats()["replays"]
    static = tpu.generate(ids.to("tpu"), max_new_tokens=6, do_sample=False, cache_implementation="static")
    assert _C._executor_stats()["compiled_graphs"] > graphs  # the decoding steps ran compiled
    assert _C._fused_stats()["replays"] > replays  # and later decoding steps replayed the first's program
    assert torch.equal(eager.cpu(), want)
    assert torch.equal(static.cpu(), want)


def test_gpt2_compiled_forward_matches_cpu(mode):
    cpu = _tiny_gpt2()
    tpu = _tiny_gpt2().to("tpu")
    ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = cpu(ids).logits
        got = torch.compile(tpu, backend="tpu")(ids.to("tpu")).logits
    torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("make", [_tiny_gpt2, _tiny_llama], ids=["gpt2", "llama"])
def test_dynamic_cache_generate_with_compiled_forward(mode, make):
    # transformers' default DynamicCache grows by one position per token (torch.cat): with
    # dynamic=True the forward is traced once per cache-length bucket (compile/buckets.py).
    cpu, tpu, ids = _models_and_prompt(make)
    want = cpu.generate(ids, max_new_tokens=24, do_sample=False)
    tpu.forward = torch.compile(tpu.forward, backend="tpu", dynamic=True)
    graphs, replays = _C._executor_stats()["compiled_graphs"], _C._fused_stats()["replays"]
    got = tpu.generate(ids.to("tpu"), max_new_tokens=24, do_sample=False)
    assert torch.equal(got.cpu(), want)
    calls = _C._executor_stats()["compiled_graphs"] - graphs
    traced = calls - (_C._fused_stats()["replays"] - replays)
    # the prompt (an empty cache), then one program per bucket of the cache lengths 8, 9, ...
    assert calls == 24 and traced == 1 + len({buckets.bucket(n) for n in range(8, 8 + calls - 1)}) == 4


def _tiny_mistral():
    torch.manual_seed(0)
    cfg = transformers.MistralConfig(hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
                                     num_key_value_heads=2, vocab_size=99, max_position_embeddings=64, pad_token_id=0)
    return transformers.MistralForCausalLM(cfg).eval()


def _tiny_falcon():
    torch.manual_seed(0)
    cfg = transformers.FalconConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                    pad_token_id=0)
    return transformers.FalconForCausalLM(cfg).eval()


@pytest.mark.parametrize("make", [_tiny_mistral, _tiny_falcon], ids=["mistral", "falcon"])
def test_dynamic_forward_over_lengths_traces_one_program_per_bucket(mode, make):
    # Their graphs index the causal mask along the length (aten.index.Tensor, buckets.py) and read
    # tensor constants (backend.constants_as_arguments): both bucketed and replayed.
    cpu, tpu = make(), make().to("tpu")
    forward = torch.compile(tpu, backend="tpu", dynamic=True)
    g = torch.Generator().manual_seed(3)
    lengths = [5, 7, 6, 9, 12, 11]
    graphs, replays = _C._executor_stats()["compiled_graphs"], _C._fused_stats()["replays"]
    with torch.no_grad():
        for n in lengths:
            ids = torch.randint(3, 99, (2, n), generator=g)
            want = cpu(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
            exact = cpu.double()(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
            cpu.float()
            got = forward(input_ids=ids.to("tpu"), attention_mask=torch.ones_like(ids).to("tpu")).logits
            assert_within_cpu_error(got, want, exact, floor=1e-6)
    traced = _C._executor_stats()["compiled_graphs"] - graphs - (_C._fused_stats()["replays"] - replays)
    assert traced == len({buckets.bucket(n) for n in lengths}) == 2


def _tiny_mixtral(experts="grouped_mm"):
    torch.manual_seed(0)
    # intermediate_size 40: CPU's grouped_mm kernel (the reference) needs 16-byte strides
    cfg = transformers.MixtralConfig(hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
                                     num_key_value_heads=2, vocab_size=99, max_position_embeddings=64, pad_token_id=0,
                                     num_local_experts=4, num_experts_per_tok=2)
    cfg._experts_implementation = experts
    return transformers.MixtralForCausalLM(cfg).eval()


def test_float32_mixtral_compiled_forward_matches_cpu(mode):
    # transformers runs its experts through grouped_mm under torch.compile on tpu in any dtype; torch's
    # fake grouped_mm demands bfloat16 (registration._shape_grouped_mm_of_any_float_dtype).
    cpu, tpu = _tiny_mixtral(), _tiny_mixtral().to("tpu")
    ids = torch.randint(3, 99, (2, 7), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        want = cpu(input_ids=ids).logits
        exact = _tiny_mixtral("eager").double()(input_ids=ids).logits  # CPU grouped_mm has no float64
        got = torch.compile(tpu, backend="tpu")(input_ids=ids.to("tpu")).logits
    assert_within_cpu_error(got, want, exact, floor=1e-6)
