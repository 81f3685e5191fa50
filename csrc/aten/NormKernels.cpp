// Softmax/log_softmax, layer norm, group norm and batch norm (all variants
// the nn modules, autograd and export decompositions reach), forward and
// backward. Statistics and math are in float32 for float16/bfloat16 inputs.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "Elementwise.h"
#include "OpRunner.h"
#include "csrc/lowering/Norm.h"

namespace tpu::aten {
namespace {

using OptTensor = std::optional<at::Tensor>;

bool has(const OptTensor& t) { return t.has_value() && t->defined(); }

bool isReduced(c10::ScalarType t) { return t == c10::kHalf || t == c10::kBFloat16; }

// Dtype of saved statistics: float when a reduced-precision input meets float
// parameters (CPU's "mixed type"), else the input's.
c10::ScalarType statType(const at::Tensor& input, std::initializer_list<const OptTensor*> params) {
  if (!isReduced(input.scalar_type())) return input.scalar_type();
  for (const OptTensor* p : params)
    if (has(*p) && p->value().scalar_type() == c10::kFloat) return c10::kFloat;
  return input.scalar_type();
}

// Collects optional tensor inputs of an Op; the lambda takes them back in order.
struct Optionals {
  int64_t mask = 0;
  int n = 0;
  void add(Op& op, const OptTensor& t) {
    if (has(t)) {
      op.in(*t);
      mask |= int64_t{1} << n;
    }
    ++n;
  }
};
struct Taker {
  Values in;
  size_t next;
  hlo::DType ct;
  int64_t mask;
  int n = 0;
  // The next optional input converted to the compute dtype (present: true).
  bool take(hlo::Builder& b, hlo::Value& v) {
    bool present = (mask >> n++) & 1;
    if (present) v = b.convert(in[next++], ct);
    return present;
  }
};

// ---- softmax / log_softmax ------------------------------------------------------

template <bool Log>
struct Softmax {
  static constexpr const char* name() { return Log ? "_log_softmax" : "_softmax"; }
  static at::Tensor& into(const at::Tensor& self, int64_t dim, at::Tensor& out) {
    TORCH_CHECK(c10::isFloatingType(self.scalar_type()), name(), ": expected a floating point input, got ",
                self.scalar_type());
    int64_t d = at::maybe_wrap_dim(dim, self.dim());
    at::native::resize_output(out, self.sizes());
    if (out.numel() == 0) return out;
    c10::ScalarType compute = opmathType(out.scalar_type());
    hlo::DType ct = toHlo(compute);
    TPU_OP(name()).in(self).attr(d).attr(static_cast<int64_t>(compute)).out(out).run(
        [&](hlo::Builder& b, Values in, Values) {
          return ValueList{lowering::softmax(b, b.convert(in[0], ct), d, Log)};
        });
    return out;
  }
  static c10::ScalarType resultType(const at::Tensor& self, bool halfToFloat) {
    return halfToFloat && isReduced(self.scalar_type()) ? c10::kFloat : self.scalar_type();
  }
  static at::Tensor functional(const at::Tensor& self, int64_t dim, bool halfToFloat) {
    at::Tensor out = at::empty({0}, self.options().dtype(resultType(self, halfToFloat)));
    return into(self, dim, out);
  }
  static at::Tensor& out(const at::Tensor& self, int64_t dim, bool halfToFloat, at::Tensor& out) {
    c10::ScalarType t = resultType(self, halfToFloat);
    TORCH_CHECK(out.scalar_type() == t, name(), ": expected out tensor of dtype ", t, ", got ", out.scalar_type());
    return into(self, dim, out);
  }

