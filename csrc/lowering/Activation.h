#pragma once
// Activation functions and their gradients, and the ternary pointwise ops
// (lerp, addcmul, addcdiv) plus exact floor division. Torch-free: operands
// arrive converted to the compute dtype and broadcast to the result shape;
// scalar parameters (slopes, thresholds, ...) arrive the same way.
#include <span>

#include "Elementwise.h"

namespace tpu::lowering {

enum class Activation {
  Gelu, GeluTanh,
  Threshold,    // p = {threshold, value}
  LeakyRelu,    // p = {negative_slope}
  Elu,          // p = {alpha * scale, scale, input_scale}
  Softplus,     // p = {beta, threshold}
  Hardtanh,     // p = {min_val, max_val}
  Hardsigmoid, Hardswish, Mish, LogSigmoid,
};
Value activation(Builder& b, Activation op, Value x, std::span<const Value> p);

enum class ActivationGrad {
  Gelu, GeluTanh, Silu, Mish, Hardsigmoid, Hardswish, LogSigmoid,
  Sigmoid, Tanh,  // `x` is the forward result
  Threshold,      // p = {threshold}
  LeakyRelu,      // p = {negative_slope}
  Elu,            // p = {alpha * scale, scale, input_scale}; `x` is the input
  EluResult,      // as Elu, `x` is the forward result
  Softplus,       // p = {beta, threshold}
  Hardtanh,       // p = {min_val, max_val}
};
Value activationGrad(Builder& b, ActivationGrad op, Value grad, Value x, std::span<const Value> p);

// glu along `dim` (size even): first half * sigmoid(second half), and its gradient.
Value glu(Builder& b, Value x, int64_t dim);
Value gluGrad(Builder& b, Value grad, Value x, int64_t dim);

// self + weight * (end - self), as CPU PyTorch evaluates it (from `end` when |weight| >= 0.5).
Value lerp(Builder& b, Value self, Value end, Value weight);
Value addcmul(Builder& b, Value self, Value t1, Value t2, Value value);  // self + value * t1 * t2
Value addcdiv(Builder& b, Value self, Value t1, Value t2, Value value);  // self + value * t1 / t2
// Python floor division: floats as CPU's div_floor_floating, integers rounding down.
Value floorDivide(Builder& b, Value x, Value y);

}  // namespace tpu::lowering
