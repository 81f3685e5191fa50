// Random numbers on tpu: every op draws Philox bits from the tensor's device
// generator, passing (seed, offset) as a device operand so that new seeds and
// successive calls reuse one compiled program. Distributions follow CPU
// PyTorch's checks and ranges; float16/bfloat16 are drawn in float32.
#include <ATen/ATen.h>
#include <ATen/native/DistributionTemplates.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "Elementwise.h"
#include "Generator.h"
#include "csrc/lowering/Random.h"

namespace tpu::aten {
namespace {

using Gen = std::optional<at::Generator>;
using hlo::DType;
using hlo::Value;

// The u64[2] {seed, offset} operand for `words` fresh 32-bit words of `gen`.
runtime::HostOperand rngState(const Gen& gen, const at::Tensor& like, uint64_t words) {
  TpuGenerator* g = generatorFor(gen, like.device().index());
  std::lock_guard<std::mutex> lock(g->mutex_);
  runtime::HostOperand o{DType::U64};
  o.count = 2;
  o.i[0] = static_cast<int64_t>(g->current_seed());
  o.i[1] = static_cast<int64_t>(g->reserve(words));
  o.rngWords = gen.has_value() ? runtime::HostOperand::kForeignGenerator : words;
  return o;
}

bool isDouble(c10::ScalarType t) { return t == c10::kDouble; }
// Float dtype in which values of a float dtype are drawn.
c10::ScalarType drawType(c10::ScalarType t) { return isDouble(t) ? c10::kDouble : c10::kFloat; }
int mantissaDigits(c10::ScalarType t) {
  switch (t) {
    case c10::kDouble: return 53;
    case c10::kHalf: return 11;
    case c10::kBFloat16: return 8;
    default: return 24;
  }
}

void checkFloating(const char* kernel, const at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()), "\"", kernel, "\" not implemented for '",
                              self.scalar_type(), "'");
}

// ---- uniform_, normal_ and the other float distributions --------------------

at::Tensor& uniform(at::Tensor& self, double from, double to, Gen gen) {
  if (self.is_complex()) {
    // As CPU: both parts drawn uniformly through the float view.
    at::Tensor parts = at::view_as_real(self);
    uniform(parts, from, to, gen);
    return self;
  }
  checkFloating("check_uniform_bounds", self);
  auto t = self.scalar_type();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "check_uniform_bounds", [&] {
    const auto min = static_cast<double>(std::numeric_limits<scalar_t>::lowest());
    const auto max = static_cast<double>(std::numeric_limits<scalar_t>::max());
    TORCH_CHECK(from >= min && from <= max, "from is out of bounds for ", self.dtype());
    TORCH_CHECK(to >= min && to <= max, "to is out of bounds for ", self.dtype());
    TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
    TORCH_CHECK((to - from) <= std::numeric_limits<scalar_t>::max(), "uniform_ expects to-from <= std::numeric_limits<",
                c10::toString(t), ">::max(), but found to=", to, " and from=", from,
                " which result in to-from to exceed the limit");
  });
  int64_t n = self.numel();
  if (n == 0) return self;
  auto draw = drawType(t);
  DType drawH = toHlo(draw), outH = toHlo(t);
  int digits = mantissaDigits(t);
  TPU_OP("aten::uniform_")
      .scalar(from, draw)
      .scalar(to, draw)
      .operand(rngState(gen, self, n * lowering::wordsPerElement(isDouble(t))))
      .out(self)
      .run([&](hlo::Builder& b, Values, Values ops) {
        Value lo = b.broadcast(ops[0], {n}), hi = b.broadcast(ops[1], {n});
        Value u = lowering::uniform01(b, ops[2], n, drawH, digits);
        // Rounding (to the output dtype too) may reach `to`: such values become `from`.
        Value v = b.convert(b.add(b.mul(u, b.sub(hi, lo)), lo), outH);
        Value atTop = b.compare(hlo::Cmp::GE, b.convert(v, drawH), hi);
        return ValueList{b.select(atTop, b.convert(lo, outH), v)};
      });
  return self;
}

