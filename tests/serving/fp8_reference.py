"""CPU references for test_fp8.py, in plain torch: vLLM's FP8 weight quantization of a checkpoint, an fp8
checkpoint written from it, and the tiny Llama's log-probabilities in float64 with FP8 weights, FP8
activations or an FP8 KV cache emulated, plus a first-order bound on what FP8 rounding can move them.

FP8 here is float8_e4m3fn: 3 mantissa bits, so rounding to nearest moves a normal value by at most
U = 2^-4 of itself; below the normal range (|v| < 2^-6 in units of the scale) by at most half the subnormal
spacing, SUB = 2^-10 of the scale.
"""
import json
import os
import shutil

import torch

E4M3 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(E4M3).max
U = 2.0 ** -4
SUB = 2.0 ** -10
MIN_SCALE = 1.0 / (FP8_MAX * 512)  # vLLM's floor on a dynamic scale
# vLLM's fused linear layers of a Llama block and the Hugging Face projections they hold, in order.
FUSED = {
    "self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "self_attn.o_proj": ("self_attn.o_proj",),
    "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj"),
    "mlp.down_proj": ("mlp.down_proj",),
}


def _state_dict(folder):
    from safetensors.torch import load_file

    return load_file(os.path.join(folder, "model.safetensors"))


def _layers(folder):
    with open(os.path.join(folder, "config.json")) as f:
        return json.load(f)["num_hidden_layers"]


def _split(fused):
    """"model.layers.0.self_attn.qkv_proj" -> ("model.layers.0", its Hugging Face projections)."""
    head, _, _, rest = fused.split(".", 3)
    return fused[: -len(rest) - 1], FUSED[rest]


def quantize_weights(folder, dtype, per_channel=False):
    """vLLM's online FP8 quantization of the checkpoint's weights once cast to the model dtype:
    {vLLM layer name: (e4m3 codes [out, in], float32 scale)}. Per tensor (fp8_per_tensor): one scale per
    fused layer, amax / 448, the weight multiplied by its reciprocal; per channel (fp8_per_channel): one
    scale per output row, floored at MIN_SCALE, the weight divided by it."""
    sd = _state_dict(folder)
    out = {}
    for i in range(_layers(folder)):
        for fused, parts in FUSED.items():
            w = torch.cat([sd[f"model.layers.{i}.{p}.weight"] for p in parts]).to(dtype)
            if per_channel:
                scale = (w.abs().amax(-1, keepdim=True).float() / FP8_MAX).clamp_min(MIN_SCALE)
                q = w / scale
            else:
                scale = (w.abs().amax().float() / torch.tensor(FP8_MAX)).reshape(1)
                q = w.float() * scale.reciprocal()
            out[f"model.layers.{i}.{fused}"] = (q.clamp(-FP8_MAX, FP8_MAX).to(E4M3), scale)
    return out


