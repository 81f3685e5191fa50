#pragma once
// Builds one StableHLO function (`@main`) and prints it as an MLIR module in
// generic op form, which old and new plugins parse alike.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "Type.h"

namespace tpu::hlo {

// An SSA value: result `index` of instruction `id` (index -1: sole result).
struct Value {
  int32_t id = -1;
  int32_t index = -1;
  Type type{DType::F32, {}};
  DType dtype() const { return type.dtype; }
  const Shape& shape() const { return type.shape; }
  int64_t rank() const { return type.rank(); }
};

enum class Cmp { EQ, NE, LT, LE, GT, GE };

// How exactly float32 matmuls and convolutions must be computed (torch.set_float32_matmul_precision):
// Highest is full float32, High allows TF32 / three bf16 passes, Default lets the backend choose
// (one bf16 pass on TPU, TF32 on NVIDIA GPUs).
enum class Precision : uint8_t { Default, High, Highest };

struct GatherDims {
  std::vector<int64_t> offsetDims, collapsedSliceDims, startIndexMap;
  int64_t indexVectorDim = 0;
};

struct ScatterDims {
  std::vector<int64_t> updateWindowDims, insertedWindowDims, scatterDimsToOperandDims;
  int64_t indexVectorDim = 0;
};

class Builder {
 public:
  // Region bodies receive their block arguments and return the values to yield.
  using RegionFn = std::function<std::vector<Value>(Builder&, std::span<const Value>)>;

  Builder();

  Value parameter(const Type& t);
  // Parameter `param` (in creation order) may be reused for result `result`: the
  // caller donates that input buffer to the program (`tf.aliasing_output`).
  void aliasParameter(size_t param, int32_t result) { aliases_.at(param) = result; }
  // Per parameter: the result it aliases (donation), or -1.
  const std::vector<int32_t>& aliases() const { return aliases_; }
  void ret(std::span<const Value> results);
  std::string module() const;  // the whole printed module
  // Length of the printed body so far (an op boundary when no region is being built).
  size_t bodySize() const { return mainBody_.size(); }
  // A builder holding the first `bodyLength` characters of this body and its first `numParams`
  // parameters (no donations), ready for another `ret`: a prefix of a recorded fused graph.
  // `nextId`: the SSA number the prefix's next value gets (nextId() at that point).
  std::unique_ptr<Builder> prefix(size_t bodyLength, size_t numParams, int32_t nextId) const;
  int32_t nextId() const { return next_; }
  const std::vector<Value>& params() const { return params_; }
  // The precision of the dots and convolutions built from here on.
  void setDotPrecision(Precision p) { dotPrecision_ = p; }
  // `, precision_config = [...]` for two operands of type `t` ("" where the backend may choose).
  std::string precisionConfig(DType t) const;

  // Constants.
  Value constant(DType t, double v);   // scalar
  Value constantInt(DType t, int64_t v);  // scalar (exact for 64-bit ints)
  Value full(const Type& t, double v) { return broadcast(constant(t.dtype, v), t.shape); }
  Value iota(const Type& t, int64_t dim);

  // Elementwise.
  Value unary(const char* op, Value x);                     // "exponential", ...
  Value binary(const char* op, Value a, Value b);           // "add", ... same shapes
  Value compare(Cmp dir, Value a, Value b);                 // -> i1
  Value select(Value pred, Value onTrue, Value onFalse);
  Value clamp(Value lo, Value x, Value hi);
  Value convert(Value x, DType to);  // with torch's rules (complex, float8)
  Value plainConvert(Value x, DType to);  // one stablehlo.convert
  Value bitcastConvert(Value x, const Type& to);
  Value isFinite(Value x);
  // Complex parts (realPart/imagPart of a real value: itself / zeros) and complex(re, im) of f32/f64 parts.
  Value realPart(Value x);
  Value imagPart(Value x);
  Value complex(Value re, Value im);

