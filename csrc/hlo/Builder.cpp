#include "Builder.h"
#include "Float8.h"

#include <cstring>
#include <stdexcept>

namespace tpu::hlo {
namespace {

std::string listI64(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

const char* cmpName(Cmp c) {
  switch (c) {
    case Cmp::EQ: return "EQ";
    case Cmp::NE: return "NE";
    case Cmp::LT: return "LT";
    case Cmp::LE: return "LE";
    case Cmp::GT: return "GT";
    case Cmp::GE: return "GE";
  }
  return "EQ";
}

const char* compareType(DType t) {
  if (isFloat(t) || isComplex(t)) return "FLOAT";  // complex: EQ and NE only
  if (isSigned(t)) return "SIGNED";
  return "UNSIGNED";
}

// Exact bit pattern of a floating constant, as MLIR's hex float literal.
std::string floatBits(DType t, double v) {
  char buf[32];
  switch (t) {
    case DType::F64: {
      uint64_t b;
      std::memcpy(&b, &v, 8);
      snprintf(buf, sizeof buf, "0x%016llX", static_cast<unsigned long long>(b));
      break;
    }
    case DType::F32: {
      float f = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      snprintf(buf, sizeof buf, "0x%08X", b);
      break;
    }
    case DType::BF16: {
      float f = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      // round to nearest even, keeping NaN a NaN
      uint32_t r = ((b >> 16) & 1) + 0x7FFF;
      uint16_t h = (f != f) ? 0x7FC0 : static_cast<uint16_t>((b + r) >> 16);
      snprintf(buf, sizeof buf, "0x%04X", h);
      break;
    }
    case DType::F16: {
      _Float16 h = static_cast<_Float16>(v);
      uint16_t b;
      std::memcpy(&b, &h, 2);
      snprintf(buf, sizeof buf, "0x%04X", b);
      break;
    }
    default: throw std::logic_error("floatBits on a non-float type");
  }
  return buf;
}

}  // namespace

std::string i64Array(const std::vector<int64_t>& v) {
  std::string s = "array<i64";
  for (size_t i = 0; i < v.size(); ++i) {
    s += i ? ", " : ": ";
    s += std::to_string(v[i]);
  }
  return s + ">";
}

Builder::Builder() : body_(&mainBody_) {}

Value Builder::fresh(const Type& t) {
  Value v;
  v.id = next_++;
  v.type = t;
  return v;
}

std::vector<Value> Builder::freshMulti(const std::vector<Type>& ts) {
  int32_t id = next_++;
  std::vector<Value> out;
  for (size_t i = 0; i < ts.size(); ++i) {
    Value v;
    v.id = id;
    v.index = ts.size() == 1 ? -1 : static_cast<int32_t>(i);
    v.type = ts[i];
    out.push_back(v);
  }
  return out;
}

void Builder::name(const Value& v, std::string& out) const {
  out += "%v";
  out += std::to_string(v.id);
  if (v.index >= 0) {
    out += '#';
    out += std::to_string(v.index);
  }
}

void Builder::emit(std::span<const Value> results, const char* op, std::span<const Value> operands,
                   const std::string& attrs, const std::vector<std::string>& regions) {
  std::string& s = *body_;
  s.append(indent_, ' ');
  if (!results.empty()) {
    s += "%v" + std::to_string(results[0].id);
    if (results.size() > 1) s += ":" + std::to_string(results.size());
    s += " = ";
  }
  s += '"';
  s += op;
  s += "\"(";
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i) s += ", ";
    name(operands[i], s);
  }
  s += ')';
  if (!regions.empty()) {
    s += " (";
    for (size_t i = 0; i < regions.size(); ++i) {
      if (i) s += ", ";
      s += regions[i];
    }
    s += ')';
  }
  if (!attrs.empty()) s += " {" + attrs + "}";
  s += " : (";
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i) s += ", ";
    operands[i].type.print(s);
  }
  s += ") -> ";
  if (results.size() == 1) {
    results[0].type.print(s);
  } else {
    s += '(';
    for (size_t i = 0; i < results.size(); ++i) {
      if (i) s += ", ";
      results[i].type.print(s);
    }
    s += ')';
  }
  s += '\n';
}

