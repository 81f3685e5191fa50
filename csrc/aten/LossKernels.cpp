// nll_loss (1-D/2-D and the 2d spatial variant) and mse_loss, forward and
// backward. cross_entropy decomposes into log_softmax + nll_loss.
//
// Targets are range-checked on the device without a sync: the forward
// program also returns "a target outside [0, C) that is not ignore_index"
// (Op::checksIndices), raised as IndexError at the next synchronization, or
// at the op in debug mode. The backward trusts the forward's check.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "OpRunner.h"
#include "csrc/lowering/Loss.h"

namespace tpu::aten {
namespace {

using OptTensor = std::optional<at::Tensor>;

bool has(const OptTensor& t) { return t.has_value() && t->defined(); }

// ---- nll_loss -------------------------------------------------------------------

void checkNllCommon(const at::Tensor& self, const at::Tensor& target, const OptTensor& weight,
                    int64_t reduction) {
  TORCH_CHECK(target.scalar_type() == c10::kLong || target.scalar_type() == c10::kByte,
              "expected target dtype to be Long or Byte, but got ", target.scalar_type());
  TORCH_CHECK(c10::isFloatingType(self.scalar_type()), "nll_loss: expected a floating point input, got ",
              self.scalar_type());
  TORCH_CHECK(reduction >= 0 && reduction <= 2, "nll_loss: invalid reduction ", reduction);
  int64_t classes = self.dim() == 1 ? self.size(0) : self.size(1);
  TORCH_CHECK(!has(weight) || (weight->dim() == 1 && weight->numel() == classes),
              "weight tensor should be defined either for all ", classes,
              " classes or no classes but got weight tensor of shape: ", weight->sizes());
}

void checkNll(const at::Tensor& self, const at::Tensor& target, const OptTensor& weight, int64_t reduction) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  bool noBatch = self.dim() == 1 && target.dim() == 0;
  TORCH_CHECK(noBatch || self.size(0) == target.size(0), "size mismatch (got input: ", self.sizes(),
              ", target: ", target.sizes(), ")");
  checkNllCommon(self, target, weight, reduction);
}

void checkNll2d(const at::Tensor& self, const at::Tensor& target, const OptTensor& weight, int64_t reduction) {
  TORCH_CHECK(self.dim() == 4, "only batches of spatial inputs supported (4D tensors), but got input of dimension: ",
              self.dim());
  TORCH_CHECK(target.dim() == 3, "only batches of spatial targets supported (3D tensors) but got targets of "
              "dimension: ", target.dim());
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) && self.size(3) == target.size(2),
              "size mismatch (got input: ", self.sizes(), ", target: ", target.sizes(), ")");
  checkNllCommon(self, target, weight, reduction);
}

std::vector<int64_t> nllOutShape(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  if (reduction != lowering::kNone || self.dim() == 1) return {};
  return target.sizes().vec();
}

void nllInto(const at::Tensor& self, const at::Tensor& target, const OptTensor& weight, int64_t reduction,
             int64_t ignoreIndex, at::Tensor& output, at::Tensor& totalWeight, bool spatial) {
  at::native::resize_output(output, nllOutShape(self, target, reduction));
  at::native::resize_output(totalWeight, {});
  c10::ScalarType compute = opmathType(self.scalar_type());
  hlo::DType ct = toHlo(compute);
  // The name is part of the program (the out-of-range flag's code): keyed by attr(spatial).
  Op op = TPU_OP(spatial ? "aten::nll_loss2d_forward" : "aten::nll_loss_forward");
  op.attr(spatial).in(self).in(target);
  if (has(weight)) op.in(*weight);
  op.scalar(ignoreIndex, c10::kLong).attr(reduction).attr(has(weight)).attr(static_cast<int64_t>(compute));
  if (output.numel() > 0) op.out(output);
  int64_t classes = self.dim() == 1 ? self.size(0) : self.size(1);
  op.out(totalWeight).checksIndices().run([&](hlo::Builder& b, Values in, Values ops) {
    hlo::Value w;
    if (has(weight)) w = b.convert(in[2], ct);
    auto r = lowering::nllLoss(b, b.convert(in[0], ct), in[1], has(weight) ? &w : nullptr, reduction, ops[0]);
    hlo::Value oob = lowering::nllTargetOutOfRange(b, in[1], classes, ops[0]);
    return output.numel() > 0 ? ValueList{r.loss, r.totalWeight, oob} : ValueList{r.totalWeight, oob};
  });
}