// mean + std * z for standard normal z; exp() of it for log_normal_.
at::Tensor& drawNormal(at::Tensor& self, double mean, double std, Gen gen, bool logNormal) {
  int64_t n = self.numel();
  if (n == 0) return self;
  auto draw = drawType(self.scalar_type());
  DType drawH = toHlo(draw);
  TPU_OP("aten::normal_")
      .scalar(mean, draw)
      .scalar(std, draw)
      .operand(rngState(gen, self, lowering::normalWords(n, isDouble(draw))))
      .attr(logNormal)
      .out(self)
      .run([&](hlo::Builder& b, Values, Values ops) {
        Value z = lowering::normal(b, ops[2], n, drawH);
        Value v = b.add(b.mul(z, b.broadcast(ops[1], {n})), b.broadcast(ops[0], {n}));
        return ValueList{logNormal ? b.unary("exponential", v) : v};
      });
  return self;
}

at::Tensor& normal(at::Tensor& self, double mean, double std, Gen gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.is_complex()) {
    // As CPU: both parts drawn through the float view, each with std / sqrt(2) (so E|z|^2 = std^2).
    at::Tensor parts = at::view_as_real(self);
    drawNormal(parts, mean, std / std::sqrt(2.0), gen, false);
    return self;
  }
  checkFloating("normal_kernel_cpu", self);
  return drawNormal(self, mean, std, gen, false);
}

at::Tensor& logNormal(at::Tensor& self, double mean, double std, Gen gen) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  checkFloating("log_normal_cpu", self);
  return drawNormal(self, mean, std, gen, true);
}

// Distributions that transform one uniform draw u in [0, 1) with two parameters.
enum class FromUniform { Exponential, Cauchy, Geometric };

template <FromUniform K>
void fromUniform(at::Tensor& self, double p0, double p1, Gen gen) {
  int64_t n = self.numel();
  if (n == 0) return;
  auto draw = drawType(self.scalar_type());
  DType drawH = toHlo(draw);
  int digits = isDouble(draw) ? 53 : 24;
  TPU_OP("aten::random_transform")
      .scalar(p0, draw)
      .scalar(p1, draw)
      .operand(rngState(gen, self, n * lowering::wordsPerElement(isDouble(draw))))
      .out(self)
      .run([&](hlo::Builder& b, Values, Values ops) {
        Value u = lowering::uniform01(b, ops[2], n, drawH, digits);
        Value a = b.broadcast(ops[0], {n}), c = b.broadcast(ops[1], {n});
        Value one = b.full(hlo::Type{drawH, {n}}, 1.0);
        if constexpr (K == FromUniform::Exponential) {
          // -log(1 - u) / lambda: finite, as u < 1.
          return ValueList{b.div(b.neg(b.unary("log_plus_one", b.neg(u))), a)};
        } else if constexpr (K == FromUniform::Cauchy) {
          Value angle = b.mul(b.full(hlo::Type{drawH, {n}}, M_PI), b.sub(u, b.full(hlo::Type{drawH, {n}}, 0.5)));
          return ValueList{b.add(a, b.mul(c, b.unary("tan", angle)))};
        } else {
          // ceil(log(1 - u) / log1p(-p)) >= 1, with 1 - u in (0, 1].
          return ValueList{b.unary("ceil", b.div(b.unary("log", b.sub(one, u)), b.unary("log_plus_one", b.neg(a))))};
        }
      });
}

at::Tensor& exponential(at::Tensor& self, double lambd, Gen gen) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  TORCH_CHECK(c10::isFloatingType(self.scalar_type()),
              "Exponential distribution is a continuous probability distribution. dtype must be a floating point "
              "but you specified ",
              self.dtype());
  fromUniform<FromUniform::Exponential>(self, lambd, 0, gen);
  return self;
}