std::string Builder::region(std::span<const Type> argTypes, const RegionFn& body) {
  std::string text;
  std::string* saved = body_;
  int savedIndent = indent_;
  body_ = &text;
  indent_ += 4;
  std::vector<Value> args;
  std::string header = "{\n" + std::string(savedIndent + 2, ' ') + "^bb0(";
  for (size_t i = 0; i < argTypes.size(); ++i) {
    Value a = fresh(argTypes[i]);
    args.push_back(a);
    if (i) header += ", ";
    name(a, header);
    header += ": ";
    argTypes[i].print(header);
  }
  header += "):\n";
  std::vector<Value> yielded = body(*this, args);
  emit({}, "stablehlo.return", yielded, "");
  body_ = saved;
  indent_ = savedIndent;
  return header + text + std::string(savedIndent, ' ') + "}";
}

Value Builder::parameter(const Type& t) {
  Value v = fresh(t);
  params_.push_back(v);
  aliases_.push_back(-1);
  return v;
}

void Builder::ret(std::span<const Value> results) {
  results_.clear();
  for (const Value& v : results) results_.push_back(v.type);
  emit({}, "func.return", results, "");
}

std::unique_ptr<Builder> Builder::prefix(size_t bodyLength, size_t numParams, int32_t nextId) const {
  auto p = std::make_unique<Builder>();
  p->next_ = nextId;
  p->dotPrecision_ = dotPrecision_;
  p->params_.assign(params_.begin(), params_.begin() + static_cast<ptrdiff_t>(numParams));
  p->aliases_.assign(numParams, -1);
  p->functions_ = functions_;
  p->mainBody_ = mainBody_.substr(0, bodyLength);
  return p;
}

std::string Builder::module() const {
  std::string s = "module @torch_tpu {\n  func.func public @main(";
  for (size_t i = 0; i < params_.size(); ++i) {
    if (i) s += ", ";
    name(params_[i], s);
    s += ": ";
    params_[i].type.print(s);
    if (aliases_[i] >= 0) s += " {tf.aliasing_output = " + std::to_string(aliases_[i]) + " : i32}";
  }
  s += ") -> (";
  for (size_t i = 0; i < results_.size(); ++i) {
    if (i) s += ", ";
    results_[i].print(s);
  }
  s += ") {\n";
  s += mainBody_;
  s += "  }\n";
  for (const auto& f : functions_) {
    s += f.second;
    if (!f.second.empty() && f.second.back() != '\n') s += '\n';
  }
  s += "}\n";
  return s;
}

void Builder::addFunction(int64_t key, const std::string& text) {
  for (const auto& f : functions_)
    if (f.first == key) return;
  functions_.emplace_back(key, text);
}

std::vector<Value> Builder::call(const std::string& callee, std::span<const Value> operands,
                                 const std::vector<Type>& results) {
  std::vector<Value> rs = freshMulti(results);
  emit(rs, "func.call", operands, "callee = @" + callee);
  return rs;
}

Value Builder::constant(DType t, double v) {
  if (isFloat8(t)) return convert(constant(DType::F32, v), t);
  if (isComplex(t)) return complex(constant(hlo::componentType(t), v), constant(hlo::componentType(t), 0));
  if (!isFloat(t)) return constantInt(t, static_cast<int64_t>(v));
  Value r = fresh(Type{t, {}});
  std::string attr = "value = dense<" + floatBits(t, v) + "> : tensor<" + mlirName(t) + ">";
  emit({&r, 1}, "stablehlo.constant", {}, attr);
  return r;
}

Value Builder::constantInt(DType t, int64_t v) {
  if (isFloat(t) || isComplex(t)) return constant(t, static_cast<double>(v));
  Value r = fresh(Type{t, {}});
  std::string lit;
  if (t == DType::Pred) {
    lit = v ? "true" : "false";
  } else if (t == DType::U8) {
    lit = std::to_string(static_cast<uint8_t>(v));
  } else {
    lit = std::to_string(v);
  }
  std::string attr = "value = dense<" + lit + "> : tensor<" + mlirName(t) + ">";
  emit({&r, 1}, "stablehlo.constant", {}, attr);
  return r;
}

Value Builder::iota(const Type& t, int64_t dim) {
  Value r = fresh(t);
  emit({&r, 1}, "stablehlo.iota", {}, "iota_dimension = " + std::to_string(dim) + " : i64");
  return r;
}