template <bool Spatial>
struct Nll {
  static void check(const at::Tensor& self, const at::Tensor& target, const OptTensor& weight, int64_t reduction) {
    Spatial ? checkNll2d(self, target, weight, reduction) : checkNll(self, target, weight, reduction);
  }
  static std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& self, const at::Tensor& target,
                                                    const OptTensor& weight, int64_t reduction,
                                                    c10::SymInt ignoreIndex) {
    check(self, target, weight, reduction);
    at::Tensor out = at::empty({0}, self.options()), total = at::empty({}, self.options());
    nllInto(self, target, weight, reduction, ignoreIndex.expect_int(), out, total, Spatial);
    return {out, total};
  }
  static std::tuple<at::Tensor&, at::Tensor&> forwardOut(const at::Tensor& self, const at::Tensor& target,
                                                         const OptTensor& weight, int64_t reduction,
                                                         c10::SymInt ignoreIndex, at::Tensor& out,
                                                         at::Tensor& total) {
    check(self, target, weight, reduction);
    nllInto(self, target, weight, reduction, ignoreIndex.expect_int(), out, total, Spatial);
    return {out, total};
  }

  static at::Tensor& backwardInto(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                  const OptTensor& weight, int64_t reduction, int64_t ignoreIndex,
                                  const at::Tensor& totalWeight, at::Tensor& gradInput) {
    check(self, target, weight, reduction);
    if (reduction == lowering::kNone && self.dim() > 1) {
      TORCH_CHECK(grad.sizes().equals(target.sizes()), "nll_loss_backward: expected grad_output of shape ",
                  target.sizes(), " but got ", grad.sizes());
    } else {
      TORCH_CHECK(grad.numel() == 1, "Expected a single element grad_output tensor, but got: ", grad.sizes());
    }
    TORCH_CHECK(totalWeight.numel() == 1, "expected total_weight to be a single element tensor, got: ",
                totalWeight.sizes(), " (", totalWeight.numel(), " elements)");
    at::native::resize_output(gradInput, self.sizes());
    if (gradInput.numel() == 0) return gradInput;
    c10::ScalarType compute = opmathType(self.scalar_type());
    hlo::DType ct = toHlo(compute);
    Op op = TPU_OP("aten::nll_loss_backward");
    op.in(grad).in(self).in(target).in(totalWeight);
    if (has(weight)) op.in(*weight);
    op.scalar(ignoreIndex, c10::kLong).attr(reduction).attr(has(weight)).attr(static_cast<int64_t>(compute));
    op.out(gradInput).run([&](hlo::Builder& b, Values in, Values ops) {
      auto c = [&](int i) { return b.convert(in[i], ct); };
      hlo::Value w;
      if (has(weight)) w = c(4);
      hlo::Value g = c(0), total = b.reshape(c(3), {});
      if (reduction != lowering::kNone || self.dim() == 1) g = b.reshape(g, {});
      return ValueList{lowering::nllLossBackward(b, g, c(1), in[2], has(weight) ? &w : nullptr, reduction, ops[0],
                                                 total)};
    });
    return gradInput;
  }
  static at::Tensor backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                             const OptTensor& weight, int64_t reduction, c10::SymInt ignoreIndex,
                             const at::Tensor& totalWeight) {
    at::Tensor out = at::empty({0}, self.options());
    return backwardInto(grad, self, target, weight, reduction, ignoreIndex.expect_int(), totalWeight, out);
  }
  static at::Tensor& backwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                 const OptTensor& weight, int64_t reduction, c10::SymInt ignoreIndex,
                                 const at::Tensor& totalWeight, at::Tensor& out) {
    return backwardInto(grad, self, target, weight, reduction, ignoreIndex.expect_int(), totalWeight, out);
  }
};

// ---- mse_loss -------------------------------------------------------------------

void checkMse(c10::ScalarType t) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(t), "\"mse_loss\" not implemented for '", c10::toString(t), "'");
}