at::Tensor& cauchy(at::Tensor& self, double median, double sigma, Gen gen) {
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  TORCH_CHECK(c10::isFloatingType(self.scalar_type()),
              "Cauchy distribution is a continuous probability distribution. dtype must be a floating point but you "
              "specified ",
              self.dtype());
  fromUniform<FromUniform::Cauchy>(self, median, sigma, gen);
  return self;
}

at::Tensor& geometric(at::Tensor& self, double p, Gen gen) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != c10::kBool, "\"geometric_cpu\" not implemented for 'Bool'");
  fromUniform<FromUniform::Geometric>(self, p, 0, gen);
  return self;
}

// ---- normal with tensor mean/std ---------------------------------------------

// CPU's check that every std is >= 0 (it syncs too: the answer decides the error).
void checkStd(const Arg& std) {
  if (!std.isTensor()) {
    TORCH_CHECK(std.scalar.toDouble() >= 0.0, "normal expects all elements of std >= 0.0");
    return;
  }
  const at::Tensor& s = std.tensor;
  TORCH_CHECK(!s.is_complex(), "normal expects standard deviation to be non-complex");
  if (s.numel() == 0) return;
  at::Tensor ok = at::empty({}, s.options().dtype(c10::kBool));
  int64_t rank = s.dim();
  TPU_OP("aten::normal.check_std").in(s).out(ok).run([&](hlo::Builder& b, Values in, Values) {
    Value nonNegative = b.compare(hlo::Cmp::GE, in[0], b.scalarLike(in[0], 0));
    std::vector<int64_t> dims(rank);
    for (int64_t i = 0; i < rank; ++i) dims[i] = i;
    Value init = b.constantInt(DType::Pred, 1);
    auto all = b.reduce({&nonNegative, 1}, {&init, 1}, dims, [](hlo::Builder& r, std::span<const Value> a) {
      return std::vector<Value>{r.binary("and", a[0], a[1])};
    });
    return ValueList{all[0]};
  });
  TORCH_CHECK(ok.item<bool>(), "normal expects all elements of std >= 0.0");
}

// out = normal(0, 1) * std + mean, mean and std broadcast to out's shape.
void normalInto(const Arg& mean, const Arg& std, at::Tensor& out, Gen gen) {
  checkFloating("normal_kernel_cpu", out);
  int64_t n = out.numel();
  if (n == 0) return;
  auto compute = opmathType(out.scalar_type());
  DType computeH = toHlo(compute);
  auto draw = drawType(out.scalar_type());
  DType drawH = toHlo(draw);
  std::vector<int64_t> shape = out.sizes().vec();
  Op op = TPU_OP("aten::normal");
  int64_t scalarMask = 0;
  const Arg* args[] = {&mean, &std};
  for (int i = 0; i < 2; ++i) {
    if (args[i]->isTensor()) op.in(args[i]->tensor);
    else {
      op.scalar(args[i]->scalar, compute);
      scalarMask |= int64_t{1} << i;
    }
  }
  op.operand(rngState(gen, out, lowering::normalWords(n, isDouble(draw))))
      .attr(scalarMask)
      .out(out)
      .run([&](hlo::Builder& b, Values in, Values ops) {
        size_t ti = 0, si = 0;
        Value v[2];
        for (int i = 0; i < 2; ++i) {
          Value x = (scalarMask >> i) & 1 ? ops[si++] : in[ti++];
          v[i] = lowering::broadcastTo(b, b.convert(x, computeH), shape);
        }
        Value z = b.convert(b.reshape(lowering::normal(b, ops.back(), n, drawH), shape), computeH);
        return ValueList{b.add(b.mul(z, v[1]), v[0])};
      });
}