Value Builder::unary(const char* op, Value x) {
  // abs of a complex value is its (real) modulus.
  bool toReal = isComplex(x.dtype()) && std::strcmp(op, "abs") == 0;
  Value r = fresh(toReal ? Type{hlo::componentType(x.dtype()), x.shape()} : x.type);
  std::string full = std::string("stablehlo.") + op;
  emit({&r, 1}, full.c_str(), {&x, 1}, "");
  return r;
}

Value Builder::binary(const char* op, Value a, Value b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    throw std::logic_error(std::string("binary ") + op + ": operand types differ: " + a.type.str() + " vs " +
                           b.type.str());
  // StableHLO orders complex numbers lexicographically in max/min; PyTorch defines no order on them.
  if (isComplex(a.dtype()) && (std::strcmp(op, "maximum") == 0 || std::strcmp(op, "minimum") == 0))
    throw std::invalid_argument(std::string(op) + " is not defined for complex values (" + a.type.str() + ")");
  Value r = fresh(a.type);
  Value ops[2] = {a, b};
  std::string full = std::string("stablehlo.") + op;
  emit({&r, 1}, full.c_str(), ops, "");
  return r;
}

Value Builder::compare(Cmp dir, Value a, Value b) {
  Value r = fresh(Type{DType::Pred, a.shape()});
  Value ops[2] = {a, b};
  std::string attr = std::string("comparison_direction = #stablehlo<comparison_direction ") + cmpName(dir) +
                     ">, compare_type = #stablehlo<comparison_type " + compareType(a.dtype()) + ">";
  emit({&r, 1}, "stablehlo.compare", ops, attr);
  return r;
}

Value Builder::select(Value pred, Value onTrue, Value onFalse) {
  Value r = fresh(onTrue.type);
  Value ops[3] = {pred, onTrue, onFalse};
  emit({&r, 1}, "stablehlo.select", ops, "");
  return r;
}

Value Builder::clamp(Value lo, Value x, Value hi) {
  Value r = fresh(x.type);
  Value ops[3] = {lo, x, hi};
  emit({&r, 1}, "stablehlo.clamp", ops, "");
  return r;
}

Value Builder::convert(Value x, DType to) {
  if (x.dtype() == to) return x;
  // float8 converts through float32 with torch's rounding and overflow rules (Float8.cpp).
  if (isFloat8(to)) return toFloat8(*this, x, to);
  if (isFloat8(x.dtype())) return convert(fromFloat8(*this, x), to);
  // Complex -> real would drop the imaginary part; lowerings say so with realPart().
  if (isComplex(x.dtype()) && !isComplex(to))
    throw std::logic_error("convert: " + x.type.str() + " to " + mlirName(to) +
                           " would drop the imaginary part (take realPart first)");
  // Into complex: through the component type (XLA converts real -> complex of the same width).
  if (isComplex(to) && !isComplex(x.dtype()) && x.dtype() != componentType(to)) x = convert(x, componentType(to));
  // A mask as 1/0 by select, not convert: XLA's simplifier rewrites y * convert(mask) into
  // select(mask, y, 0), which drops y's NaN and inf where the mask is false (CPU: NaN * 0 is NaN).
  if (x.dtype() == DType::Pred && isFloat(to))
    return select(x, full(Type{to, x.shape()}, 1.0), full(Type{to, x.shape()}, 0.0));
  return plainConvert(x, to);
}

Value Builder::plainConvert(Value x, DType to) {
  Value r = fresh(Type{to, x.shape()});
  emit({&r, 1}, "stablehlo.convert", {&x, 1}, "");
  return r;
}

Value Builder::bitcastConvert(Value x, const Type& to) {
  Value r = fresh(to);
  emit({&r, 1}, "stablehlo.bitcast_convert", {&x, 1}, "");
  return r;
}

Value Builder::realPart(Value x) {
  if (!isComplex(x.dtype())) return x;
  Value r = fresh(Type{hlo::componentType(x.dtype()), x.shape()});
  emit({&r, 1}, "stablehlo.real", {&x, 1}, "");
  return r;
}

Value Builder::imagPart(Value x) {
  if (!isComplex(x.dtype())) return scalarLike(x, 0);
  Value r = fresh(Type{hlo::componentType(x.dtype()), x.shape()});
  emit({&r, 1}, "stablehlo.imag", {&x, 1}, "");
  return r;
}