  static at::Tensor& backwardInto(const at::Tensor& grad, const at::Tensor& output, int64_t dim, at::Tensor& out) {
    int64_t d = at::maybe_wrap_dim(dim, grad.dim());
    TORCH_CHECK(grad.sizes() == output.sizes(), name(), "_backward_data: grad_output of shape ", grad.sizes(),
                " doesn't match output of shape ", output.sizes());
    at::native::resize_output(out, grad.sizes());
    if (out.numel() == 0) return out;
    c10::ScalarType compute = opmathType(out.scalar_type());
    hlo::DType ct = toHlo(compute);
    TPU_OP(name()).in(grad).in(output).attr(d).attr(static_cast<int64_t>(compute)).out(out).run(
        [&](hlo::Builder& b, Values in, Values) {
          return ValueList{lowering::softmaxBackward(b, b.convert(in[0], ct), b.convert(in[1], ct), d, Log)};
        });
    return out;
  }
  static at::Tensor backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                             c10::ScalarType inputDtype) {
    at::Tensor out = at::empty({0}, grad.options().dtype(inputDtype));
    return backwardInto(grad, output, dim, out);
  }
  static at::Tensor& backwardOut(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                 c10::ScalarType inputDtype, at::Tensor& out) {
    return backwardInto(grad, output, dim, out);
  }
};

// ---- layer norm -----------------------------------------------------------------

int64_t layerNormAxis(const at::Tensor& input, c10::IntArrayRef shape, const OptTensor& weight,
                      const OptTensor& bias) {
  int64_t nd = static_cast<int64_t>(shape.size());
  TORCH_CHECK(nd >= 1, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
              "element, but got normalized_shape = ", shape);
  TORCH_CHECK(!has(weight) || weight->sizes().equals(shape), "Expected weight to be of same shape as "
              "normalized_shape, but got weight of shape ", weight->sizes(), " and normalized_shape = ", shape);
  TORCH_CHECK(!has(bias) || bias->sizes().equals(shape), "Expected bias to be of same shape as normalized_shape, "
              "but got bias of shape ", bias->sizes(), " and normalized_shape = ", shape);
  int64_t axis = input.dim() - nd;
  bool ok = axis >= 0;
  for (int64_t i = 0; ok && i < nd; ++i) ok = input.size(axis + i) == shape[i];
  if (!ok) {
    std::ostringstream ss;
    ss << "Given normalized_shape=" << shape << ", expected input with shape [*";
    for (int64_t s : shape) ss << ", " << s;
    ss << "], but got input of size" << input.sizes();
    TORCH_CHECK(false, ss.str());
  }
  return axis;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layerNorm(const at::Tensor& input, c10::SymIntArrayRef symShape,
                                                         const OptTensor& weight, const OptTensor& bias,
                                                         double eps) {
  c10::IntArrayRef shape = C10_AS_INTARRAYREF_SLOW(symShape);
  int64_t axis = layerNormAxis(input, shape, weight, bias);
  std::vector<int64_t> statShape(input.sizes().begin(), input.sizes().begin() + axis);
  statShape.resize(input.dim(), 1);
  c10::ScalarType st = statType(input, {&weight, &bias});
  at::Tensor out = at::empty(input.sizes(), input.options());
  at::Tensor mean = at::empty(statShape, input.options().dtype(st));
  at::Tensor rstd = at::empty(statShape, input.options().dtype(st));
  if (input.numel() == 0) return {out, mean, rstd};
  c10::ScalarType compute = opmathType(input.scalar_type());
  hlo::DType ct = toHlo(compute);
  Op op = TPU_OP("native_layer_norm");
  op.in(input);
  Optionals opt;
  opt.add(op, weight);
  opt.add(op, bias);
  op.scalar(eps, compute).attr(axis).attr(opt.mask).attr(static_cast<int64_t>(compute));
  op.out(out).out(mean).out(rstd).run([&](hlo::Builder& b, Values in, Values ops) {
    Taker t{in, 1, ct, opt.mask};
    hlo::Value w, bi;
    bool hw = t.take(b, w), hb = t.take(b, bi);
    auto r = lowering::layerNorm(b, b.convert(in[0], ct), axis, hw ? &w : nullptr, hb ? &bi : nullptr, ops[0]);
    return ValueList{r.out, r.mean, r.rstd};
  });
  return {out, mean, rstd};
}

// Runs a norm backward whose lowering yields {dx, dw, db}; outputs per mask.
template <class Build>
void runNormBackward(Op op, std::array<bool, 3> mask, at::Tensor& dx, at::Tensor& dw, at::Tensor& db,
                     Build&& build) {
  bool any = false;
  at::Tensor* outs[3] = {&dx, &dw, &db};
  int64_t bits = 0;
  for (int i = 0; i < 3; ++i) {
    if (mask[i] && outs[i]->defined() && outs[i]->numel() > 0) {
      op.out(*outs[i]);
      bits |= 1 << i;
      any = true;
    }
  }
  if (!any) return;
  op.attr(bits).run([&](hlo::Builder& b, Values in, Values ops) {
    lowering::NormGrads g = build(b, in, ops);
    ValueList r;
    if (bits & 1) r.push_back(g.dx);
    if (bits & 2) r.push_back(g.dw);
    if (bits & 4) r.push_back(g.db);
    return r;
  });
}

// A parameter gradient, zero-filled when the input is empty (nothing to sum).
at::Tensor gradBuffer(bool wanted, c10::IntArrayRef shape, const at::TensorOptions& options, const at::Tensor& input) {
  if (!wanted) return at::Tensor();
  return input.numel() == 0 ? at::zeros(shape, options) : at::empty(shape, options);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layerNormBackward(
    const at::Tensor& grad, const at::Tensor& input, c10::SymIntArrayRef symShape, const at::Tensor& mean,
    const at::Tensor& rstd, const OptTensor& weight, const OptTensor& bias, std::array<bool, 3> mask) {
  c10::IntArrayRef shape = C10_AS_INTARRAYREF_SLOW(symShape);
  int64_t axis = layerNormAxis(input, shape, weight, bias);
  at::Tensor dx = mask[0] ? at::empty(input.sizes(), input.options()) : at::Tensor();
  at::Tensor dw = gradBuffer(mask[1] && has(weight), shape, has(weight) ? weight->options() : input.options(), input);
  at::Tensor db = gradBuffer(mask[2] && has(bias), shape, has(bias) ? bias->options() : input.options(), input);
  if (input.numel() == 0) return {dx, dw, db};
  c10::ScalarType compute = opmathType(input.scalar_type());
  hlo::DType ct = toHlo(compute);
  Op op = TPU_OP("native_layer_norm_backward");
  op.in(grad).in(input).in(mean).in(rstd);
  Optionals opt;
  opt.add(op, weight);
  op.attr(axis).attr(opt.mask).attr(static_cast<int64_t>(compute));
  runNormBackward(op, mask, dx, dw, db, [&](hlo::Builder& b, Values in, Values) {
    Taker t{in, 4, ct, opt.mask};
    hlo::Value w;
    bool hw = t.take(b, w);
    auto c = [&](int i) { return b.convert(in[i], ct); };
    return lowering::layerNormBackward(b, c(0), c(1), c(2), c(3), axis, hw ? &w : nullptr);
  });
  return {dx, dw, db};
}

// ---- group norm -----------------------------------------------------------------

void checkGroupNorm(const at::Tensor& input, const OptTensor& weight, const OptTensor& bias, int64_t n, int64_t c,
                    int64_t hw, int64_t groups) {
  TORCH_CHECK(groups > 0 && c % groups == 0, "Expected number of channels in input to be divisible by num_groups, "
              "but got input of shape ", input.sizes(), " and num_groups=", groups);
  TORCH_CHECK(!has(weight) || (weight->dim() == 1 && weight->numel() == c), "Expected weight to be a vector of size "
              "equal to the number of channels in input, but got weight of shape ", weight->sizes(),
              " and input of shape ", input.sizes());
  TORCH_CHECK(!has(bias) || (bias->dim() == 1 && bias->numel() == c), "Expected bias to be a vector of size equal "
              "to the number of channels in input, but got bias of shape ", bias->sizes(), " and input of shape ",
              input.sizes());
  TORCH_CHECK(input.numel() == n * c * hw, "Expected X.numel() == N * C * HxW to be true, but got false.");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> groupNorm(const at::Tensor& input, const OptTensor& weight,
                                                         const OptTensor& bias, c10::SymInt symN, c10::SymInt symC,
                                                         c10::SymInt symHw, int64_t groups, double eps) {
  int64_t n = symN.expect_int(), c = symC.expect_int(), hw = symHw.expect_int();
  checkGroupNorm(input, weight, bias, n, c, hw, groups);
  c10::ScalarType st = statType(input, {&weight, &bias});
  at::Tensor out = at::empty(input.sizes(), input.options());
  at::Tensor mean = at::empty({n, groups}, input.options().dtype(st));
  at::Tensor rstd = at::empty({n, groups}, input.options().dtype(st));
  if (input.numel() == 0) return {out, mean, rstd};
  c10::ScalarType compute = opmathType(input.scalar_type());
  hlo::DType ct = toHlo(compute);
  Op op = TPU_OP("native_group_norm");
  op.in(input);
  Optionals opt;
  opt.add(op, weight);
  opt.add(op, bias);
  op.scalar(eps, compute).attr(n).attr(c).attr(hw).attr(groups).attr(opt.mask).attr(static_cast<int64_t>(compute));
  op.out(out).out(mean).out(rstd).run([&](hlo::Builder& b, Values in, Values ops) {
    Taker t{in, 1, ct, opt.mask};
    hlo::Value w, bi;
    bool hw_ = t.take(b, w), hb = t.take(b, bi);
    auto r = lowering::groupNorm(b, b.convert(in[0], ct), n, c, hw, groups, hw_ ? &w : nullptr, hb ? &bi : nullptr,
                                 ops[0]);
    return ValueList{r.out, r.mean, r.rstd};
  });
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> groupNormBackward(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& rstd,
    const OptTensor& weight, c10::SymInt symN, c10::SymInt symC, c10::SymInt symHw, int64_t groups,
    std::array<bool, 3> mask) {
  int64_t n = symN.expect_int(), c = symC.expect_int(), hw = symHw.expect_int();
  checkGroupNorm(input, weight, std::nullopt, n, c, hw, groups);
  auto paramOptions = has(weight) ? weight->options() : input.options();
  at::Tensor dx = mask[0] ? at::empty(input.sizes(), input.options()) : at::Tensor();
  at::Tensor dw = gradBuffer(mask[1], {c}, paramOptions, input);
  at::Tensor db = gradBuffer(mask[2], {c}, paramOptions, input);
  if (input.numel() == 0) return {dx, dw, db};
  c10::ScalarType compute = opmathType(input.scalar_type());
  hlo::DType ct = toHlo(compute);
  Op op = TPU_OP("native_group_norm_backward");
  op.in(grad).in(input).in(mean).in(rstd);
  Optionals opt;
  opt.add(op, weight);
  op.attr(n).attr(c).attr(hw).attr(groups).attr(opt.mask).attr(static_cast<int64_t>(compute));
  runNormBackward(op, mask, dx, dw, db, [&](hlo::Builder& b, Values in, Values) {
    Taker t{in, 4, ct, opt.mask};
    hlo::Value w;
    bool hasW = t.take(b, w);
    auto cv = [&](int i) { return b.convert(in[i], ct); };
    return lowering::groupNormBackward(b, cv(0), cv(1), cv(2), cv(3), n, c, hw, groups, hasW ? &w : nullptr);
  });
  return {dx, dw, db};
}

// ---- batch norm -----------------------------------------------------------------

void checkBatchNorm(const at::Tensor& input, std::initializer_list<std::pair<const char*, const OptTensor*>> params) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected an input with at least 2 dimensions (N, C, ...), got ",
              input.dim());
  int64_t c = input.size(1);
  for (auto& [name, p] : params)
    TORCH_CHECK(!has(*p) || p->value().numel() == c, name, " should contain ", c, " elements not ",
                p->value().numel());
}

// out, save_mean, save_invstd (training: batch statistics, running stats updated
// in place; eval: the running statistics are used and the saved ones are empty).
void batchNormInto(const at::Tensor& input, const OptTensor& weight, const OptTensor& bias,
                   const OptTensor& runningMean, const OptTensor& runningVar, bool training, double momentum,
                   double eps, at::Tensor& out, at::Tensor& saveMean, at::Tensor& saveInvstd) {
  checkBatchNorm(input, {{"weight", &weight}, {"bias", &bias}, {"running_mean", &runningMean},
                         {"running_var", &runningVar}});
  TORCH_CHECK(training || (has(runningMean) && has(runningVar)),
              "batch_norm: running_mean and running_var must be defined in evaluation mode");
  int64_t c = input.size(1);
  at::native::resize_output(out, input.sizes());
  at::native::resize_output(saveMean, {training ? c : 0});
  at::native::resize_output(saveInvstd, {training ? c : 0});
  if (input.numel() == 0) return;
  c10::ScalarType compute = opmathType(input.scalar_type());
  hlo::DType ct = toHlo(compute);
  Op op = TPU_OP("native_batch_norm");
  op.in(input);
  Optionals opt;
  for (const OptTensor* p : {&weight, &bias, &runningMean, &runningVar}) opt.add(op, *p);
  op.scalar(momentum, compute).scalar(eps, compute).attr(training).attr(opt.mask).attr(static_cast<int64_t>(compute));
  op.out(out);
  if (training) {
    op.out(saveMean).out(saveInvstd);
    if (has(runningMean)) op.out(*runningMean);
    if (has(runningVar)) op.out(*runningVar);
  }
  op.run([&](hlo::Builder& b, Values in, Values ops) {
    Taker t{in, 1, ct, opt.mask};
    hlo::Value w, bi, rm, rv;
    bool hw = t.take(b, w), hb = t.take(b, bi), hm = t.take(b, rm), hv = t.take(b, rv);
    hlo::Value x = b.convert(in[0], ct);
    if (!training) {
      hlo::Value invstd = lowering::invStd(b, rv, ops[1]);
      return ValueList{lowering::batchNormApply(b, x, rm, invstd, hw ? &w : nullptr, hb ? &bi : nullptr)};
    }
    auto r = lowering::batchNormTrain(b, x, hw ? &w : nullptr, hb ? &bi : nullptr, hm ? &rm : nullptr,
                                      hv ? &rv : nullptr, ops[0], ops[1]);
    ValueList res{r.out, r.mean, r.invstd};
    if (hm) res.push_back(r.runningMean);
    if (hv) res.push_back(r.runningVar);
    return res;
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batchNormAlloc(const at::Tensor& input, const OptTensor& weight,
                                                              const OptTensor& bias, const OptTensor& runningMean,
                                                              const OptTensor& runningVar, bool training,
                                                              double momentum, double eps) {
  c10::ScalarType st = statType(input, {&weight, &bias, &runningMean, &runningVar});
  at::Tensor out = at::empty({0}, input.options());
  at::Tensor mean = at::empty({0}, input.options().dtype(st));
  at::Tensor invstd = at::empty({0}, input.options().dtype(st));
  batchNormInto(input, weight, bias, runningMean, runningVar, training, momentum, eps, out, mean, invstd);
  return {out, mean, invstd};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> batchNormOut(const at::Tensor& input, const OptTensor& weight,
                                                               const OptTensor& bias, const OptTensor& runningMean,
                                                               const OptTensor& runningVar, bool training,
                                                               double momentum, double eps, at::Tensor& out,
                                                               at::Tensor& mean, at::Tensor& invstd) {
  batchNormInto(input, weight, bias, runningMean, runningVar, training, momentum, eps, out, mean, invstd);
  return {out, mean, invstd};
}

// _native_batch_norm_legit: running stats are mandatory tensors.
std::tuple<at::Tensor, at::Tensor, at::Tensor> legit(const at::Tensor& input, const OptTensor& weight,
                                                     const OptTensor& bias, at::Tensor& runningMean,
                                                     at::Tensor& runningVar, bool training, double momentum,
                                                     double eps) {
  return batchNormAlloc(input, weight, bias, runningMean, runningVar, training, momentum, eps);
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> legitOut(const at::Tensor& input, const OptTensor& weight,
                                                           const OptTensor& bias, at::Tensor& runningMean,
                                                           at::Tensor& runningVar, bool training, double momentum,
                                                           double eps, at::Tensor& out, at::Tensor& mean,
                                                           at::Tensor& invstd) {
  batchNormInto(input, weight, bias, runningMean, runningVar, training, momentum, eps, out, mean, invstd);
  return {out, mean, invstd};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> legitNoStats(const at::Tensor& input, const OptTensor& weight,
                                                            const OptTensor& bias, bool training, double momentum,
                                                            double eps) {
  return batchNormAlloc(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps);
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> legitNoStatsOut(const at::Tensor& input, const OptTensor& weight,
                                                                  const OptTensor& bias, bool training,
                                                                  double momentum, double eps, at::Tensor& out,
                                                                  at::Tensor& mean, at::Tensor& invstd) {
  batchNormInto(input, weight, bias, std::nullopt, std::nullopt, training, momentum, eps, out, mean, invstd);
  return {out, mean, invstd};
}
// _batch_norm_with_update: training with running stats, plus an empty reserve.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> withUpdate(const at::Tensor& input,
                                                                      const OptTensor& weight, const OptTensor& bias,
                                                                      at::Tensor& runningMean, at::Tensor& runningVar,
                                                                      double momentum, double eps) {
  auto [out, mean, invstd] = batchNormAlloc(input, weight, bias, runningMean, runningVar, true, momentum, eps);
  return {out, mean, invstd, at::empty({0}, input.options().dtype(c10::kByte))};
}
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> withUpdateOut(
    const at::Tensor& input, const OptTensor& weight, const OptTensor& bias, at::Tensor& runningMean,
    at::Tensor& runningVar, double momentum, double eps, at::Tensor& out, at::Tensor& mean, at::Tensor& invstd,
    at::Tensor& reserve) {
  batchNormInto(input, weight, bias, runningMean, runningVar, true, momentum, eps, out, mean, invstd);
  at::native::resize_output(reserve, {0});
  return {out, mean, invstd, reserve};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batchNormBackward(
    const at::Tensor& grad, const at::Tensor& input, const OptTensor& weight, const OptTensor& runningMean,
    const OptTensor& runningVar, const OptTensor& saveMean, const OptTensor& saveInvstd, bool train, double eps,
    std::array<bool, 3> mask) {
  checkBatchNorm(input, {{"weight", &weight}, {"running_mean", &runningMean}, {"running_var", &runningVar}});
  const OptTensor& mean = train ? saveMean : runningMean;
  const OptTensor& spread = train ? saveInvstd : runningVar;
  TORCH_CHECK(has(mean) && has(spread), "native_batch_norm_backward: ",
              train ? "save_mean and save_invstd" : "running_mean and running_var", " must be defined");
  int64_t c = input.size(1);
  auto paramOptions = has(weight) ? weight->options() : input.options();
  at::Tensor dx = mask[0] ? at::empty(input.sizes(), input.options()) : at::Tensor();
  at::Tensor dw = gradBuffer(mask[1], {c}, paramOptions, input);
  at::Tensor db = gradBuffer(mask[2], {c}, paramOptions, input);
  if (input.numel() == 0) return {dx, dw, db};
  c10::ScalarType compute = opmathType(input.scalar_type());
  hlo::DType ct = toHlo(compute);
  Op op = TPU_OP("native_batch_norm_backward");
  op.in(grad).in(input).in(*mean).in(*spread);
  Optionals opt;
  opt.add(op, weight);
  op.scalar(eps, compute).attr(train).attr(opt.mask).attr(static_cast<int64_t>(compute));
  runNormBackward(op, mask, dx, dw, db, [&](hlo::Builder& b, Values in, Values ops) {
    Taker t{in, 4, ct, opt.mask};
    hlo::Value w;
    bool hasW = t.take(b, w);
    auto cv = [&](int i) { return b.convert(in[i], ct); };
    hlo::Value invstd = train ? cv(3) : lowering::invStd(b, cv(3), ops[0]);
    return lowering::batchNormBackward(b, cv(0), cv(1), cv(2), invstd, hasW ? &w : nullptr, train);
  });
  return {dx, dw, db};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batchNormBackwardUpdate(
    const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight, const OptTensor& runningMean,
    const OptTensor& runningVar, const OptTensor& saveMean, const OptTensor& saveVar, bool update, double eps,
    std::array<bool, 3> mask, const at::Tensor& reserve) {
  return batchNormBackward(grad, input, weight, runningMean, runningVar, saveMean, saveVar, update, eps, mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", &Softmax<false>::functional);
  m.impl("_softmax.out", &Softmax<false>::out);
  m.impl("_log_softmax", &Softmax<true>::functional);
  m.impl("_log_softmax.out", &Softmax<true>::out);
  m.impl("_softmax_backward_data", &Softmax<false>::backward);
  m.impl("_softmax_backward_data.out", &Softmax<false>::backwardOut);
  m.impl("_log_softmax_backward_data", &Softmax<true>::backward);
  m.impl("_log_softmax_backward_data.out", &Softmax<true>::backwardOut);

  m.impl("native_layer_norm", layerNorm);
  m.impl("native_layer_norm_backward", layerNormBackward);
  m.impl("native_group_norm", groupNorm);
  m.impl("native_group_norm_backward", groupNormBackward);

  m.impl("native_batch_norm", batchNormAlloc);
  m.impl("native_batch_norm.out", batchNormOut);
  m.impl("_native_batch_norm_legit", legit);
  m.impl("_native_batch_norm_legit.out", legitOut);
  m.impl("_native_batch_norm_legit.no_stats", legitNoStats);
  m.impl("_native_batch_norm_legit.no_stats_out", legitNoStatsOut);
  m.impl("_batch_norm_with_update", withUpdate);
  m.impl("_batch_norm_with_update.out", withUpdateOut);
  m.impl("native_batch_norm_backward", batchNormBackward);
  m.impl("batch_norm_backward", batchNormBackwardUpdate);
}

}  // namespace tpu::aten
