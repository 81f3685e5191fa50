"""FP8 (W8A8, float8_e4m3fn) linear layers for vLLM on tpu: torch code for the vllm._C quantization ops and a
ScaledMM kernel over torch._scaled_mm.

vLLM's FP8 methods (`quantization="fp8"` checkpoints, online `fp8_per_tensor` / `fp8_per_channel`) quantize
weights through vllm._C's CUDA kernels (`ops.scaled_fp8_quant`) and choose a ScaledMM kernel per platform,
none for an out-of-tree one. Both are given here:
- the three `_C` quantization ops, with the CUDA kernels' arithmetic (per-tensor scales multiply by the
  reciprocal scale, per-token scales divide; results saturate to the float8 range);
- TpuFP8ScaledMMLinearKernel, registered as the out-of-tree platform's FP8 kernel. Dynamic activation scales
  are always per token: a per-tensor amax would span the padding rows of a bucketed batch (model_runner), so a
  token's result would depend on its batch. vLLM's CUDA path (cutlass) quantizes activations per token too.
  The product is one row-wise torch._scaled_mm: scale_a [M, 1] times scale_b [1, N], a tensor-wise scale
  expanded to its row or column.
Block-scaled FP8 (weight_block_size, fp8_per_block) is refused by the kernel with its reason.
"""
import torch


def _fp8_dtype():
    from vllm.platforms import current_platform
    return current_platform.fp8_dtype()


def _saturate(x: torch.Tensor, dtype) -> torch.Tensor:
    info = torch.finfo(dtype)
    return x.clamp(info.min, info.max).to(dtype)


def _min_scale(dtype) -> float:
    # The CUDA kernels' floor on a dynamic scale, so an all-zero row does not divide by zero.
    return 1.0 / (torch.finfo(dtype).max * 512.0)


def _expand_scale(scale, shape, group_shape):
    """A static scale of one element, per row, per column or per 2-D group, broadcast to `shape` [M, N]."""
    if scale.numel() == 1:
        return scale.reshape(1, 1).float()
    m, n = shape
    if group_shape is None:
        if scale.dim() != 2:
            raise ValueError("static_scaled_fp8_quant: a 1-D scale needs group_shape (per-token or per-channel)")
        group_shape = (-(-m // scale.shape[0]), -(-n // scale.shape[1]))
    gm = m if group_shape[0] == -1 else group_shape[0]
    gn = n if group_shape[1] == -1 else group_shape[1]
    s = scale.float().reshape(-(-m // gm), -(-n // gn))
    return s.repeat_interleave(gm, 0)[:m].repeat_interleave(gn, 1)[:, :n]


def static_scaled_fp8_quant(result, input, scale, group_shape=None):
    s = _expand_scale(scale, input.shape, group_shape)
    # result may have padding rows past the input's (num_token_padding); they are left as they are.
    result[: input.shape[0]].copy_(_saturate(input.float() * s.reciprocal(), result.dtype))


def dynamic_scaled_fp8_quant(result, input, scale):
    amax = input.abs().amax().float()
    scale.copy_((amax / torch.finfo(result.dtype).max).clamp(min=_min_scale(result.dtype)).reshape(scale.shape))
    static_scaled_fp8_quant(result, input, scale)


def dynamic_per_token_scaled_fp8_quant(result, input, scale, scale_ub=None):
    amax = input.abs().amax(dim=-1, keepdim=True).float()
    if scale_ub is not None:
        amax = amax.clamp(max=scale_ub.float())
    s = (amax / torch.finfo(result.dtype).max).clamp(min=_min_scale(result.dtype))
    scale.copy_(s.reshape(scale.shape))
    result[: input.shape[0]].copy_(_saturate(input.float() / s, result.dtype))


# name -> (function, schema), as vllm._C declares them
_C_OPS = {
    "static_scaled_fp8_quant": (static_scaled_fp8_quant, "static_scaled_fp8_quant(Tensor(a!) result, "
                                "Tensor input, Tensor scale, int[]? group_shape=None) -> ()"),
    "dynamic_scaled_fp8_quant": (dynamic_scaled_fp8_quant, "dynamic_scaled_fp8_quant(Tensor(a!) result, "
                                 "Tensor input, Tensor(b!) scale) -> ()"),
    "dynamic_per_token_scaled_fp8_quant": (dynamic_per_token_scaled_fp8_quant,
                                           "dynamic_per_token_scaled_fp8_quant(Tensor(a!) result, Tensor input, "
                                           "Tensor(b!) scale, Tensor? scale_ub) -> ()"),
}
_registered = False


def _kernel_class():
    from vllm.model_executor.kernels.linear.scaled_mm.ScaledMMLinearKernel import FP8ScaledMMLinearKernel
    from vllm.model_executor.layers.quantization.input_quant_fp8 import QuantFP8
    from vllm.model_executor.layers.quantization.utils.quant_utils import GroupShape

    class TpuFP8ScaledMMLinearKernel(FP8ScaledMMLinearKernel):
        """W8A8 linear: activations quantized per token (dynamic) or by their static scale, one row-wise
        torch._scaled_mm in float32 with the result in the layer's dtype."""

        @classmethod
        def is_supported(cls, compute_capability=None):
            return True, None

        @classmethod
        def can_implement(cls, c):
            if c.weight_quant_key.scale.group_shape.is_per_group() or \
                    c.activation_quant_key.scale.group_shape.is_per_group():
                return False, ("tpu: block-scaled FP8 (weight_block_size, fp8_per_block) is not supported by "
                               "torch_tpu's vLLM plugin; use per-tensor or per-channel FP8 (fp8_per_tensor, "
                               "fp8_per_channel)")
            return True, None

        def __init__(self, c, layer_param_names):
            super().__init__(c, layer_param_names)
            if not c.activation_quant_key.scale.static:
                self.quant_fp8 = QuantFP8(static=False, group_shape=GroupShape.PER_TOKEN)

        def apply_scaled_mm(self, *, A, B, out_dtype, As, Bs, bias, output_shape):
            m, n = A.shape[0], B.shape[1]
            scale_a = As.float().reshape(-1, 1).expand(m, 1).contiguous()
            scale_b = Bs.float().reshape(1, -1).expand(1, n).contiguous()
            out = torch._scaled_mm(A, B, scale_a, scale_b, bias=bias, out_dtype=out_dtype)
            return out.view(*output_shape)

    return TpuFP8ScaledMMLinearKernel


def register() -> None:
    """Defines the `_C` quantization ops and makes TpuFP8ScaledMMLinearKernel the out-of-tree platform's FP8
    kernel (vLLM's per-platform kernel lists), once per process, before any model is built."""
    global _registered
    if _registered:
        return
    from vllm.model_executor.kernels import linear
    from vllm.platforms import PlatformEnum

    from . import custom_ops

    custom_ops.define("_C", _C_OPS)
    _registered = True
    kernel = _kernel_class()
    # Both lists: a block-scaled layer then gets the kernel's reason for refusing it.
    linear._POSSIBLE_FP8_KERNELS[PlatformEnum.OOT] = [kernel]
    linear._POSSIBLE_FP8_BLOCK_KERNELS[PlatformEnum.OOT] = [kernel]
