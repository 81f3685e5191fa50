#pragma once
// One entry of the op stream: which lowering, on which views, with which
// runtime operands. Everything that shapes the program is in `attrs` or in
// the views; everything that may change from call to call (Python scalars,
// RNG state) is a host operand, so it never forces a recompile.
#include <cstdint>
#include <span>
#include <vector>

#include "DeviceStorage.h"
#include "ExecutionMode.h"
#include "ViewSpec.h"
#include "csrc/hlo/Builder.h"

namespace tpu::runtime {

struct TensorArg {
  DeviceStorage* storage;
  ViewSpec view;
};

// A small host value passed as a device operand: a scalar, or up to 2 elements.
struct HostOperand {
  hlo::DType dtype;
  int64_t count = 0;  // 0: a scalar; else a 1-D array of `count` (<= 2)
  double f[2] = {0, 0};
  int64_t i[2] = {0, 0};
  // A random op's {seed, offset}: the 32-bit words it drew from the device's default
  // generator (a replayed compiled graph draws as many again), kForeignGenerator when it
  // drew from another generator (not replayable), 0 for every other operand.
  uint64_t rngWords = 0;
  static constexpr uint64_t kForeignGenerator = ~uint64_t{0};
  static HostOperand scalar(hlo::DType t, double v) {
    // float8 scalars travel as float32 and the program rounds them (torch's rules, hlo/Float8.cpp).
    HostOperand o{hlo::isFloat8(t) ? hlo::DType::F32 : t};
    o.f[0] = v;
    o.i[0] = static_cast<int64_t>(v);
    return o;
  }
  // A complex scalar of a complex dtype: f = {real, imaginary}.
  static HostOperand complexScalar(hlo::DType t, double re, double im) {
    HostOperand o{t};
    o.f[0] = re;
    o.f[1] = im;
    return o;
  }
  static HostOperand integer(hlo::DType t, int64_t v) {
    HostOperand o{t};
    o.f[0] = static_cast<double>(v);
    o.i[0] = v;
    return o;
  }
};

struct OpCall {
  const char* name = "";  // "aten::add.Tensor", for messages and logs
  int64_t opId = 0;       // distinguishes lowering rules in the cache key
  std::vector<int64_t> attrs;
  std::vector<TensorArg> inputs;
  std::vector<HostOperand> operands;
  std::vector<TensorArg> outputs;
  // The lowering returns one extra value after the outputs: a pred scalar, true
  // when an index was out of range. The runtime records it in the device's
  // error flag (raised at the next sync; at the op in debug mode).
  bool checksIndices = false;
  // With checksIndices: the flag is this failed assertion (torch._assert_async's message, raised as
  // RuntimeError), not an out-of-range index. Kept alive by the caller while the op runs.
  const char* assertMessage = nullptr;
  // Otherwise, what an out-of-range index raises: the error type CPU raises for the op the user
  // called (gather and scatter: RuntimeError) and that op's name (nullptr: `name`). Both are
  // constants of the program: fixed by the op id, or put in `attrs` by an IndexErrorScope.
  ErrorKind indexError = ErrorKind::Index;
  const char* indexErrorOp = nullptr;
  // torch.get_float32_matmul_precision() when the op was called (dots and convolutions honour it).
  hlo::Precision dotPrecision = hlo::Precision::Default;
};

// Builds the op's results (one per output, any dtype convertible to it) from
// its input views and operands.
using BuildFn = std::vector<hlo::Value>(hlo::Builder&, std::span<const hlo::Value> inputs,
                                        std::span<const hlo::Value> operands);

}  // namespace tpu::runtime