at::Tensor normalTensorFloat(const at::Tensor& mean, double std, Gen gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  at::Tensor out = at::empty_like(mean, c10::MemoryFormat::Contiguous);
  normalInto(Arg::of(mean), Arg::of(c10::Scalar(std)), out, gen);
  return out;
}
at::Tensor& normalTensorFloatOut(const at::Tensor& mean, double std, Gen gen, at::Tensor& out) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  at::native::resize_output(out, at::infer_size(mean.sizes(), out.sizes()));
  normalInto(Arg::of(mean), Arg::of(c10::Scalar(std)), out, gen);
  return out;
}
at::Tensor normalFloatTensor(double mean, const at::Tensor& std, Gen gen) {
  Arg s = Arg::of(std);
  checkStd(s);
  at::Tensor out = at::empty_like(std, c10::MemoryFormat::Contiguous);
  normalInto(Arg::of(c10::Scalar(mean)), s, out, gen);
  return out;
}
at::Tensor& normalFloatTensorOut(double mean, const at::Tensor& std, Gen gen, at::Tensor& out) {
  Arg s = Arg::of(std);
  checkStd(s);
  at::native::resize_output(out, std.sizes());
  normalInto(Arg::of(c10::Scalar(mean)), s, out, gen);
  return out;
}
at::Tensor& normalTensorTensorOut(const at::Tensor& mean, const at::Tensor& std, Gen gen, at::Tensor& out) {
  Arg m = Arg::of(mean), s = Arg::of(std);
  checkStd(s);
  at::native::resize_output(out, at::infer_size(mean.sizes(), std.sizes()));
  normalInto(m, s, out, gen);
  return out;
}
at::Tensor normalTensorTensor(const at::Tensor& mean, const at::Tensor& std, Gen gen) {
  const at::Tensor& like = mean.device().is_cpu() ? std : mean;
  at::Tensor out = at::empty({0}, like.options().dtype(mean.scalar_type()));
  return normalTensorTensorOut(mean, std, gen, out);
}

// ---- bernoulli ---------------------------------------------------------------

// self = (u < p) with p a host scalar or a tensor broadcast to self.
void bernoulliInto(at::Tensor& self, const Arg& p, Gen gen) {
  at::assert_no_internal_overlap(self);
  int64_t n = self.numel();
  if (n == 0) return;
  std::vector<int64_t> shape = self.sizes().vec();
  Op op = TPU_OP("aten::bernoulli_");
  if (p.isTensor()) op.in(p.tensor);
  else op.scalar(p.scalar, c10::kFloat);
  bool scalarP = !p.isTensor();
  op.operand(rngState(gen, self, n)).attr(scalarP).out(self).run([&](hlo::Builder& b, Values in, Values ops) {
    Value prob = lowering::broadcastTo(b, b.convert(scalarP ? ops[0] : in[0], DType::F32), shape);
    Value u = b.reshape(lowering::uniform01(b, ops.back(), n, DType::F32, 24), shape);
    return ValueList{b.compare(hlo::Cmp::LT, u, prob)};
  });
}

at::Tensor& bernoulliFloat(at::Tensor& self, double p, Gen gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  bernoulliInto(self, Arg::of(c10::Scalar(p)), gen);
  return self;
}

at::Tensor& bernoulliTensor(at::Tensor& self, const at::Tensor& p, Gen gen) {
  Arg prob = Arg::of(p);
  if (prob.isTensor()) {
    TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(p.scalar_type()),
                                "\"bernoulli_tensor_cpu_p_\" not implemented for '", p.scalar_type(), "'");
    TORCH_CHECK(at::is_expandable_to(p.sizes(), self.sizes()), "bernoulli_: p of shape ", p.sizes(),
                " cannot be expanded to self of shape ", self.sizes());
  } else {
    double v = prob.scalar.toDouble();
    TORCH_CHECK(0 <= v && v <= 1, "Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
  }
  bernoulliInto(self, prob, gen);
  return self;
}

at::Tensor& bernoulliOut(const at::Tensor& self, Gen gen, at::Tensor& out) {
  at::native::resize_output(out, self.sizes());
  return bernoulliTensor(out, self, gen);
}

// ---- random_ -----------------------------------------------------------------