def write_fp8_checkpoint(src, dst, dtype):
    """src's model as an fp8 checkpoint (quant_method "fp8", dynamic activations) in dst: each projection's
    e4m3 weight with its weight_scale, the scale shared within a fused layer as fp8_per_tensor derives it,
    every other tensor in `dtype`."""
    from safetensors.torch import save_file

    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name != "model.safetensors":
            shutil.copy(os.path.join(src, name), dst)
    sd = {k: v.to(dtype) for k, v in _state_dict(src).items()}
    for fused, (codes, scale) in quantize_weights(src, dtype).items():
        prefix, parts = _split(fused)
        rows = [sd[f"{prefix}.{p}.weight"].shape[0] for p in parts]
        for p, c in zip(parts, codes.split(rows)):
            sd[f"{prefix}.{p}.weight"] = c.contiguous()
            sd[f"{prefix}.{p}.weight_scale"] = scale.reshape(()).clone()
    save_file(sd, os.path.join(dst, "model.safetensors"))
    with open(os.path.join(dst, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    config["torch_dtype"] = config["dtype"] = str(dtype).split(".")[-1]
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    return dst


def _fp8_round(x, scale, dtype=E4M3):
    """x rounded to float8 `dtype` in units of scale (saturating), as float64: from float32, as the engine
    rounds."""
    limit = torch.finfo(dtype).max
    return (x / scale).float().clamp(-limit, limit).to(dtype).double() * scale


def _kv_attention(dtype):
    from transformers.models.llama.modeling_llama import eager_attention_forward

    def attention(module, query, key, value, attention_mask, **kwargs):
        # vLLM's fp8 cache holds K (after rotary) and V rounded to float8 with the layer's scale, 1.0 unless a
        # checkpoint gives one; every token reads its own K/V back from the cache too.
        return eager_attention_forward(module, query, _fp8_round(key, 1.0, dtype), _fp8_round(value, 1.0, dtype),
                                       attention_mask, **kwargs)

    return attention


class Reference:
    """The tiny Llama in float64 on CPU, its weights first cast to the engine's model dtype. With `quantized`
    (quantize_weights' output) the FP8 model: each projection's weight is its dequantized codes and its
    input is quantized per token (amax / 448, floored at MIN_SCALE), as TpuFP8ScaledMMLinearKernel does.
    With kv_fp8 (a float8 dtype), keys and values are rounded to it as vLLM's fp8 cache stores them."""

    def __init__(self, folder, dtype, quantized=None, kv_fp8=None):
        from transformers import AttentionInterface, AutoModelForCausalLM
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

        kw = {}
        if kv_fp8 is not None:
            name = f"kv_{str(kv_fp8).split('.')[-1]}"
            AttentionInterface.register(name, _kv_attention(kv_fp8))
            # eager attention adds a float mask; a new implementation name would otherwise get sdpa's boolean one
            ALL_MASK_ATTENTION_FUNCTIONS.register(name, eager_mask)
            kw["attn_implementation"] = name
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **kw).double().eval()
        self.linears = [m for n, m in self.model.named_modules()
                        if any(n.endswith(p) for parts in FUSED.values() for p in parts)]
        self.quantize_inputs = quantized is not None
        if quantized:
            modules = dict(self.model.named_modules())
            for fused, (codes, scale) in quantized.items():
                prefix, names = _split(fused)
                parts = [modules[f"{prefix}.{p}"] for p in names]
                w = codes.double() * scale.double()
                for m, piece in zip(parts, w.split([m.weight.shape[0] for m in parts])):
                    m.weight.data.copy_(piece)
        self._inputs = None
        for m in self.linears:
            m.register_forward_pre_hook(self._hook)

    def _hook(self, module, args):
        x = args[0]
        if self._inputs is not None and all(x is not seen for seen in self._inputs):
            self._inputs.append(x)  # q/k/v (gate/up) share one input: vLLM quantizes it once
        if self.quantize_inputs:
            scale = (x.abs().amax(-1, keepdim=True) / FP8_MAX).clamp_min(MIN_SCALE)
            return (_fp8_round(x, scale),)
        return None

    def log_softmax(self, ids):
        """[len(ids), vocab] float64 next-token log-probabilities at every position."""
        with torch.no_grad():
            return torch.log_softmax(self.model(torch.tensor([ids])).logits[0], dim=-1)

    def fp8_spread(self, ids):
        """[len(ids), vocab]: sigma such that FP8 rounding moves each log-probability by more than
        lam * sigma with probability at most 2 exp(-lam^2 / 2) (Hoeffding), the rounding errors of the
        projection weights (per tensor) and inputs (per token) taken as independent, zero-mean and bounded by
        r = max(U |v|, SUB * scale). To first order d logprob = sum over rounded values v of
        (d logprob / d v) * e_v, so sigma^2 = sum (d logprob / d v)^2 r^2. Through the final hidden state h
        (after the final norm): sigma_k^2 = c_k M c_k with M = sum_v (dh/dv)(dh/dv)^T r_v^2 and
        c_k = d logprob_k / dh = W_k - softmax(z) W for the unquantized lm_head W."""
        weights = [m.weight for m in self.linears]
        weight_err = [torch.maximum(U * m.weight.detach().abs(), SUB * m.weight.detach().abs().amax() / FP8_MAX)
                      for m in self.linears]
        self._inputs = []
        h = self.model.model(torch.tensor([ids])).last_hidden_state[0]  # [L, hidden]
        inputs, self._inputs = self._inputs, None
        input_err = [torch.maximum(U * x.abs(), SUB * x.abs().amax(-1, keepdim=True) / FP8_MAX).detach()
                     for x in inputs]
        length, hidden = h.shape
        lm_head = self.model.lm_head.weight.detach()
        probs = torch.softmax(h.detach() @ lm_head.t(), dim=-1)
        eye = torch.eye(hidden, dtype=torch.float64)
        sigma = []
        for p in range(length):  # one batched backward pass per position, over its hidden dimensions
            seeds = torch.zeros(hidden, length, hidden, dtype=torch.float64)
            seeds[:, p] = eye
            grads = torch.autograd.grad(h, weights + inputs, seeds, retain_graph=True, is_grads_batched=True)
            m = torch.zeros(hidden, hidden, dtype=torch.float64)
            for g, err in zip(grads, weight_err + input_err):
                scaled = (g * err).flatten(1)
                m += scaled @ scaled.t()
            c = lm_head - probs[p] @ lm_head  # [vocab, hidden]
            sigma.append(((c @ m) * c).sum(-1).clamp_min(0).sqrt())
        return torch.stack(sigma)