Value Builder::complex(Value re, Value im) {
  if (re.type != im.type || !isFloat(re.dtype()) || (re.dtype() != DType::F32 && re.dtype() != DType::F64))
    throw std::logic_error("complex: parts must be f32 or f64 of one type, got " + re.type.str() + " and " +
                           im.type.str());
  Value r = fresh(Type{complexOf(re.dtype()), re.shape()});
  Value ops[2] = {re, im};
  emit({&r, 1}, "stablehlo.complex", ops, "");
  return r;
}

Value Builder::isFinite(Value x) {
  if (isFloat8(x.dtype())) x = fromFloat8(*this, x);
  Value r = fresh(Type{DType::Pred, x.shape()});
  emit({&r, 1}, "stablehlo.is_finite", {&x, 1}, "");
  return r;
}

Value Builder::reshape(Value x, const Shape& shape) {
  if (x.shape() == shape) return x;
  Value r = fresh(Type{x.dtype(), shape});
  emit({&r, 1}, "stablehlo.reshape", {&x, 1}, "");
  return r;
}

Value Builder::broadcastInDim(Value x, const Shape& shape, const std::vector<int64_t>& dims) {
  Value r = fresh(Type{x.dtype(), shape});
  emit({&r, 1}, "stablehlo.broadcast_in_dim", {&x, 1}, "broadcast_dimensions = " + i64Array(dims));
  return r;
}

Value Builder::broadcast(Value x, const Shape& shape) {
  if (x.shape() == shape) return x;
  std::vector<int64_t> dims;
  int64_t offset = static_cast<int64_t>(shape.size()) - x.rank();
  if (offset < 0) throw std::logic_error("broadcast to a lower rank");
  for (int64_t i = 0; i < x.rank(); ++i) dims.push_back(offset + i);
  return broadcastInDim(x, shape, dims);
}

Value Builder::transpose(Value x, const std::vector<int64_t>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  Shape shape;
  for (int64_t p : perm) shape.push_back(x.shape()[p]);
  Value r = fresh(Type{x.dtype(), shape});
  emit({&r, 1}, "stablehlo.transpose", {&x, 1}, "permutation = " + i64Array(perm));
  return r;
}

Value Builder::slice(Value x, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
                     const std::vector<int64_t>& strides) {
  Shape shape;
  bool identity = true;
  for (size_t i = 0; i < start.size(); ++i) {
    int64_t n = limit[i] > start[i] ? (limit[i] - start[i] + strides[i] - 1) / strides[i] : 0;
    shape.push_back(n);
    identity &= start[i] == 0 && n == x.shape()[i] && (strides[i] == 1 || n <= 1);
  }
  if (identity) return x;
  Value r = fresh(Type{x.dtype(), shape});
  emit({&r, 1}, "stablehlo.slice", {&x, 1},
       "start_indices = " + i64Array(start) + ", limit_indices = " + i64Array(limit) +
           ", strides = " + i64Array(strides));
  return r;
}

Value Builder::pad(Value x, Value padValue, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
                   const std::vector<int64_t>& interior) {
  Shape shape;
  for (int64_t i = 0; i < x.rank(); ++i) {
    int64_t n = x.shape()[i];
    shape.push_back(lo[i] + hi[i] + n + (n > 0 ? (n - 1) * interior[i] : 0));
  }
  Value r = fresh(Type{x.dtype(), shape});
  Value ops[2] = {x, padValue};
  emit({&r, 1}, "stablehlo.pad", ops,
       "edge_padding_low = " + i64Array(lo) + ", edge_padding_high = " + i64Array(hi) +
           ", interior_padding = " + i64Array(interior));
  return r;
}

Value Builder::concatenate(std::span<const Value> xs, int64_t dim) {
  if (xs.size() == 1) return xs[0];
  Shape shape = xs[0].shape();
  shape[dim] = 0;
  for (const Value& x : xs) shape[dim] += x.shape()[dim];
  Value r = fresh(Type{xs[0].dtype(), shape});
  emit({&r, 1}, "stablehlo.concatenate", xs, "dimension = " + std::to_string(dim) + " : i64");
  return r;
}

Value Builder::reverse(Value x, const std::vector<int64_t>& dims) {
  if (dims.empty()) return x;
  Value r = fresh(x.type);
  emit({&r, 1}, "stablehlo.reverse", {&x, 1}, "dimensions = " + i64Array(dims));
  return r;
}

