#include "Conv.h"

#include <string>

namespace tpu::lowering {
namespace {

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string arr(const std::vector<int64_t>& v) { return hlo::i64Array(v); }

// Which dims of each operand are batch/feature (lhs, out) or out/in feature (rhs); spatial dims are 2...
struct Spec {
  int64_t d0, d1;
};

int64_t dilate(int64_t n, int64_t d) { return n == 0 ? 0 : 1 + d * (n - 1); }

// stablehlo.convolution with NC... operands where dims 0/1 play the roles named by the specs.
Value conv(Builder& b, Value lhs, Value rhs, Spec l, Spec r, Spec o, const std::vector<int64_t>& strides,
           const std::vector<int64_t>& padLo, const std::vector<int64_t>& padHi,
           const std::vector<int64_t>& lhsDil, const std::vector<int64_t>& rhsDil, int64_t featureGroups,
           int64_t batchGroups) {
  size_t nd = strides.size();
  std::vector<int64_t> sp;
  for (size_t i = 0; i < nd; ++i) sp.push_back(static_cast<int64_t>(i) + 2);
  hlo::Shape shape(nd + 2);
  shape[o.d0] = lhs.shape()[l.d0] / batchGroups;
  shape[o.d1] = rhs.shape()[r.d0];
  for (size_t i = 0; i < nd; ++i) {
    int64_t in = dilate(lhs.shape()[i + 2], lhsDil[i]) + padLo[i] + padHi[i];
    int64_t k = dilate(rhs.shape()[i + 2], rhsDil[i]);
    shape[i + 2] = in < k ? 0 : (in - k) / strides[i] + 1;
  }
  std::string pad = "dense<[";
  for (size_t i = 0; i < nd; ++i)
    pad += (i ? ", [" : "[") + std::to_string(padLo[i]) + ", " + std::to_string(padHi[i]) + "]";
  pad += "]> : tensor<" + std::to_string(nd) + "x2xi64>";
  if (nd == 0) pad = "dense<> : tensor<0x2xi64>";
  std::string attrs = "batch_group_count = " + std::to_string(batchGroups) +
                      " : i64, dimension_numbers = #stablehlo.conv<raw input_batch_dimension = " +
                      std::to_string(l.d0) + ", input_feature_dimension = " + std::to_string(l.d1) +
                      ", input_spatial_dimensions = " + list(sp) +
                      ", kernel_input_feature_dimension = " + std::to_string(r.d1) +
                      ", kernel_output_feature_dimension = " + std::to_string(r.d0) +
                      ", kernel_spatial_dimensions = " + list(sp) +
                      ", output_batch_dimension = " + std::to_string(o.d0) +
                      ", output_feature_dimension = " + std::to_string(o.d1) +
                      ", output_spatial_dimensions = " + list(sp) + ">, feature_group_count = " +
                      std::to_string(featureGroups) + " : i64, lhs_dilation = " + arr(lhsDil) + ", padding = " + pad +
                      ", rhs_dilation = " + arr(rhsDil) + ", window_strides = " + arr(strides) +
                      b.precisionConfig(lhs.dtype());
  Value ops[2] = {lhs, rhs};
  return b.op("stablehlo.convolution", ops, {hlo::Type{lhs.dtype(), shape}}, attrs)[0];
}

std::vector<int64_t> ones(size_t n) { return std::vector<int64_t>(n, 1); }

}  // namespace

Value convForward(Builder& b, Value x, Value w, const ConvParams& p) {
  size_t nd = p.stride.size();
  return conv(b, x, w, {0, 1}, {0, 1}, {0, 1}, p.stride, p.padding, p.padding, ones(nd), p.dilation, p.groups, 1);
}

Value convTransposeForward(Builder& b, Value x, Value w, const ConvParams& p) {
  size_t nd = p.stride.size();
  int64_t g = p.groups;
  // [Cin, Cout/g, K...] -> [Cout, Cin/g, K...] (per group), kernel flipped spatially.
  hlo::Shape ws = w.shape();
  int64_t cin = ws[0], coutG = ws[1];
  hlo::Shape grouped{g, cin / g, coutG};
  grouped.insert(grouped.end(), ws.begin() + 2, ws.end());
  std::vector<int64_t> perm{0, 2, 1};
  for (size_t i = 0; i < nd; ++i) perm.push_back(static_cast<int64_t>(i) + 3);
  Value wt = b.transpose(b.reshape(w, grouped), perm);
  hlo::Shape flat{g * coutG, cin / g};
  flat.insert(flat.end(), ws.begin() + 2, ws.end());
  wt = b.reshape(wt, flat);
  std::vector<int64_t> spatial;
  for (size_t i = 0; i < nd; ++i) spatial.push_back(static_cast<int64_t>(i) + 2);
  wt = b.reverse(wt, spatial);
  std::vector<int64_t> lo, hi;
  for (size_t i = 0; i < nd; ++i) {
    int64_t k = dilate(ws[i + 2], p.dilation[i]) - 1;
    lo.push_back(k - p.padding[i]);
    hi.push_back(k - p.padding[i] + p.outputPadding[i]);
  }
  return conv(b, x, wt, {0, 1}, {0, 1}, {0, 1}, ones(nd), lo, hi, p.stride, p.dilation, g, 1);
}

Value convWeightGrad(Builder& b, Value x, Value gy, const std::vector<int64_t>& k, const ConvParams& p) {
  // As JAX's transpose rule: x with batch/feature swapped is the lhs, gy (likewise) the kernel; strides and
  // rhs dilation trade places; groups become batch groups.
  size_t nd = p.stride.size();
  std::vector<int64_t> lo = p.padding, hi;
  for (size_t i = 0; i < nd; ++i) {
    int64_t outDil = dilate(gy.shape()[i + 2], p.stride[i]);
    int64_t inDil = x.shape()[i + 2];
    int64_t kDil = dilate(k[i], p.dilation[i]);
    hi.push_back((outDil - inDil) + (kDil - lo[i] - 1));
  }
  return conv(b, x, gy, {1, 0}, {1, 0}, {1, 0}, p.dilation, lo, hi, ones(nd), p.stride, 1, p.groups);
}

}  // namespace tpu::lowering
