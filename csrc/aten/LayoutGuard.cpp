// tpu runs strided (dense) tensors only. Sparse (COO, CSR, CSC, BSR, BSC),
// nested and quantized tensors are refused where they would reach tpu, with an
// error naming the layout, instead of producing a tensor that fails on every
// later use.
//
// Where they arrive:
//  - COO `.to("tpu")` and factories (`torch.empty(..., layout=torch.sparse_coo,
//    device="tpu")`): ops dispatched to SparsePrivateUse1 / SparseCsrPrivateUse1.
//  - nested `.to("tpu")`: NestedTensorPrivateUse1; quantized: QuantizedPrivateUse1.
//    A boxed fallback on each of those keys refuses every op.
//  - `.to("tpu")` of any of them: `_to_copy`'s BackendSelect kernel joins the
//    input's keys with the target device's, so a CPU sparse CSR input dispatches to
//    SparseCsrPrivateUse1, where PyTorch's CompositeExplicitAutograd `_to_copy` would
//    build the tpu tensor from its moved members (a fallback does not override a
//    composite kernel). A `_to_copy` kernel on each of those keys refuses it.
//  - factories whose CompositeExplicitAutograd kernel builds a compressed tensor
//    without dispatching again (`torch.zeros(..., layout=torch.sparse_csr,
//    device="tpu")`): every aten op with a `layout` argument and such a kernel gets
//    a refusing kernel on those keys at load (about forty factories).
// Not covered: torch.sparse_csr_tensor(..., device="tpu") is composite and
// dispatches on its (CPU) index tensors, so it builds the tensor without reaching
// any tpu key; its first op then meets the fallback.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace tpu::aten {
namespace {

std::string layoutName(c10::Layout layout) {
  switch (layout) {
    case c10::kSparse: return "sparse COO (torch.sparse_coo)";
    case c10::kSparseCsr: return "sparse CSR (torch.sparse_csr)";
    case c10::kSparseCsc: return "sparse CSC (torch.sparse_csc)";
    case c10::kSparseBsr: return "sparse BSR (torch.sparse_bsr)";
    case c10::kSparseBsc: return "sparse BSC (torch.sparse_bsc)";
    case c10::kMkldnn: return "mkldnn (torch._mkldnn)";
    case c10::kJagged: return "jagged (torch.jagged)";
    default: {
      std::ostringstream s;
      s << layout;
      return s.str();
    }
  }
}

[[noreturn]] void refuse(const std::string& op, const std::string& what) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, op, ": tpu supports strided (dense) tensors only, got a ", what,
                              " tensor. Keep it on the CPU, or convert it first (e.g. .to_dense() for "
                              "sparse, .unbind() or .to_padded_tensor() for nested, .dequantize() for "
                              "quantized) and move the dense tensor to tpu.");
}

// What the op was given, from its arguments (a tensor's layout, or a factory's
// `layout=`), else from the dispatch key that brought it here.
std::string describe(const c10::OperatorHandle& op, const torch::jit::Stack& stack, const char* byKey) {
  const auto& args = op.schema().arguments();
  size_t first = stack.size() - args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = stack[first + i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) continue;
      if (t.is_nested()) return "nested";
      if (t.is_quantized()) return "quantized";
      if (t.layout() != c10::kStrided) return layoutName(t.layout());
    } else if (args[i].name() == "layout" && v.isInt()) {
      return layoutName(static_cast<c10::Layout>(v.toInt()));
    }
  }
  return byKey;
}

template <const char* kWhat>
void refuseBoxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string name = c10::toString(op.schema().operator_name());
  refuse(name, describe(op, *stack, kWhat));
}

constexpr char kSparse[] = "sparse COO (torch.sparse_coo)";
constexpr char kSparseCompressed[] = "sparse compressed (CSR/CSC/BSR/BSC)";
constexpr char kNested[] = "nested";
constexpr char kQuantized[] = "quantized";

template <const char* kWhat>
at::Tensor refuseToCopy(const at::Tensor& self, std::optional<c10::ScalarType>, std::optional<c10::Layout>,
                        std::optional<c10::Device>, std::optional<bool>, bool, std::optional<c10::MemoryFormat>) {
  std::string what = self.is_nested() ? "nested" : self.is_quantized() ? "quantized"
                     : self.layout() != c10::kStrided ? layoutName(self.layout()) : kWhat;
  refuse("aten::_to_copy", what);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuseBoxed<kSparse>>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuseBoxed<kSparseCompressed>>());
}
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuseBoxed<kNested>>());
}
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuseBoxed<kQuantized>>());
}
// `_to_copy` has composite kernels on every backend key; these win over them.
TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) { m.impl("_to_copy", refuseToCopy<kSparse>); }
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) { m.impl("_to_copy", refuseToCopy<kSparseCompressed>); }
TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) { m.impl("_to_copy", refuseToCopy<kNested>); }
TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) { m.impl("_to_copy", refuseToCopy<kQuantized>); }

namespace {

template <const char* kWhat>
void registerFactoryRefusals(c10::DispatchKey key, std::vector<std::unique_ptr<torch::Library>>& libs) {
  auto& dispatcher = c10::Dispatcher::singleton();
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op || !op->hasSchema() || op->hasKernelForDispatchKey(key)) continue;
    if (!op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
        !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional))
      continue;
    bool factory = false;
    for (const auto& arg : op->schema().arguments()) factory = factory || arg.name() == "layout";
    if (!factory) continue;
    std::string qualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    lib->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&refuseBoxed<kWhat>>());
  }
  libs.push_back(std::move(lib));
}

// After the registrations above (same translation unit: static initialisers run in order).
const bool kFactoriesRefused = [] {
  static std::vector<std::unique_ptr<torch::Library>> libs;  // registrations live as long as the process
  registerFactoryRefusals<kSparse>(c10::DispatchKey::SparsePrivateUse1, libs);
  registerFactoryRefusals<kSparseCompressed>(c10::DispatchKey::SparseCsrPrivateUse1, libs);
  return true;
}();

}  // namespace

}  // namespace tpu::aten
