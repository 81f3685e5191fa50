// runtime::Streams alone: current streams, the pool, markers over launched programs.
#include <thread>

#include "TestPlugin.h"
#include "csrc/runtime/Streams.h"

using namespace tpu;

namespace {

// A program slow enough to be in flight for a while: repeated 256x256 matmuls.
std::shared_ptr<pjrt::Buffer> launchWork(int device) {
  auto& client = testRuntime().client();
  const char* mlir = R"(module {
  func.func public @main(%a: tensor<256x256xf32>) -> (tensor<256x256xf32>) {
    %0 = "stablehlo.dot_general"(%a, %a) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
    %1 = "stablehlo.dot_general"(%0, %a) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
    "func.return"(%1) : (tensor<256x256xf32>) -> ()
  }
})";
  static std::unique_ptr<pjrt::Executable> exe = client.compile(mlir, pjrt::CompileOptions{});
  std::vector<float> host(256 * 256, 0.001f);
  auto in = client.bufferFromHost(host.data(), pjrt::ElementType::F32, {256, 256}, device);
  auto outs = exe->execute({in->raw()}, client.devices()[device]);
  return std::shared_ptr<pjrt::Buffer>(std::move(outs[0]));
}

}  // namespace

TEST(Streams, CurrentStreamIsPerThreadAndDevice) {
  auto& s = runtime::Streams::get();
  EXPECT_EQ(s.current(0), runtime::Streams::kDefault);
  int64_t a = s.fromPool(0), b = s.fromPool(0);
  EXPECT_NE(a, b);
  EXPECT_GE(a, 1);
  EXPECT_LE(b, runtime::Streams::kPoolSize);
  for (int i = 0; i < runtime::Streams::kPoolSize; ++i) s.fromPool(0);
  EXPECT_EQ(s.fromPool(0), b % runtime::Streams::kPoolSize + 1);  // round robin over the pool
  EXPECT_EQ(s.exchange(0, a), runtime::Streams::kDefault);
  EXPECT_EQ(s.current(0), a);
  EXPECT_EQ(s.current(1), runtime::Streams::kDefault);
  int64_t other = -1;
  std::thread([&] { other = runtime::Streams::get().current(0); }).join();
  EXPECT_EQ(other, runtime::Streams::kDefault);
  EXPECT_EQ(s.exchange(0, runtime::Streams::kDefault), a);
}

TEST(Streams, MarkerWaitsForTheStreamsWorkInOrder) {
  auto& s = runtime::Streams::get();
  int64_t side = s.fromPool(0);
  s.exchange(0, side);
  auto out = launchWork(0);
  s.noteLaunch(0, out);
  s.exchange(0, runtime::Streams::kDefault);
  auto m1 = s.record(0, side);
  auto m2 = s.record(0, side);  // nothing launched in between: done only after m1
  m2->wait();
  EXPECT_TRUE(m2->query());
  EXPECT_TRUE(m1->query());
  EXPECT_GE(m2->completedNs(), m1->completedNs());
  // The work really finished: its buffer is readable at once and holds the product.
  std::vector<float> all(256 * 256);
  out->toHost(all.data(), all.size() * 4).await();
  EXPECT_NEAR(all[0], 256 * (256 * 0.001f * 0.001f) * 0.001f, 1e-9);
}

TEST(Streams, BlockedStreamMarkersWaitForTheOtherStream) {
  auto& s = runtime::Streams::get();
  int64_t producer = s.fromPool(1), consumer = s.fromPool(1);
  s.exchange(1, producer);
  auto out = launchWork(1);
  s.noteLaunch(1, out);
  s.exchange(1, runtime::Streams::kDefault);
  auto made = s.record(1, producer);
  s.block(1, consumer, made);
  auto after = s.record(1, consumer);
  after->wait();
  EXPECT_TRUE(made->query());
  EXPECT_GE(after->completedNs(), made->completedNs());
  // A stream with no work and nothing to wait for is complete at once.
  EXPECT_TRUE(s.record(1, s.fromPool(1))->query());
}
