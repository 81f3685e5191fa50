// The PJRT layer alone: plugin, transfers, compile, execute, serialize.
#include <atomic>
#include <chrono>
#include <thread>

#include "TestPlugin.h"
#include "csrc/pjrt/CompileOptions.h"
#include "csrc/pjrt/Error.h"

using namespace tpu;

TEST(Pjrt, ClientReportsPlatformAndDevices) {
  auto& client = testRuntime().client();
  EXPECT_FALSE(client.platformName().empty());
  EXPECT_GE(client.devices().size(), 1u);
  EXPECT_GE(client.plugin().apiMinor(), 0);
}

TEST(Pjrt, RoundTripsEveryElementType) {
  auto& client = testRuntime().client();
  std::vector<unsigned char> bytes(64);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 1);
  for (auto t : {pjrt::ElementType::S8, pjrt::ElementType::U8, pjrt::ElementType::S16, pjrt::ElementType::S32,
                 pjrt::ElementType::S64, pjrt::ElementType::F16, pjrt::ElementType::BF16, pjrt::ElementType::F32,
                 pjrt::ElementType::F64}) {
    int64_t n = static_cast<int64_t>(bytes.size() / pjrt::byteWidth(t));
    auto buf = client.bufferFromHost(bytes.data(), t, {n}, 0);
    std::vector<unsigned char> back(bytes.size());
    buf->toHost(back.data(), back.size()).await();
    EXPECT_EQ(back, bytes) << "element type " << static_cast<int>(t);
  }
  std::vector<unsigned char> flags = {0, 1, 1, 0};
  auto pred = client.bufferFromHost(flags.data(), pjrt::ElementType::Pred, {4}, 0);
  std::vector<unsigned char> back(4);
  pred->toHost(back.data(), 4).await();
  EXPECT_EQ(back, flags);
}

TEST(Pjrt, CompilesExecutesAndSerializes) {
  auto& client = testRuntime().client();
  const char* mlir = R"(module {
  func.func public @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> (tensor<3xf32>) {
    %0 = "stablehlo.add"(%a, %b) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    "func.return"(%0) : (tensor<3xf32>) -> ()
  }
})";
  auto exe = client.compile(mlir, pjrt::CompileOptions{});
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
  auto ba = client.bufferFromHost(a, pjrt::ElementType::F32, {3}, 0);
  auto bb = client.bufferFromHost(b, pjrt::ElementType::F32, {3}, 0);
  auto outs = exe->execute({ba->raw(), bb->raw()}, client.devices()[0]);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(toHost<float>(*outs[0], 3), (std::vector<float>{11, 22, 33}));

  auto again = client.deserialize(exe->serialize());
  auto outs2 = again->execute({ba->raw(), bb->raw()}, client.devices()[0]);
  EXPECT_EQ(toHost<float>(*outs2[0], 3), (std::vector<float>{11, 22, 33}));
}

TEST(Pjrt, CompileErrorCarriesPluginMessage) {
  auto& client = testRuntime().client();
  try {
    client.compile("module { this is not mlir }", pjrt::CompileOptions{});
    FAIL() << "expected a PjrtError";
  } catch (const pjrt::PjrtError& e) {
    EXPECT_NE(std::string(e.what()).find("PJRT_Client_Compile"), std::string::npos);
  }
}

TEST(Pjrt, MissingPluginFailsWithReason) {
  EXPECT_THROW(pjrt::Plugin::load("/nonexistent/plugin.so"), std::runtime_error);
}

TEST(CompileOptions, EncodesBuildOptionsAsNestedMessage) {
  std::string bytes = pjrt::encodeCompileOptions(pjrt::CompileOptions{});
  // field 3, wire type 2, then a 2+10+2+2 byte message (device_ordinal -1 is a 10-byte varint),
  // then compile_portable_executable (field 4, varint) = 1.
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), (3 << 3) | 2);
  EXPECT_EQ(static_cast<size_t>(bytes[1]), bytes.size() - 4);
  EXPECT_EQ(bytes.size(), 2u + 11u + 2u + 2u + 2u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[bytes.size() - 2]), 4 << 3);
  EXPECT_EQ(static_cast<unsigned char>(bytes.back()), 1);
  pjrt::CompileOptions bound;
  bound.portable = false;
  EXPECT_EQ(pjrt::encodeCompileOptions(bound).size(), bytes.size() - 2);
}

