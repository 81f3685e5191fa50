"""Tiny random-weight causal LMs and a vision-language model (BLIP-2) saved as Hugging Face checkpoints, with a
tokenizer trained here.

Nothing is downloaded: the tokenizer is a byte-level BPE trained on a fixed corpus, the weights come from
a seeded torch generator. Each model is written once per folder (the caller's tmp_path_factory).
"""
import os

import torch

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a journey of a thousand miles begins with a single step",
    "to be or not to be that is the question",
    "all that glitters is not gold",
    "the rain in spain stays mainly in the plain",
    "hello world, this is a tiny model served by vllm on tpu",
] * 20

PROMPTS = [
    "the quick brown fox",
    "a journey of",
    "to be or not",
    "hello world, this is",
    "all that",
    "the rain in spain stays mainly in the plain and the fox",
]


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=384, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                          "{% if add_generation_prompt %}assistant:{% endif %}")
    return fast


def _config(kind: str, vocab: int):
    import transformers as tf

    common = dict(vocab_size=vocab, bos_token_id=0, eos_token_id=1, pad_token_id=2, tie_word_embeddings=False)
    if kind == "llama":
        return tf.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, max_position_embeddings=512, **common)
    if kind == "qwen2":
        return tf.Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, max_position_embeddings=512, **common)
    if kind == "qwen3":
        return tf.Qwen3Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=16, max_position_embeddings=512, **common)
    if kind == "gpt2":
        return tf.GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=512, **common)
    if kind == "mixtral":
        return tf.MixtralConfig(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                                num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                                max_position_embeddings=512, **common)
    raise ValueError(kind)


def make_model(kind: str, folder: str, dtype=torch.float32, edit=None) -> str:
    """Writes a tiny `kind` model and its tokenizer to `folder` (once) and returns the folder; `edit(model)`
    changes its weights before they are saved."""
    import transformers as tf

    if os.path.exists(os.path.join(folder, "config.json")):
        return folder
    tok = _tokenizer()
    config = _config(kind, len(tok))
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(config, dtype=dtype)
    with torch.no_grad():  # larger weights than the default init, so greedy tokens depend on the prompt
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.2)
        if edit is not None:
            edit(model)
    model.generation_config.do_sample = False
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def cycle_tokens(model) -> None:
    """An `edit` for make_model("llama"): greedy text that mostly walks 4-token cycles, so n-gram speculative
    drafts get accepted. The output head's row for token s is the embedding of s's predecessor in its group
    of four, so a last hidden state near token t's embedding scores t's successor 4 * (t // 4) + (t + 1) % 4
    highest; the layers' output projections scaled by 0.1 still move the logits, and break the cycles at
    prompt-dependent places (so drafts get rejected too)."""
    emb = model.model.embed_tokens.weight
    t = torch.arange(emb.shape[0])
    before = (4 * (t // 4) + (t - 1) % 4).clamp(max=emb.shape[0] - 1)
    model.lm_head.weight.copy_(emb[before])
    for layer in model.model.layers:
        layer.self_attn.o_proj.weight.mul_(0.1)
        layer.mlp.down_proj.weight.mul_(0.1)


def _hf_float64(folder: str):
    import transformers as tf

    # MoE experts default to torch's grouped_mm, which has no float64 kernel: the per-expert loop instead.
    moe = getattr(tf.AutoConfig.from_pretrained(folder), "num_local_experts", None)
    return tf.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64,
                                                   **({"experts_implementation": "eager"} if moe else {}))


def hf_greedy(folder: str, prompts, max_new_tokens: int):
    """Hugging Face greedy tokens on CPU in float64 (the reference), one prompt at a time.

    A plain argmax loop over the whole sequence rather than `generate`: vLLM's ignore_eos keeps sampling
    the end-of-sequence token when it wins, which generate's min_new_tokens would mask instead."""
    import transformers as tf

    tok = tf.AutoTokenizer.from_pretrained(folder)
    model = _hf_float64(folder)
    with torch.no_grad():
        return [_argmax_loop(lambda ids: model(ids).logits[0, -1], tok(p, return_tensors="pt").input_ids,
                             max_new_tokens) for p in prompts]


def _argmax_loop(last_logits, ids, max_new_tokens: int):
    """max_new_tokens greedy tokens after ids: last_logits(ids) is the next token's logits."""
    new = []
    for _ in range(max_new_tokens):
        nxt = last_logits(ids).argmax().item()
        new.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    return new


def hf_log_softmax(folder: str, sequences):
    """Hugging Face float64 log_softmax on CPU of the next-token logits at every position of each token
    sequence (prompt + output ids): a [len, vocab] float64 tensor per sequence."""
    model = _hf_float64(folder)
    with torch.no_grad():
        return [torch.log_softmax(model(torch.tensor([ids])).logits[0], dim=-1) for ids in sequences]


# A vision-language model: BLIP-2 (ViT vision tower, Q-Former, OPT text model). vLLM 0.32's LLaVA family cannot
# be served here: llava.py imports pixtral.py, which imports transformers 5.23's torchvision image processor.
VLM_QUERY_TOKENS = 8  # image tokens the processor puts before the prompt


def vlm_images():
    """Three seeded random RGB images of different sizes (the processor resizes each to 32 x 32)."""
    import numpy as np
    from PIL import Image

    g = np.random.default_rng(0)
    return [Image.fromarray(g.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in ((32, 32), (40, 56), (24, 64))]


def vlm_requests():
    """(prompt, image index) pairs: every image with each of three prompts."""
    return [(p, i) for p in PROMPTS[:3] for i in range(3)]


def make_vlm(folder: str) -> str:
    """Writes a tiny random-weight BLIP-2 and its processor (the tokenizer above plus BLIP's PIL image
    processor, so no torchvision) to `folder` (once) and returns the folder."""
    import transformers as tf

    if os.path.exists(os.path.join(folder, "config.json")):
        return folder
    tok = _tokenizer()
    images = tf.BlipImageProcessorPil(size={"height": 32, "width": 32})
    processor = tf.Blip2Processor(image_processor=images, tokenizer=tok, num_query_tokens=VLM_QUERY_TOKENS)
    text = tf.OPTConfig(hidden_size=64, ffn_dim=128, num_hidden_layers=2, num_attention_heads=4,
                        max_position_embeddings=512, word_embed_proj_dim=64, vocab_size=len(tok),  # <image> added
                        bos_token_id=0, eos_token_id=1, pad_token_id=2)
    config = tf.Blip2Config(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8),
        qformer_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                            encoder_hidden_size=32),
        text_config=text.to_dict(), num_query_tokens=VLM_QUERY_TOKENS,
        image_token_index=tok.convert_tokens_to_ids("<image>"))
    torch.manual_seed(0)
    model = tf.Blip2ForConditionalGeneration(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.2)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def hf_vlm_greedy(folder: str, requests, max_new_tokens: int):
    """Hugging Face greedy tokens on CPU in float64 for (prompt, image index) requests: the processor's
    input ids and pixel values (float32, as vLLM gets them, then float64), a plain argmax loop."""
    import transformers as tf

    processor = tf.AutoProcessor.from_pretrained(folder)
    model = tf.AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float64)
    images = vlm_images()
    out = []
    with torch.no_grad():
        for prompt, i in requests:
            inputs = processor(images=images[i], text=prompt, return_tensors="pt")
            pixels = inputs.pixel_values.to(torch.float64)
            out.append(_argmax_loop(lambda ids: model(input_ids=ids, pixel_values=pixels).logits[0, -1],
                                    inputs.input_ids, max_new_tokens))
    return out
