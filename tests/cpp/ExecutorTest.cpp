// The strict executor alone: op calls on device storages, caching, views, operands.
#include "TestPlugin.h"
#include "csrc/runtime/Executor.h"

using namespace tpu;
using hlo::DType;

namespace {

runtime::DeviceStorage storageOf(const std::vector<float>& values) {
  runtime::DeviceStorage s;
  s.nbytes = values.size() * sizeof(float);
  runtime::Executor::get().upload(s, values.data(), DType::F32);
  return s;
}

std::vector<float> read(const runtime::DeviceStorage& s) {
  std::vector<float> out(s.nbytes / sizeof(float));
  runtime::Executor::get().download(s, out.data());
  return out;
}

runtime::ViewSpec contiguous(int64_t n, int64_t offset = 0) { return {DType::F32, {n}, {1}, offset}; }

}  // namespace

TEST(Executor, RunsCachesAndKeepsOperandsOutOfTheKey) {
  testRuntime();
  auto& ex = runtime::Executor::get();
  runtime::DeviceStorage in = storageOf({1, 2, 3, 4});
  runtime::DeviceStorage out;
  out.nbytes = 16;
  static const int64_t id = runtime::newOpId();
  auto scaleBy = [&](double factor) {
    runtime::OpCall call;
    call.name = "test::scale";
    call.opId = id;
    call.inputs.push_back({&in, contiguous(4)});
    call.operands.push_back(runtime::HostOperand::scalar(DType::F32, factor));
    call.outputs.push_back({&out, contiguous(4)});
    ex.run(call, [](hlo::Builder& b, std::span<const hlo::Value> v, std::span<const hlo::Value> ops) {
      return std::vector<hlo::Value>{b.mul(v[0], b.broadcast(ops[0], v[0].shape()))};
    });
  };
  auto before = ex.stats();
  scaleBy(2);
  EXPECT_EQ(read(out), (std::vector<float>{2, 4, 6, 8}));
  scaleBy(-1);
  EXPECT_EQ(read(out), (std::vector<float>{-1, -2, -3, -4}));
  auto after = ex.stats();
  EXPECT_EQ(after.cacheMisses - before.cacheMisses, 1);
  EXPECT_EQ(after.cacheHits - before.cacheHits, 1);
}

TEST(Executor, PartialWriteWithOperandUpdatesOnlyTheView) {
  testRuntime();
  runtime::DeviceStorage s = storageOf({0, 1, 2, 3, 4, 5});
  static const int64_t id = runtime::newOpId();
  runtime::OpCall call;
  call.name = "test::fill";
  call.opId = id;
  call.operands.push_back(runtime::HostOperand::scalar(DType::F32, 9));
  call.outputs.push_back({&s, runtime::ViewSpec{DType::F32, {2}, {2}, 1}});  // elements 1 and 3
  runtime::Executor::get().run(call, [](hlo::Builder& b, std::span<const hlo::Value>,
                                        std::span<const hlo::Value> ops) {
    return std::vector<hlo::Value>{b.broadcast(ops[0], {2})};
  });
  EXPECT_EQ(read(s), (std::vector<float>{0, 9, 2, 9, 4, 5}));
}

TEST(Executor, NeverWrittenStorageReadsAsZeros) {
  testRuntime();
  runtime::DeviceStorage empty, out;
  empty.nbytes = out.nbytes = 12;
  static const int64_t id = runtime::newOpId();
  runtime::OpCall call;
  call.name = "test::plus_one";
  call.opId = id;
  call.inputs.push_back({&empty, contiguous(3)});
  call.outputs.push_back({&out, contiguous(3)});
  runtime::Executor::get().run(call, [](hlo::Builder& b, std::span<const hlo::Value> v, std::span<const hlo::Value>) {
    return std::vector<hlo::Value>{b.add(v[0], b.scalarLike(v[0], 1))};
  });
  EXPECT_EQ(read(out), (std::vector<float>{1, 1, 1}));
}

TEST(Executor, CompileErrorNamesTheOp) {
  testRuntime();
  runtime::DeviceStorage out;
  out.nbytes = 4;
  static const int64_t id = runtime::newOpId();
  runtime::OpCall call;
  call.name = "test::broken";
  call.opId = id;
  call.outputs.push_back({&out, contiguous(1)});
  try {
    runtime::Executor::get().run(call, [](hlo::Builder& b, std::span<const hlo::Value>, std::span<const hlo::Value>) {
      // An unknown op name makes XLA reject the module.
      return std::vector<hlo::Value>{b.unary("no_such_op", b.full(hlo::Type{DType::F32, {1}}, 0))};
    });
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("test::broken"), std::string::npos) << e.what();
  }
}

// Index kernels return an extra "out of range" pred; the runtime keeps the
// first such op in a device flag and raises at the next sync point.
TEST(Executor, OutOfRangeFlagRaisesAtTheNextSyncOnce) {
  testRuntime();
  auto& ex = runtime::Executor::get();
  runtime::DeviceStorage in = storageOf({1, 2, 3, 4});
  runtime::DeviceStorage out;
  out.nbytes = 16;
  static const int64_t id = runtime::newOpId();
  auto run = [&](float limit) {
    runtime::OpCall call;
    call.name = "test::checked";
    call.opId = id;
    call.checksIndices = true;
    call.inputs.push_back({&in, contiguous(4)});
    call.operands.push_back(runtime::HostOperand::scalar(DType::F32, limit));
    call.outputs.push_back({&out, contiguous(4)});
    ex.run(call, [](hlo::Builder& b, std::span<const hlo::Value> v, std::span<const hlo::Value> ops) {
      hlo::Value over = b.compare(hlo::Cmp::GT, v[0], b.broadcast(ops[0], v[0].shape()));
      hlo::Value flat = over;
      hlo::Value init = b.constantInt(DType::Pred, 0);
      hlo::Value any = b.reduce({&flat, 1}, {&init, 1}, {0}, [](hlo::Builder& r, std::span<const hlo::Value> a) {
        return std::vector<hlo::Value>{r.binary("or", a[0], a[1])};
      })[0];
      return std::vector<hlo::Value>{v[0], any};
    });
  };
  run(10);
  EXPECT_NO_THROW(ex.synchronize());
  run(3);  // 4 > 3: flagged, nothing raised at launch
  run(10);  // a later clean op does not clear the flag
  EXPECT_THROW(
      {
        try {
          read(out);
        } catch (const std::out_of_range& e) {
          EXPECT_NE(std::string(e.what()).find("test::checked"), std::string::npos);
          throw;
        }
      },
      std::out_of_range);
  EXPECT_NO_THROW(ex.synchronize());  // reported once
  EXPECT_EQ(read(out), (std::vector<float>{1, 2, 3, 4}));
}