// self = from + bits % range (as int64, converted to self's dtype); range 0: all 64-bit values.
void randomInto(at::Tensor& self, int64_t from, uint64_t range, bool wide, bool full, Gen gen) {
  int64_t n = self.numel();
  if (n == 0) return;
  runtime::HostOperand rangeOp{DType::U64};
  rangeOp.i[0] = static_cast<int64_t>(range);
  TPU_OP("aten::random_")
      .operand(runtime::HostOperand::integer(DType::S64, from))
      .operand(rangeOp)
      .operand(rngState(gen, self, n * lowering::wordsPerElement(wide || full)))
      .attr(wide)
      .attr(full)
      .out(self)
      .run([&](hlo::Builder& b, Values, Values ops) {
        return ValueList{lowering::randomInt(b, ops[2], n, ops[0], ops[1], wide, full)};
      });
}

void checkRandomDtype(const at::Tensor& self) {
  auto t = self.scalar_type();
  TORCH_CHECK(c10::isFloatingType(t) || c10::isIntegralType(t, true),
              "random_from_to_impl handles only integral, floating-point and boolean types");
}

at::Tensor& randomFromTo(at::Tensor& self, int64_t from, std::optional<int64_t> toOpt, Gen gen) {
  using namespace at::native::templates;
  checkRandomDtype(self);
  auto t = self.scalar_type();
  if (toOpt.has_value()) {
    int64_t to = *toOpt;
    TORCH_CHECK(from < to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", to);
    if (c10::isFloatingType(t)) {
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "random_update_from_to", [&] {
        from = update_from<scalar_t>(from);
        to = update_to<scalar_t>(to);
        TORCH_CHECK(from < to, "random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, but got from=",
                    from, " >= to=", to);
      });
    }
    check_from_to_in_range(from, to - 1, self.dtype());
    uint64_t range = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
    randomInto(self, from, range, range >= (uint64_t{1} << 32), false, gen);
  } else if (from != std::numeric_limits<int64_t>::lowest()) {
    int64_t toInc = 0;
    if (c10::isFloatingType(t)) {
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "random_from_to_range_calc", [&] {
        constexpr int64_t maxInt = int64_t{1} << std::numeric_limits<scalar_t>::digits;
        toInc = maxInt;
        from = update_from<scalar_t>(from);
        TORCH_CHECK(from < toInc, "random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted "
                    "to dtype, but got from=", from, " > to_inc=", toInc);
      });
    } else if (t == c10::kBool) {
      toInc = 1;
    } else {
      AT_DISPATCH_INTEGRAL_TYPES(t, "random_from_to_range_calc", [&] {
        toInc = static_cast<int64_t>(std::numeric_limits<scalar_t>::max());
      });
    }
    check_from_to_in_range(from, toInc, self.dtype());
    uint64_t range = static_cast<uint64_t>(toInc) - static_cast<uint64_t>(from) + 1;
    randomInto(self, from, range, range >= (uint64_t{1} << 32), range == 0, gen);
  } else {
    randomInto(self, 0, 0, true, true, gen);
  }
  return self;
}

at::Tensor& randomTo(at::Tensor& self, int64_t to, Gen gen) { return randomFromTo(self, 0, to, gen); }

// random_() without bounds: [0, 2^mantissa] for floats, [0, max] for integers.
at::Tensor& random(at::Tensor& self, Gen gen) {
  checkRandomDtype(self);
  auto t = self.scalar_type();
  uint64_t range = 0;
  if (c10::isFloatingType(t)) range = (uint64_t{1} << mantissaDigits(t)) + 1;
  else if (t == c10::kBool) range = 2;
  else {
    AT_DISPATCH_INTEGRAL_TYPES(t, "random_", [&] {
      range = static_cast<uint64_t>(std::numeric_limits<scalar_t>::max()) + 1;
    });
  }
  randomInto(self, 0, range, t == c10::kDouble || t == c10::kLong, false, gen);
  return self;
}

// ---- randperm ------------------------------------------------------------------

