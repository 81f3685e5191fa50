// The StableHLO builder: printed text and programs run on the plugin.
#include "TestPlugin.h"
#include "csrc/hlo/Builder.h"
#include "csrc/runtime/ViewSpec.h"

using namespace tpu;
using hlo::DType;

namespace {

std::vector<float> runUnaryProgram(hlo::Builder& b, const std::vector<float>& input) {
  auto& client = testRuntime().client();
  auto exe = client.compile(b.module(), pjrt::CompileOptions{});
  auto in = client.bufferFromHost(input.data(), pjrt::ElementType::F32, {static_cast<int64_t>(input.size())}, 0);
  auto outs = exe->execute({in->raw()}, client.devices()[0]);
  auto dims = outs[0]->dims();
  size_t n = 1;
  for (auto d : dims) n *= d;
  return toHost<float>(*outs[0], n);
}

std::vector<float> iotaVector(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

}  // namespace

TEST(Hlo, PrintsGenericForm) {
  hlo::Builder b;
  auto x = b.parameter(hlo::Type{DType::F32, {2, 3}});
  auto y = b.unary("exponential", x);
  b.ret({&y, 1});
  std::string text = b.module();
  EXPECT_NE(text.find("\"stablehlo.exponential\"(%v0) : (tensor<2x3xf32>) -> tensor<2x3xf32>"), std::string::npos)
      << text;
  EXPECT_NE(text.find("func.func public @main(%v0: tensor<2x3xf32>) -> (tensor<2x3xf32>)"), std::string::npos);
}

TEST(Hlo, ConstantsAreExactBitPatterns) {
  hlo::Builder b;
  b.constant(DType::F32, 0.1);
  b.constant(DType::BF16, 1.0);
  b.constantInt(DType::S64, -9007199254740993LL);
  b.ret({});
  std::string text = b.module();
  EXPECT_NE(text.find("dense<0x3DCCCCCD>"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<0x3F80>"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<-9007199254740993>"), std::string::npos) << text;
}

TEST(Hlo, ReduceRunsOnPlugin) {
  hlo::Builder b;
  auto x = b.reshape(b.parameter(hlo::Type{DType::F32, {6}}), {2, 3});
  auto zero = b.constant(DType::F32, 0);
  auto sums = b.reduce({&x, 1}, {&zero, 1}, {1}, [](hlo::Builder& bb, std::span<const hlo::Value> a) {
    return std::vector<hlo::Value>{bb.add(a[0], a[1])};
  });
  b.ret(sums);
  EXPECT_EQ(runUnaryProgram(b, iotaVector(6)), (std::vector<float>{3, 12}));
}

// Views of a flat 4x5 storage holding 0..19, read through runtime::readView.
struct ViewCase {
  std::vector<int64_t> sizes, strides;
  int64_t offset;
};

TEST(Hlo, ReadViewMatchesStridedIndexing) {
  std::vector<ViewCase> cases = {
      {{4, 5}, {5, 1}, 0},      // contiguous
      {{5, 4}, {1, 5}, 0},      // transpose
      {{2, 3}, {10, 2}, 1},     // steps in both dims
      {{3, 4}, {0, 5}, 0},      // expand
      {{3, 1, 2}, {5, 7, 1}, 2},  // size-1 dim with arbitrary stride
      {{4, 3}, {2, 1}, 0},      // overlapping windows (unfold): gather path
      {{2, 2, 2}, {1, 10, 5}, 0},  // permuted 3-D
  };
  for (const auto& c : cases) {
    hlo::Builder b;
    runtime::ViewSpec v{DType::F32, c.sizes, c.strides, c.offset};
    auto flat = b.parameter(hlo::Type{DType::F32, {20}});
    auto out = runtime::readView(b, flat, v);
    b.ret({&out, 1});
    std::vector<float> got = runUnaryProgram(b, iotaVector(20));
    std::vector<float> want;
    std::vector<int64_t> idx(c.sizes.size(), 0);
    for (int64_t n = 0; n < v.numel(); ++n) {
      int64_t off = c.offset;
      for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * c.strides[d];
      want.push_back(static_cast<float>(off));
      for (int64_t d = static_cast<int64_t>(idx.size()) - 1; d >= 0; --d) {
        if (++idx[d] < c.sizes[d]) break;
        idx[d] = 0;
      }
    }
    EXPECT_EQ(got, want) << "sizes " << c.sizes.size() << " offset " << c.offset;
  }
}

TEST(Hlo, WriteViewUpdatesOnlyTheView) {
  hlo::Builder b;
  runtime::ViewSpec v{DType::F32, {2, 2}, {1, 5}, 6};  // transposed 2x2 block
  auto flat = b.parameter(hlo::Type{DType::F32, {20}});
  auto values = b.full(hlo::Type{DType::F32, {2, 2}}, -1);
  auto out = runtime::writeView(b, flat, v, values);
  b.ret({&out, 1});
  std::vector<float> want = iotaVector(20);
  for (int i : {6, 7, 11, 12}) want[i] = -1;
  EXPECT_EQ(runUnaryProgram(b, iotaVector(20)), want);
}

TEST(Hlo, ReinterpretFlatBitcastsThroughBytes) {
  hlo::Builder b;
  auto flat = b.parameter(hlo::Type{DType::F32, {2}});
  auto asInt = runtime::reinterpretFlat(b, flat, DType::S16);
  auto back = runtime::reinterpretFlat(b, asInt, DType::F32);
  b.ret({&back, 1});
  EXPECT_EQ(runUnaryProgram(b, {1.5f, -2.25f}), (std::vector<float>{1.5f, -2.25f}));
}

TEST(Hlo, DotPrecisionIsPrintedForFloat32Only) {
  hlo::Builder b;
  auto x = b.parameter(hlo::Type{DType::F32, {2, 2}});
  auto h = b.parameter(hlo::Type{DType::BF16, {2, 2}});
  b.setDotPrecision(hlo::Precision::Highest);
  b.dotGeneral(x, x, {}, {}, {1}, {0}, DType::F32);
  b.dotGeneral(h, h, {}, {}, {1}, {0}, DType::BF16);  // bf16 operands: nothing to ask for
  b.setDotPrecision(hlo::Precision::High);
  b.dotGeneral(x, x, {}, {}, {1}, {0}, DType::F32);
  b.setDotPrecision(hlo::Precision::Default);
  auto last = b.dotGeneral(x, x, {}, {}, {1}, {0}, DType::F32);
  b.ret({&last, 1});
  std::string text = b.module();
  auto count = [&](const std::string& s) {
    size_t n = 0;
    for (size_t at = text.find(s); at != std::string::npos; at = text.find(s, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]"), 1u);
  EXPECT_EQ(count("precision_config = [#stablehlo<precision HIGH>, #stablehlo<precision HIGH>]"), 1u);
  EXPECT_EQ(count("precision_config"), 2u);
  auto& client = testRuntime().client();
  EXPECT_NO_THROW(client.compile(text, pjrt::CompileOptions{}));  // the plugin parses both spellings
}