at::Tensor& mseInto(const at::Tensor& self, const at::Tensor& target, int64_t reduction, at::Tensor& out) {
  TORCH_CHECK(reduction >= 0 && reduction <= 2, "mse_loss: invalid reduction ", reduction);
  c10::ScalarType result = out.scalar_type();
  checkMse(result);
  std::vector<int64_t> shape = at::infer_size(self.sizes(), target.sizes());
  at::native::resize_output(out, reduction == lowering::kNone ? shape : std::vector<int64_t>{});
  if (out.numel() == 0) return out;
  c10::ScalarType compute = opmathType(result);
  hlo::DType ct = toHlo(compute);
  TPU_OP("aten::mse_loss").in(self).in(target).attr(reduction).attr(static_cast<int64_t>(compute)).out(out).run(
      [&](hlo::Builder& b, Values in, Values) {
        hlo::Value x = lowering::broadcastTo(b, b.convert(in[0], ct), shape);
        hlo::Value y = lowering::broadcastTo(b, b.convert(in[1], ct), shape);
        return ValueList{lowering::mseLoss(b, x, y, reduction)};
      });
  return out;
}
at::Tensor mse(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  c10::ScalarType result = c10::promoteTypes(self.scalar_type(), target.scalar_type());
  checkMse(result);
  at::Tensor out = at::empty({0}, self.options().dtype(result));
  return mseInto(self, target, reduction, out);
}
at::Tensor& mseOut(const at::Tensor& self, const at::Tensor& target, int64_t reduction, at::Tensor& out) {
  c10::ScalarType result = c10::promoteTypes(self.scalar_type(), target.scalar_type());
  TORCH_CHECK(c10::canCast(result, out.scalar_type()), "mse_loss: result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
  return mseInto(self, target, reduction, out);
}

at::Tensor& mseBackwardInto(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                            int64_t reduction, at::Tensor& out) {
  checkMse(out.scalar_type());
  std::vector<int64_t> shape = at::infer_size(self.sizes(), target.sizes());
  if (reduction == lowering::kNone) shape = at::infer_size(shape, grad.sizes());
  else TORCH_CHECK(grad.numel() == 1, "mse_loss_backward: expected a single element grad_output, got ", grad.sizes());
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return out;
  c10::ScalarType compute = opmathType(out.scalar_type());
  hlo::DType ct = toHlo(compute);
  TPU_OP("aten::mse_loss_backward").in(grad).in(self).in(target).attr(reduction).attr(static_cast<int64_t>(compute))
      .out(out).run([&](hlo::Builder& b, Values in, Values) {
        hlo::Value g = b.convert(in[0], ct);
        g = reduction == lowering::kNone ? lowering::broadcastTo(b, g, shape) : b.reshape(g, {});
        hlo::Value x = lowering::broadcastTo(b, b.convert(in[1], ct), shape);
        hlo::Value y = lowering::broadcastTo(b, b.convert(in[2], ct), shape);
        return ValueList{lowering::mseLossBackward(b, g, x, y, reduction)};
      });
  return out;
}
at::Tensor mseBackward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  at::Tensor out = at::empty({0}, self.options());
  return mseBackwardInto(grad, self, target, reduction, out);
}
at::Tensor& mseBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                           int64_t reduction, at::Tensor& out) {
  return mseBackwardInto(grad, self, target, reduction, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nll_loss_forward", &Nll<false>::forward);
  m.impl("nll_loss_forward.output", &Nll<false>::forwardOut);
  m.impl("nll_loss_backward", &Nll<false>::backward);
  m.impl("nll_loss_backward.grad_input", &Nll<false>::backwardOut);
  m.impl("nll_loss2d_forward", &Nll<true>::forward);
  m.impl("nll_loss2d_forward.output", &Nll<true>::forwardOut);
  m.impl("nll_loss2d_backward", &Nll<true>::backward);
  m.impl("nll_loss2d_backward.grad_input", &Nll<true>::backwardOut);
  m.impl("mse_loss", mse);
  m.impl("mse_loss.out", mseOut);
  m.impl("mse_loss_backward", mseBackward);
  m.impl("mse_loss_backward.grad_input", mseBackwardOut);
}

}  // namespace tpu::aten