at::Tensor& randpermOut(int64_t n, Gen gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  TORCH_CHECK_NOT_IMPLEMENTED(out.scalar_type() != c10::kBool, "\"randperm\" not implemented for 'Bool'");
  at::native::check_supported_max_int_with_precision(n, at::empty({0}, out.options().device(c10::kCPU)));
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  // Sort random 64-bit keys: ties are vanishingly rare and keep iota order.
  TPU_OP("aten::randperm").operand(rngState(gen, out, 2 * n)).out(out).run([&](hlo::Builder& b, Values, Values ops) {
    Value keys = lowering::randomBits64(b, ops[0], n);
    Value idx = b.iota(hlo::Type{DType::S64, {n}}, 0);
    Value both[] = {keys, idx};
    auto sorted = b.sort(both, 0, true, [](hlo::Builder& r, std::span<const Value> a) {
      return std::vector<Value>{r.compare(hlo::Cmp::LT, a[0], a[1])};
    });
    return ValueList{sorted[1]};
  });
  return out;
}

// ---- dropout -------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> nativeDropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (input.numel() == 0) return {input, at::empty_like(input)};
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(c10::kBool))};
  }
  double keep = 1.0 - p;
  TORCH_CHECK(0 <= keep && keep <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", keep);
  double scale = keep == 0 ? 0.0 : 1.0 / keep;
  at::Tensor output = at::empty_like(input);
  at::Tensor mask = at::empty_like(input, input.options().dtype(c10::kBool));
  int64_t n = input.numel();
  auto compute = opmathType(input.scalar_type());
  DType computeH = toHlo(compute);
  std::vector<int64_t> shape = input.sizes().vec();
  TPU_OP("aten::native_dropout")
      .in(input)
      .scalar(scale, compute)
      .scalar(keep, c10::kFloat)
      .operand(rngState(std::nullopt, input, n))
      .out(output)
      .out(mask)
      .run([&](hlo::Builder& b, Values in, Values ops) {
        Value u = b.reshape(lowering::uniform01(b, ops[2], n, DType::F32, 24), shape);
        Value kept = b.compare(hlo::Cmp::LT, u, b.broadcast(ops[1], shape));
        Value x = b.convert(in[0], computeH);
        Value y = b.mul(b.mul(x, b.convert(kept, computeH)), b.broadcast(ops[0], shape));
        return ValueList{y, kept};
      });
  return {output, mask};
}

at::Tensor nativeDropoutBackward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  Arg g = Arg::of(grad), m = Arg::of(mask), s = Arg::of(c10::Scalar(scale));
  auto result = resultType({&g, &m, &s});
  at::Tensor out = at::empty(broadcastShape({&g, &m}), grad.options().dtype(result));
  runPointwise(TPU_OP("aten::native_dropout_backward"), {&g, &m, &s}, out, opmathType(result),
               [](hlo::Builder& b, std::vector<Value>& v) { return b.mul(b.mul(v[0], v[1]), v[2]); });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", uniform);
  m.impl("normal_", normal);
  m.impl("log_normal_", logNormal);
  m.impl("exponential_", exponential);
  m.impl("cauchy_", cauchy);
  m.impl("geometric_", geometric);
  m.impl("normal.Tensor_float", normalTensorFloat);
  m.impl("normal.Tensor_float_out", normalTensorFloatOut);
  m.impl("normal.float_Tensor", normalFloatTensor);
  m.impl("normal.float_Tensor_out", normalFloatTensorOut);
  m.impl("normal.Tensor_Tensor", normalTensorTensor);
  m.impl("normal.Tensor_Tensor_out", normalTensorTensorOut);
  m.impl("bernoulli_.float", bernoulliFloat);
  m.impl("bernoulli_.Tensor", bernoulliTensor);
  m.impl("bernoulli.out", bernoulliOut);
  m.impl("random_", random);
  m.impl("random_.to", randomTo);
  m.impl("random_.from", randomFromTo);
  m.impl("randperm.generator_out", randpermOut);
  m.impl("native_dropout", nativeDropout);
  m.impl("native_dropout_backward", nativeDropoutBackward);
}

}  // namespace tpu::aten