Value Builder::dynamicSlice(Value x, std::span<const Value> starts, const std::vector<int64_t>& sizes) {
  Value r = fresh(Type{x.dtype(), sizes});
  std::vector<Value> ops{x};
  ops.insert(ops.end(), starts.begin(), starts.end());
  emit({&r, 1}, "stablehlo.dynamic_slice", ops, "slice_sizes = " + i64Array(sizes));
  return r;
}

Value Builder::dynamicUpdateSlice(Value x, Value update, std::span<const Value> starts) {
  Value r = fresh(x.type);
  std::vector<Value> ops{x, update};
  ops.insert(ops.end(), starts.begin(), starts.end());
  emit({&r, 1}, "stablehlo.dynamic_update_slice", ops, "");
  return r;
}

std::string Builder::precisionConfig(DType t) const {
  if (dotPrecision_ == Precision::Default ||
      (t != DType::F32 && t != DType::F64 && t != DType::C64 && t != DType::C128))
    return "";
  const char* p = dotPrecision_ == Precision::Highest ? "HIGHEST" : "HIGH";
  return std::string(", precision_config = [#stablehlo<precision ") + p + ">, #stablehlo<precision " + p + ">]";
}

Value Builder::dotGeneral(Value a, Value b, const std::vector<int64_t>& batchA, const std::vector<int64_t>& batchB,
                          const std::vector<int64_t>& contractA, const std::vector<int64_t>& contractB,
                          DType resultType) {
  // Result dims: batch, then a's free dims, then b's free dims.
  Shape shape;
  for (int64_t d : batchA) shape.push_back(a.shape()[d]);
  auto freeDims = [&](const Value& v, const std::vector<int64_t>& batch, const std::vector<int64_t>& contract) {
    for (int64_t i = 0; i < v.rank(); ++i) {
      bool used = false;
      for (int64_t d : batch) used |= d == i;
      for (int64_t d : contract) used |= d == i;
      if (!used) shape.push_back(v.shape()[i]);
    }
  };
  freeDims(a, batchA, contractA);
  freeDims(b, batchB, contractB);
  Value r = fresh(Type{resultType, shape});
  Value ops[2] = {a, b};
  std::string attr = "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " + listI64(batchA) +
                     ", rhs_batching_dimensions = " + listI64(batchB) +
                     ", lhs_contracting_dimensions = " + listI64(contractA) +
                     ", rhs_contracting_dimensions = " + listI64(contractB) + ">" + precisionConfig(a.dtype());
  emit({&r, 1}, "stablehlo.dot_general", ops, attr);
  return r;
}

std::vector<Value> Builder::reduce(std::span<const Value> inputs, std::span<const Value> inits,
                                   const std::vector<int64_t>& dims, const RegionFn& body) {
  std::vector<Type> argTypes, resultTypes;
  for (const Value& v : inits) argTypes.push_back(v.type);
  for (const Value& v : inits) argTypes.push_back(v.type);
  for (const Value& in : inputs) {
    Shape s;
    for (int64_t i = 0; i < in.rank(); ++i) {
      bool reduced = false;
      for (int64_t d : dims) reduced |= d == i;
      if (!reduced) s.push_back(in.shape()[i]);
    }
    resultTypes.push_back(Type{in.dtype(), s});
  }
  std::string reg = region(argTypes, body);
  std::vector<Value> results = freshMulti(resultTypes);
  std::vector<Value> ops(inputs.begin(), inputs.end());
  ops.insert(ops.end(), inits.begin(), inits.end());
  emit(results, "stablehlo.reduce", ops, "dimensions = " + i64Array(dims), {reg});
  return results;
}