  // Shapes and layout.
  Value reshape(Value x, const Shape& shape);
  Value broadcastInDim(Value x, const Shape& shape, const std::vector<int64_t>& dims);
  Value broadcast(Value scalarOrSame, const Shape& shape);  // numpy-style trailing alignment
  Value transpose(Value x, const std::vector<int64_t>& perm);
  Value slice(Value x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
              const std::vector<int64_t>& strides);
  Value pad(Value x, Value padValue, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
            const std::vector<int64_t>& interior);
  Value concatenate(std::span<const Value> xs, int64_t dim);
  Value reverse(Value x, const std::vector<int64_t>& dims);
  Value dynamicSlice(Value x, std::span<const Value> starts, const std::vector<int64_t>& sizes);
  Value dynamicUpdateSlice(Value x, Value update, std::span<const Value> starts);

  // Contractions, reductions, data movement.
  Value dotGeneral(Value a, Value b, const std::vector<int64_t>& batchA, const std::vector<int64_t>& batchB,
                   const std::vector<int64_t>& contractA, const std::vector<int64_t>& contractB,
                   DType resultType);
  std::vector<Value> reduce(std::span<const Value> inputs, std::span<const Value> inits,
                            const std::vector<int64_t>& dims, const RegionFn& body);
  std::vector<Value> reduceWindow(std::span<const Value> inputs, std::span<const Value> inits,
                                  const std::vector<int64_t>& window, const std::vector<int64_t>& strides,
                                  const std::vector<std::pair<int64_t, int64_t>>& padding,
                                  const RegionFn& body);
  Value gather(Value operand, Value indices, const GatherDims& dims, const std::vector<int64_t>& sliceSizes,
               const Shape& resultShape);
  Value scatter(Value operand, Value indices, Value updates, const ScatterDims& dims, const RegionFn& body);
  std::vector<Value> sort(std::span<const Value> inputs, int64_t dim, bool stable, const RegionFn& comparator);
  // Returns {new_state, random_bits} for the Philox algorithm.
  std::pair<Value, Value> rngBitGenerator(Value state, const Type& bitsType);

  // Convenience wrappers.
  Value add(Value a, Value b) { return binary("add", a, b); }
  Value sub(Value a, Value b) { return binary("subtract", a, b); }
  Value mul(Value a, Value b) { return binary("multiply", a, b); }
  Value div(Value a, Value b) { return binary("divide", a, b); }
  Value max(Value a, Value b) { return binary("maximum", a, b); }
  Value min(Value a, Value b) { return binary("minimum", a, b); }
  Value neg(Value x) { return unary("negate", x); }
  Value scalarLike(Value x, double v) { return full(Type{x.dtype(), x.shape()}, v); }

  // Any op by its full name ("chlo.lgamma", "stablehlo.convolution", ...) with printed attributes (op coverage).
  std::vector<Value> op(const char* fullName, std::span<const Value> operands, const std::vector<Type>& results,
                        const std::string& attrs = "");
  // Functions printed after @main: another module's functions (a JAX export, torch_tpu.pallas), already
  // renamed apart and private. `key` names the text: a function used twice in one program is printed once.
  void addFunction(int64_t key, const std::string& text);
  // `func.call @callee(operands)` of a function added with addFunction.
  std::vector<Value> call(const std::string& callee, std::span<const Value> operands, const std::vector<Type>& results);
  // stablehlo.while over the loop-carried values `init`: cond returns one i1 scalar, body the next values.
  std::vector<Value> whileLoop(std::span<const Value> init, const RegionFn& cond, const RegionFn& body);

 private:
  Value fresh(const Type& t);
  std::vector<Value> freshMulti(const std::vector<Type>& ts);
  // Prints `results = "stablehlo.<op>"(operands) regions {attrs} : (types) -> types`.
  void emit(std::span<const Value> results, const char* op, std::span<const Value> operands,
            const std::string& attrs, const std::vector<std::string>& regions = {});
  std::string region(std::span<const Type> argTypes, const RegionFn& body);
  void name(const Value& v, std::string& out) const;

  int32_t next_ = 0;
  Precision dotPrecision_ = Precision::Default;
  std::vector<Value> params_;
  std::vector<int32_t> aliases_;  // per parameter: the result it aliases, or -1
  std::vector<Type> results_;
  std::vector<std::pair<int64_t, std::string>> functions_;  // addFunction, in order
  std::string* body_;
  std::string mainBody_;
  int indent_ = 4;
};

// `array<i64: 1, 2>`
std::string i64Array(const std::vector<int64_t>& v);

}  // namespace tpu::hlo
