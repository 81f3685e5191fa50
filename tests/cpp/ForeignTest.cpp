// Foreign functions (torch_tpu.pallas): registry checks, printed once per program, called from @main and run
// on the plugin; the precision-cost warning text.
#include <cmath>

#include "TestPlugin.h"
#include "csrc/hlo/Builder.h"
#include "csrc/lowering/Foreign.h"
#include "csrc/runtime/ForeignFunctions.h"
#include "csrc/runtime/PrecisionCost.h"

using namespace tpu;
using hlo::DType;

namespace {

// What torch_tpu/pallas/_export.py produces: a private function in generic form, symbols renamed apart.
const char* kDoubleTanh = R"(
"func.func"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "tpu_jax_t0_main", sym_visibility = "private"}> ({
^bb0(%arg0: tensor<4xf32>):
  %0 = "func.call"(%arg0) <{callee = @tpu_jax_t0_helper}> : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stablehlo.add"(%0, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%1) : (tensor<4xf32>) -> ()
}) : () -> ()
"func.func"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "tpu_jax_t0_helper", sym_visibility = "private"}> ({
^bb0(%arg0: tensor<4xf32>):
  %0 = "stablehlo.tanh"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%0) : (tensor<4xf32>) -> ()
}) : () -> ()
)";

runtime::ForeignFunction doubleTanh() {
  return {"test::double_tanh", "tpu_jax_t0_main", kDoubleTanh, {{DType::F32, {4}}}, {{DType::F32, {4}}}};
}

}  // namespace

TEST(Foreign, RegistryRejectsTextThatCannotBeInlined) {
  auto f = doubleTanh();
  f.symbol = "missing";
  EXPECT_THROW(runtime::registerForeignFunction(f), std::invalid_argument);
  f = doubleTanh();
  f.text.replace(f.text.find("\"private\""), 9, "\"public\"");
  EXPECT_THROW(runtime::registerForeignFunction(f), std::invalid_argument);
  f = doubleTanh();
  f.symbol = "main";
  f.text.replace(f.text.find("tpu_jax_t0_main\""), 16, "main\"");
  EXPECT_THROW(runtime::registerForeignFunction(f), std::invalid_argument);
}

TEST(Foreign, InlinedOncePerProgramAndRuns) {
  int64_t id = runtime::registerForeignFunction(doubleTanh());
  const auto& f = runtime::foreignFunction(id);
  hlo::Builder b;
  auto x = b.parameter(hlo::Type{DType::F32, {4}});
  auto y = lowering::foreignCall(b, id, f, {&x, 1})[0];
  auto z = lowering::foreignCall(b, id, f, {&y, 1})[0];  // called twice, printed once
  b.ret({&z, 1});
  std::string text = b.module();
  size_t first = text.find("sym_name = \"tpu_jax_t0_main\"");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find("sym_name = \"tpu_jax_t0_main\"", first + 1), std::string::npos) << text;
  EXPECT_NE(text.find("\"func.call\"(%v0) {callee = @tpu_jax_t0_main}"), std::string::npos) << text;

  auto& client = testRuntime().client();
  auto exe = client.compile(text, pjrt::CompileOptions{});
  std::vector<float> in = {-1.0f, 0.0f, 0.5f, 2.0f};
  auto buf = client.bufferFromHost(in.data(), pjrt::ElementType::F32, {4}, 0);
  auto out = toHost<float>(*exe->execute({buf->raw()}, client.devices()[0])[0], 4);
  for (size_t i = 0; i < 4; ++i) {
    float once = 2.0f * std::tanh(in[i]);
    EXPECT_NEAR(out[i], 2.0f * std::tanh(once), 1e-6f) << i;
  }
}

TEST(Foreign, WrongInputTypeIsRejected) {
  int64_t id = runtime::registerForeignFunction(doubleTanh());
  hlo::Builder b;
  auto x = b.parameter(hlo::Type{DType::F32, {5}});
  EXPECT_THROW(lowering::foreignCall(b, id, runtime::foreignFunction(id), {&x, 1}), std::invalid_argument);
}

TEST(PrecisionCost, OnlyTpuAndOnlyHighOrHighest) {
  std::string highest = "precision_config = [#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]";
  std::string high = "precision_config = [#stablehlo<precision HIGH>, #stablehlo<precision HIGH>]";
  EXPECT_NE(runtime::dotPrecisionCost("tpu", highest).find("6 bfloat16 passes"), std::string::npos);
  EXPECT_NE(runtime::dotPrecisionCost("tpu", high).find("3 bfloat16 passes"), std::string::npos);
  EXPECT_EQ(runtime::dotPrecisionCost("tpu", "stablehlo.dot_general"), "");
  EXPECT_EQ(runtime::dotPrecisionCost("cpu", highest), "");
}
