"""Mixture-of-Experts on tpu, in torch code.

vLLM's router calls torch.ops._moe_C.topk_softmax / topk_sigmoid (CUDA kernels of vllm._moe_C, never
loaded here), and its unquantized MoE method leaves an out-of-tree platform's experts to the platform
(select_unquantized_moe_backend returns OOT with no kernel). Both are given here.
"""
import torch

def _route(scores, topk_weights, topk_indices, token_expert_indices, renormalize, bias, scale=1.0):
    """The CUDA kernels' contract: experts chosen by score (+ correction bias), weighted by the unbiased
    score, renormalized to sum to 1 when asked, then scaled; token_expert_indices[t, j] = j * tokens + t."""
    k, tokens = topk_weights.shape[1], scores.shape[0]
    ids = (scores if bias is None else scores + bias.float()).topk(k, dim=-1).indices
    weights = scores.gather(1, ids)
    if renormalize:
        weights = weights / weights.sum(-1, keepdim=True)
    if scale != 1.0:
        weights = weights * scale
    topk_weights.copy_(weights)
    topk_indices.copy_(ids)
    order = torch.arange(k, device=ids.device).unsqueeze(0) * tokens + torch.arange(tokens, device=ids.device)[:, None]
    token_expert_indices.copy_(order)


def topk_softmax(topk_weights, topk_indices, token_expert_indices, gating_output, renormalize, bias=None,
                 is_padding=None):
    # is_padding only lets the CUDA kernel skip padded rows; their routes are never read.
    _route(gating_output.float().softmax(-1), topk_weights, topk_indices, token_expert_indices, renormalize, bias)


def topk_sigmoid(topk_weights, topk_indices, token_expert_indices, gating_output, renormalize, bias=None,
                 routed_scaling_factor=1.0, is_padding=None):
    _route(gating_output.float().sigmoid(), topk_weights, topk_indices, token_expert_indices, renormalize, bias,
           routed_scaling_factor)


_MOE_OPS = {
    "topk_softmax": (topk_softmax, "topk_softmax(Tensor(a!) topk_weights, Tensor(b!) topk_indices, "
                     "Tensor(c!) token_expert_indices, Tensor gating_output, bool renormalize, "
                     "Tensor? bias=None, Tensor? is_padding=None) -> ()"),
    "topk_sigmoid": (topk_sigmoid, "topk_sigmoid(Tensor(a!) topk_weights, Tensor(b!) topk_indices, "
                     "Tensor(c!) token_expert_indices, Tensor gating_output, bool renormalize, "
                     "Tensor? bias=None, float routed_scaling_factor=1.0, Tensor? is_padding=None) -> ()"),
}


def _gated(activation, h):
    import torch.nn.functional as F
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation as A

    no_mul = {A.SILU_NO_MUL: F.silu, A.GELU_NO_MUL: F.gelu,
              A.GELU_TANH_NO_MUL: lambda v: F.gelu(v, approximate="tanh")}
    if activation in no_mul:
        return no_mul[activation](h)
    gate, up = h.chunk(2, dim=-1)  # w13 is [gate; up]
    if activation == A.SILU:
        return F.silu(gate) * up
    if activation == A.GELU:
        return F.gelu(gate) * up
    if activation == A.GELU_TANH:
        return F.gelu(gate, approximate="tanh") * up
    raise NotImplementedError(f"tpu: MoE activation {activation.value} is not supported by torch_tpu's vLLM "
                              "MoE kernel (silu, gelu, gelu_tanh and their _no_mul forms are)")


def fused_moe(x, w13, w2, topk_weights, topk_ids, activation, apply_router_weight_on_input=False,
              w13_bias=None, w2_bias=None):
    """Every expert on every token, combined with the routing weights (zero for experts a token did not
    choose): fixed shapes, no data-dependent grouping, at experts / top_k times the FLOPs of a grouped
    kernel. x [T, H], w13 [E, 2I or I, H], w2 [E, H, I], topk_* [T, k]."""
    experts = w13.shape[0]
    ids = topk_ids.long()
    combine = torch.zeros(x.shape[0], experts, dtype=torch.float32, device=x.device)
    combine.scatter_add_(1, ids, topk_weights.float())  # [T, E]
    xe = x.unsqueeze(0).expand(experts, *x.shape)
    if apply_router_weight_on_input:  # weight the input instead of the output (top_k = 1 models)
        xe = xe * combine.t().unsqueeze(-1).to(x.dtype)
        combine = torch.zeros_like(combine).scatter_(1, ids, 1.0)
    h = torch.bmm(xe, w13.transpose(1, 2))
    if w13_bias is not None:
        h = h + w13_bias.unsqueeze(1)
    y = torch.bmm(_gated(activation, h), w2.transpose(1, 2))  # [E, T, H]
    if w2_bias is not None:
        y = y + w2_bias.unsqueeze(1)
    return (y.float() * combine.t().unsqueeze(-1)).sum(0).to(x.dtype)


def _moe_method_class():
    from vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method import UnquantizedFusedMoEMethod

    class TpuUnquantizedFusedMoEMethod(UnquantizedFusedMoEMethod):
        """vLLM's unquantized MoE method with its experts in torch code (fused_moe)."""

        @property
        def is_monolithic(self) -> bool:
            return False  # the router picks experts first; the base would ask the (absent) kernel

        def forward_native(self, layer, x, topk_weights, topk_ids, shared_experts, shared_experts_input):
            # Shared experts (no kernel to overlap them with) run in vLLM's MoE runner.
            if layer.expert_map is not None:
                raise NotImplementedError("tpu: expert parallelism is not supported by torch_tpu's vLLM MoE kernel")
            if getattr(layer, "swiglu_limit", None) is not None:
                raise NotImplementedError("tpu: clamped SwiGLU MoE is not supported by torch_tpu's vLLM MoE kernel")
            return fused_moe(x, layer.w13_weight, layer.w2_weight, topk_weights, topk_ids, layer.activation,
                             layer.apply_router_weight_on_input, getattr(layer, "w13_bias", None),
                             getattr(layer, "w2_bias", None))

        forward_oot = forward_native

    return UnquantizedFusedMoEMethod, TpuUnquantizedFusedMoEMethod


def register() -> None:
    """Defines the _moe_C routing ops and puts TpuUnquantizedFusedMoEMethod in place of vLLM's unquantized
    MoE method (CustomOp's out-of-tree registry), once per process, before any model is built."""
    from vllm.model_executor.custom_op import op_registry_oot

    base, method = _moe_method_class()
    if base.__name__ in op_registry_oot:
        return
    from . import custom_ops

    custom_ops.define("_moe_C", _MOE_OPS)
    base.register_oot(method)