std::vector<Value> Builder::reduceWindow(std::span<const Value> inputs, std::span<const Value> inits,
                                         const std::vector<int64_t>& window, const std::vector<int64_t>& strides,
                                         const std::vector<std::pair<int64_t, int64_t>>& padding,
                                         const RegionFn& body) {
  std::vector<Type> argTypes, resultTypes;
  for (const Value& v : inits) argTypes.push_back(v.type);
  for (const Value& v : inits) argTypes.push_back(v.type);
  for (const Value& in : inputs) {
    Shape s;
    for (int64_t i = 0; i < in.rank(); ++i) {
      int64_t padded = in.shape()[i] + padding[i].first + padding[i].second;
      s.push_back(padded < window[i] ? 0 : (padded - window[i]) / strides[i] + 1);
    }
    resultTypes.push_back(Type{in.dtype(), s});
  }
  std::string reg = region(argTypes, body);
  std::vector<Value> results = freshMulti(resultTypes);
  std::vector<Value> ops(inputs.begin(), inputs.end());
  ops.insert(ops.end(), inits.begin(), inits.end());
  std::string pads = "dense<[";
  for (size_t i = 0; i < padding.size(); ++i) {
    if (i) pads += ", ";
    pads += "[" + std::to_string(padding[i].first) + ", " + std::to_string(padding[i].second) + "]";
  }
  pads += "]> : tensor<" + std::to_string(padding.size()) + "x2xi64>";
  if (padding.empty()) pads = "dense<> : tensor<0x2xi64>";
  emit(results, "stablehlo.reduce_window", ops,
       "window_dimensions = " + i64Array(window) + ", window_strides = " + i64Array(strides) +
           ", padding = " + pads,
       {reg});
  return results;
}

Value Builder::gather(Value operand, Value indices, const GatherDims& d, const std::vector<int64_t>& sliceSizes,
                      const Shape& resultShape) {
  Value r = fresh(Type{operand.dtype(), resultShape});
  Value ops[2] = {operand, indices};
  std::string attr = "dimension_numbers = #stablehlo.gather<offset_dims = " + listI64(d.offsetDims) +
                     ", collapsed_slice_dims = " + listI64(d.collapsedSliceDims) +
                     ", start_index_map = " + listI64(d.startIndexMap) +
                     ", index_vector_dim = " + std::to_string(d.indexVectorDim) +
                     ">, slice_sizes = " + i64Array(sliceSizes) + ", indices_are_sorted = false";
  emit({&r, 1}, "stablehlo.gather", ops, attr);
  return r;
}

Value Builder::scatter(Value operand, Value indices, Value updates, const ScatterDims& d, const RegionFn& body) {
  Type scalar{operand.dtype(), {}};
  Type argTypes[2] = {scalar, scalar};
  std::string reg = region(argTypes, body);
  Value r = fresh(operand.type);
  Value ops[3] = {operand, indices, updates};
  std::string attr = "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = " +
                     listI64(d.updateWindowDims) + ", inserted_window_dims = " + listI64(d.insertedWindowDims) +
                     ", scatter_dims_to_operand_dims = " + listI64(d.scatterDimsToOperandDims) +
                     ", index_vector_dim = " + std::to_string(d.indexVectorDim) +
                     ">, indices_are_sorted = false, unique_indices = false";
  emit({&r, 1}, "stablehlo.scatter", ops, attr, {reg});
  return r;
}

std::vector<Value> Builder::sort(std::span<const Value> inputs, int64_t dim, bool stable,
                                 const RegionFn& comparator) {
  std::vector<Type> argTypes, resultTypes;
  for (const Value& v : inputs) {
    argTypes.push_back(Type{v.dtype(), {}});
    argTypes.push_back(Type{v.dtype(), {}});
    resultTypes.push_back(v.type);
  }
  std::string reg = region(argTypes, comparator);
  std::vector<Value> results = freshMulti(resultTypes);
  emit(results, "stablehlo.sort", inputs,
       "dimension = " + std::to_string(dim) + " : i64, is_stable = " + (stable ? "true" : "false"), {reg});
  return results;
}

std::pair<Value, Value> Builder::rngBitGenerator(Value state, const Type& bitsType) {
  std::vector<Value> results = freshMulti({state.type, bitsType});
  emit(results, "stablehlo.rng_bit_generator", {&state, 1},
       "rng_algorithm = #stablehlo<rng_algorithm PHILOX>");
  return {results[0], results[1]};
}

// Generic ops and while loops (op coverage, tests/opinfo).
std::vector<Value> Builder::op(const char* fullName, std::span<const Value> operands, const std::vector<Type>& results,
                               const std::string& attrs) {
  std::vector<Value> rs = freshMulti(results);
  emit(rs, fullName, operands, attrs);
  return rs;
}

std::vector<Value> Builder::whileLoop(std::span<const Value> init, const RegionFn& cond, const RegionFn& body) {
  std::vector<Type> types;
  for (const Value& v : init) types.push_back(v.type);
  std::string c = region(types, cond);
  std::string bd = region(types, body);
  std::vector<Value> rs = freshMulti(types);
  emit(rs, "stablehlo.while", init, "", {c, bd});
  return rs;
}

}  // namespace tpu::hlo
