#pragma once
// Shared machinery of pointwise kernels: argument kinds (tpu tensor or host
// scalar), result/compute dtypes, output allocation for the functional,
// in-place and out= variants, and one runner that broadcasts and converts.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>

#include <span>

#include "OpRunner.h"
#include "csrc/lowering/Elementwise.h"

namespace tpu::aten {

// An operand of a pointwise op: a tpu tensor or a host scalar (a Python
// number, or a CPU 0-dim tensor, which PyTorch treats the same way).
struct Arg {
  at::Tensor tensor;  // defined for tpu tensors
  c10::Scalar scalar;
  // A scalar CPU's TensorIterator holds as a 0-dim operand (a wrapped number; a binary op's Scalar
  // overload): it decides how a result is laid out (emptyPointwise), a plain scalar parameter does not.
  bool operand = false;
  static Arg of(const at::Tensor& t);
  static Arg of(const c10::Scalar& s) { return Arg{at::Tensor(), s}; }
  static Arg wrapped(const c10::Scalar& s) { return Arg{at::Tensor(), s, true}; }
  bool isTensor() const { return tensor.defined(); }
};

// float16/bfloat16 compute in float32, as CPU PyTorch's opmath does.
c10::ScalarType opmathType(c10::ScalarType t);
// The dtype an op that moves or picks values (max, scatter) computes in: `t`, except float32 for float8
// (read as float32; a float8 program would mix precisions, and -inf does not exist in the fnuz formats).
c10::ScalarType valueType(c10::ScalarType t);
c10::ScalarType defaultFloat();
// Result dtype of a pointwise op over these operands (PyTorch promotion rules).
c10::ScalarType resultType(std::initializer_list<const Arg*> args);
std::vector<int64_t> broadcastShape(std::initializer_list<const Arg*> args);

// A new result of `shape` laid out as CPU's TensorIterator lays out a pointwise op's output over these
// operands, so the strides, views and is_contiguous() of results are CPU's: contiguous over contiguous
// operands of that shape, channels_last over channels_last ones, else in the operands' stride order
// (x.t().exp() is transposed like x.t()).
at::Tensor emptyPointwise(std::span<const Arg* const> args, c10::IntArrayRef shape, const at::TensorOptions& options);
inline at::Tensor emptyPointwise(std::initializer_list<const Arg*> args, c10::IntArrayRef shape,
                                 const at::TensorOptions& options) {
  return emptyPointwise(std::span<const Arg* const>(args.begin(), args.size()), shape, options);
}

// out= handling: resize as resize_output does and check the dtype can hold `result`.
void prepareOut(const char* op, at::Tensor& out, c10::IntArrayRef shape, c10::ScalarType result);
void checkInplace(const char* op, const at::Tensor& self, c10::IntArrayRef shape, c10::ScalarType result);

// Runs `body` over `args` converted to `compute` and broadcast to out's shape.
// `body(Builder&, std::vector<hlo::Value>&)` returns the result value.
template <class Body>
void runPointwise(Op op, std::span<const Arg* const> args, const at::Tensor& out, c10::ScalarType compute,
                  Body&& body) {
  if (out.numel() == 0) return;
  int64_t scalarMask = 0, i = 0;
  for (const Arg* a : args) {
    // As TensorIterator: an operand may be the written tensor itself, never part of it (x[1:].add_(x[:-1])).
    if (a->isTensor()) at::assert_no_partial_overlap(out, a->tensor);
  }
  for (const Arg* a : args) {
    if (a->isTensor()) op.in(a->tensor);
    else {
      op.scalar(a->scalar, compute);
      scalarMask |= int64_t{1} << i;
    }
    ++i;
  }
  std::vector<int64_t> shape = out.sizes().vec();
  // An in-place update of a contiguous tensor from contiguous operands of its shape runs over the flat
  // element order (the same values): the storage is read and written with no reshape in between. With a
  // reshape at a fusion's root, XLA:CPU recomputed AdamW's exp_avg.lerp_ inside the parameter update and
  // copied the donated state buffers (twice the optimizer step's time). In-place only: flat functional chains
  // let XLA fuse a whole recursion (CTC loss's time loop in one Fused graph) into one fusion whose emitter
  // never finished.
  bool flat = out.dim() > 1 && out.is_contiguous();
  bool inPlace = false;
  for (const Arg* a : args)
    if (a->isTensor()) {
      flat = flat && a->tensor.sizes() == out.sizes() && a->tensor.is_contiguous();
      inPlace = inPlace || a->tensor.is_same(out);
    }
  flat = flat && inPlace;
  std::vector<int64_t> computeShape = flat ? std::vector<int64_t>{out.numel()} : shape;
  hlo::DType computeType = toHlo(compute);
  op.attr(scalarMask).attr(static_cast<int64_t>(compute)).out(out).run([&](hlo::Builder& b, Values in, Values ops) {
    std::vector<hlo::Value> vals;
    size_t ti = 0, si = 0;
    for (size_t k = 0; k < args.size(); ++k) {
      bool scalar = (scalarMask >> k) & 1;
      hlo::Value v = scalar ? ops[si++] : in[ti++];
      if (flat && !scalar) v = b.reshape(v, computeShape);
      vals.push_back(lowering::broadcastTo(b, b.convert(v, computeType), computeShape));
    }
    hlo::Value result = body(b, vals);
    return ValueList{flat ? b.reshape(result, shape) : result};
  });
}

template <class Body>
void runPointwise(Op op, std::initializer_list<const Arg*> args, const at::Tensor& out, c10::ScalarType compute,
                  Body&& body) {
  runPointwise(std::move(op), std::span<const Arg* const>(args.begin(), args.size()), out, compute,
               std::forward<Body>(body));
}

// The same over a list of arguments built at run time.
template <class Body>
void runPointwise(Op op, const std::vector<Arg>& args, const at::Tensor& out, c10::ScalarType compute,
                  Body&& body) {
  std::vector<const Arg*> ptrs;
  for (const Arg& a : args) ptrs.push_back(&a);
  runPointwise(std::move(op), std::span<const Arg* const>(ptrs), out, compute, std::forward<Body>(body));
}

}  // namespace tpu::aten