TEST(Pjrt, PortableExecutableRunsOnEveryDevice) {
  auto& client = testRuntime().client();
  const char* mlir = R"(module {
  func.func public @main(%a: tensor<2xf32>) -> (tensor<2xf32>) {
    %0 = "stablehlo.add"(%a, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    "func.return"(%0) : (tensor<2xf32>) -> ()
  }
})";
  auto exe = client.compile(mlir, pjrt::CompileOptions{});
  auto again = client.deserialize(exe->serialize());
  for (size_t d = 0; d < client.devices().size(); ++d) {
    float a[2] = {1.5f, static_cast<float>(d)};
    auto buf = client.bufferFromHost(a, pjrt::ElementType::F32, {2}, d);
    auto outs = exe->execute({buf->raw()}, client.devices()[d]);
    EXPECT_EQ(toHost<float>(*outs[0], 2), (std::vector<float>{3.0f, 2.0f * d})) << "device " << d;
    EXPECT_EQ(outs[0]->device(), client.devices()[d]);
    auto outs2 = again->execute({buf->raw()}, client.devices()[d]);
    EXPECT_EQ(toHost<float>(*outs2[0], 2), (std::vector<float>{3.0f, 2.0f * d})) << "deserialized, device " << d;
  }
}

TEST(Pjrt, CopiesBuffersBetweenDevices) {
  auto& client = testRuntime().client();
  if (client.devices().size() < 2) GTEST_SKIP() << "one device";
  int32_t a[3] = {7, -8, 9};
  auto src = client.bufferFromHost(a, pjrt::ElementType::S32, {3}, 0);
  auto dst = src->copyToDevice(client.devices()[1]);
  EXPECT_EQ(dst->device(), client.devices()[1]);
  EXPECT_EQ(toHost<int32_t>(*dst, 3), (std::vector<int32_t>{7, -8, 9}));
}

TEST(Pjrt, EventOnReadyRunsTheCallback) {
  auto& client = testRuntime().client();
  float a[1] = {1};
  auto buf = client.bufferFromHost(a, pjrt::ElementType::F32, {1}, 0);
  pjrt::Event ready = buf->readyEvent();
  std::atomic<int> calls{0};
  bool hooked = ready.onReady([&](bool ok) { calls += ok ? 1 : 100; });
  if (!hooked) GTEST_SKIP() << "plugin has no PJRT_Event_OnReady";
  ready.await();
  for (int i = 0; i < 1000 && calls.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(calls.load(), 1);
}

// tpu_dist's host transport lends pooled host memory to a buffer (bufferAliasingHost) and reuses it
// only when doneWithHost fires: that must not happen while the buffer, or a program reading it, is alive.
TEST(Pjrt, AliasedHostMemoryIsReleasedOnlyAfterTheBufferAndItsReaders) {
  auto& client = testRuntime().client();
  alignas(64) static float host[1024];
  for (int i = 0; i < 1024; ++i) host[i] = static_cast<float>(i);
  auto up = client.bufferAliasingHost(host, pjrt::ElementType::F32, {1024}, 0);
  std::atomic<bool> released{false};
  ASSERT_TRUE(up.doneWithHost.onReady([&](bool) { released = true; }));
  const char* mlir = R"(module {
  func.func public @main(%a: tensor<1024xf32>) -> (tensor<1024xf32>) {
    %0 = "stablehlo.add"(%a, %a) : (tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
    "func.return"(%0) : (tensor<1024xf32>) -> ()
  }
})";
  auto exe = client.compile(mlir, pjrt::CompileOptions{});
  auto outs = exe->execute({up.buffer->raw()}, client.devices()[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (client.platformName() == "cpu") EXPECT_FALSE(released) << "released while its buffer is alive";
  EXPECT_EQ(toHost<float>(*up.buffer, 1024)[1023], 1023.0f);
  up.buffer.reset();
  EXPECT_EQ(toHost<float>(*outs[0], 1024)[1023], 2046.0f);
  for (int waited = 0; !released && waited < 2000; ++waited) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(released) << "never released after its buffer was destroyed";
}
