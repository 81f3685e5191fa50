#include "Elementwise.h"

#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>

namespace tpu::aten {

Arg Arg::of(const at::Tensor& t) {
  if (t.device().is_cpu() && t.dim() == 0) return Arg{at::Tensor(), t.item(), true};
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
              "Expected all tensors to be on the same device, but found at least two devices, tpu and ", t.device(),
              "!");
  return Arg{t, c10::Scalar()};
}

c10::ScalarType opmathType(c10::ScalarType t) {
  return (t == c10::kHalf || t == c10::kBFloat16 || at::isFloat8Type(t)) ? c10::kFloat : t;
}

c10::ScalarType valueType(c10::ScalarType t) { return at::isFloat8Type(t) ? c10::kFloat : t; }

c10::ScalarType defaultFloat() { return c10::typeMetaToScalarType(c10::get_default_dtype()); }

c10::ScalarType resultType(std::initializer_list<const Arg*> args) {
  at::native::ResultTypeState state;
  for (const Arg* a : args) {
    if (a->isTensor()) state = at::native::update_result_type_state(a->tensor, state);
    else state = at::native::update_result_type_state(a->scalar, state);
  }
  return at::native::result_type(state);
}

std::vector<int64_t> broadcastShape(std::initializer_list<const Arg*> args) {
  std::vector<int64_t> shape;
  for (const Arg* a : args)
    if (a->isTensor()) shape = at::infer_size(shape, a->tensor.sizes());
  return shape;
}

namespace {

// TensorIterator's fast set-up: every operand has the result's shape and one shared layout. Returns
// false when the general rule (iteratorStrides) decides.
bool fastLayout(std::span<const Arg* const> args, c10::IntArrayRef shape, const at::TensorOptions& options,
                at::Tensor& out) {
  bool contiguous = true, channelsLast = true, dense = true;
  const at::Tensor* first = nullptr;
  bool sameStrides = true;
  for (const Arg* a : args) {
    if (!a->isTensor()) {
      if (a->operand && !shape.empty()) return false;  // a 0-dim operand of another shape
      continue;
    }
    const at::Tensor& t = a->tensor;
    if (!t.sizes().equals(shape)) return false;
    contiguous &= t.is_contiguous();
    channelsLast &= t.is_contiguous(at::MemoryFormat::ChannelsLast);
    dense &= t.is_non_overlapping_and_dense();
    if (first == nullptr) first = &t;
    else sameStrides &= first->strides().equals(t.strides());
  }
  if (contiguous || first == nullptr) out = at::empty(shape, options);
  else if (channelsLast) out = at::empty(shape, options.memory_format(at::MemoryFormat::ChannelsLast));
  else if (dense && sameStrides) out = at::empty_strided(shape, first->strides(), options);
  else return false;
  return true;
}

// TensorIterator's general rule: dimensions sorted fastest-first by the operands' strides (broadcast
// dimensions, stride 0, do not vote; a tie puts the smaller dimension first), by the same insertion sort
// so that ambiguous comparisons resolve as on CPU; the result is dense in that order (empty: contiguous).
std::vector<int64_t> iteratorStrides(std::span<const Arg* const> args, c10::IntArrayRef shape) {
  const int64_t n = static_cast<int64_t>(shape.size());
  c10::SmallVector<c10::SmallVector<int64_t, 6>, 4> strides;
  for (const Arg* a : args) {
    if (!a->isTensor()) continue;  // a 0-dim operand's strides are all 0: it never votes
    const at::Tensor& t = a->tensor;
    auto& s = strides.emplace_back(n, 0);
    const int64_t offset = n - t.dim();
    for (int64_t i = 0; i < t.dim(); ++i)
      s[offset + i] = (t.size(i) == 1 && shape[offset + i] != 1) ? 0 : t.stride(i);
  }
  c10::SmallVector<int64_t, 6> perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = n - 1 - i;
  auto shouldSwap = [&](int64_t d0, int64_t d1) {
    for (const auto& s : strides) {
      if (s[d0] == 0 || s[d1] == 0) continue;
      if (s[d0] < s[d1]) return -1;
      if (s[d0] > s[d1]) return 1;
      if (shape[d0] > shape[d1]) return 1;
    }
    return 0;
  };
  for (int64_t i = 1; i < n; ++i) {
    int64_t d1 = i;
    for (int64_t d0 = i - 1; d0 >= 0; --d0) {
      int cmp = shouldSwap(perm[d0], perm[d1]);
      if (cmp > 0) {
        std::swap(perm[d0], perm[d1]);
        d1 = d0;
      } else if (cmp < 0) {
        break;
      }
    }
  }
  bool inverted = true;
  for (int64_t i = 0; i < n; ++i) inverted &= perm[i] == n - 1 - i;
  if (inverted) return {};  // contiguous (at::empty's strides, also over 0-size dimensions)
  std::vector<int64_t> out(n);
  int64_t step = 1;
  for (int64_t i = 0; i < n; ++i) {
    out[perm[i]] = step;
    step *= shape[perm[i]];
  }
  return out;
}

}  // namespace

at::Tensor emptyPointwise(std::span<const Arg* const> args, c10::IntArrayRef shape, const at::TensorOptions& options) {
  at::Tensor out;
  if (fastLayout(args, shape, options, out)) return out;
  std::vector<int64_t> strides = iteratorStrides(args, shape);
  return strides.empty() ? at::empty(shape, options) : at::empty_strided(shape, strides, options);
}

void prepareOut(const char* op, at::Tensor& out, c10::IntArrayRef shape, c10::ScalarType result) {
  TORCH_CHECK(c10::canCast(result, out.scalar_type()), op, ": result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, shape);
}

void checkInplace(const char* op, const at::Tensor& self, c10::IntArrayRef shape, c10::ScalarType result) {
  TORCH_CHECK(c10::canCast(result, self.scalar_type()), op, ": result type ", result,
              " can't be cast to the desired output type ", self.scalar_type());
  TORCH_CHECK(self.sizes().equals(shape), op, ": output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", shape);
}

}  // namespace tpu::aten
