// torch_tpu.pallas: registering JAX exports as foreign functions and running them on tpu tensors.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "csrc/aten/ForeignKernels.h"
#include "csrc/runtime/ForeignFunctions.h"
#include "csrc/runtime/PrecisionCost.h"
#include "csrc/runtime/Runtime.h"

namespace py = pybind11;
using namespace tpu;

namespace {

aten::ForeignSignature signature(const std::vector<std::pair<at::ScalarType, std::vector<int64_t>>>& types) {
  aten::ForeignSignature s;
  for (const auto& [t, shape] : types) {
    s.dtypes.push_back(t);
    s.shapes.push_back(shape);
  }
  return s;
}

}  // namespace

void registerPallasBindings(py::module& m) {
  m.def("_foreign_register",
        [](const std::string& name, const std::string& symbol, const std::string& text,
           const std::vector<std::pair<at::ScalarType, std::vector<int64_t>>>& inputs,
           const std::vector<std::pair<at::ScalarType, std::vector<int64_t>>>& outputs) {
          return aten::registerForeign(name, symbol, text, signature(inputs), signature(outputs));
        });
  m.def("_foreign_call", &aten::runForeign);
  m.def("_foreign_count", &runtime::foreignFunctionCount);
  // The one-time warning torch.tpu.precision documents, for a module on a platform ("" if none).
  m.def("_dot_precision_cost", &runtime::dotPrecisionCost);
  // The StableHLO versions the plugin's compiler reads ("" where it does not say).
  m.def("_plugin_stablehlo_versions", [] {
    const auto& p = runtime::Runtime::get().client().plugin();
    return std::make_pair(p.versionAttribute("stablehlo_current_version"),
                          p.versionAttribute("stablehlo_minimum_version"));
  });
}
