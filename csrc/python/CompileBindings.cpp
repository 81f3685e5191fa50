// torch.compile replay (torch_tpu/compile/replay.py): capture what a compiled graph's
// flush ran, and launch it again on new input buffers with no tracing.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/ATen.h>

#include "csrc/aten/DeviceAllocator.h"
#include "csrc/aten/Generator.h"
#include "csrc/runtime/Executor.h"

namespace py = pybind11;
using namespace tpu;

namespace {

runtime::DeviceStorage* storageOf(const at::Tensor& t) {
  if (t.device().type() != c10::DeviceType::PrivateUse1)
    throw std::invalid_argument("torch_tpu: compiled graph replay: expected a tpu tensor");
  runtime::DeviceStorage* s = aten::deviceStorage(t.storage());
  if (!s) throw std::invalid_argument("torch_tpu: compiled graph replay: a tensor without a device storage");
  return s;
}

// The graph's operand values for this launch: constants as captured; each random op's
// {seed, offset} drawn again from the device's default generator, in the order the traced
// call drew them, so a replay advances the generator exactly as tracing the graph would.
std::vector<runtime::HostOperand> operandsForLaunch(const runtime::CapturedGraph& g) {
  std::vector<runtime::HostOperand> operands;
  operands.reserve(g.params.size());
  for (const auto& p : g.params) {
    runtime::HostOperand o = p.operand;
    if (o.rngWords && o.rngWords != runtime::HostOperand::kForeignGenerator) {
      aten::TpuGenerator* gen = aten::generatorFor(std::nullopt, static_cast<c10::DeviceIndex>(g.device));
      std::lock_guard<std::mutex> lock(gen->mutex_);
      o.i[0] = static_cast<int64_t>(gen->current_seed());
      o.i[1] = static_cast<int64_t>(gen->reserve(o.rngWords));
    }
    operands.push_back(o);
  }
  return operands;
}

}  // namespace

void registerCompileBindings(py::module& m) {
  using runtime::CapturedGraph;
  py::class_<CapturedGraph, std::shared_ptr<CapturedGraph>>(m, "_CapturedGraph")
      .def(py::init<>())
      .def_readonly("complete", &CapturedGraph::complete)
      .def_readonly("device", &CapturedGraph::device)
      // A random op drew from a generator other than the device default: replay cannot draw again.
      .def_property_readonly("uses_foreign_generator", [](const CapturedGraph& g) {
        for (const auto& p : g.params)
          if (p.operand.rngWords == runtime::HostOperand::kForeignGenerator) return true;
        return false;
      })
      .def_property_readonly("param_storages", [](const CapturedGraph& g) {
        std::vector<uintptr_t> v;
        for (const auto& p : g.params) v.push_back(p.storage);
        return v;
      })
      .def_property_readonly("result_storages", [](const CapturedGraph& g) {
        std::vector<uintptr_t> v;
        for (const auto& r : g.results) v.push_back(r.storage);
        return v;
      });
  // Inside a compiled-graph scope (after _compiled_graph_begin): its final flush fills `g`.
  m.def("_compiled_graph_capture", [](std::shared_ptr<CapturedGraph> g) {
    runtime::Executor::get().captureCompiledGraph(std::move(g));
  });
  // inputs[p]: the tensor whose storage feeds storage parameter p (None otherwise);
  // outputs[r]: the tensor whose storage receives result r (a mutated input), or None for a
  // new storage, allocated here. Returns, per result, a tensor on the storage it went to.
  m.def("_compiled_graph_replay", [](const CapturedGraph& g, const std::vector<std::optional<at::Tensor>>& inputs,
                                     const std::vector<std::optional<at::Tensor>>& outputs) {
    if (!g.complete) throw std::invalid_argument("torch_tpu: this compiled graph was not captured whole");
    if (inputs.size() != g.params.size() || outputs.size() != g.results.size())
      throw std::invalid_argument("torch_tpu: compiled graph replay: wrong number of inputs or outputs");
    std::vector<runtime::DeviceStorage*> in(inputs.size(), nullptr), out(outputs.size(), nullptr);
    for (size_t p = 0; p < inputs.size(); ++p)
      if (inputs[p]) in[p] = storageOf(*inputs[p]);
    std::vector<runtime::HostOperand> operands = operandsForLaunch(g);
    std::vector<at::Tensor> results;
    for (size_t r = 0; r < outputs.size(); ++r) {
      at::Tensor t = outputs[r] ? *outputs[r]
                                : at::empty({static_cast<int64_t>(g.results[r].nbytes)},
                                            at::TensorOptions().dtype(at::kByte).device(c10::DeviceType::PrivateUse1,
                                                                                        g.device));
      out[r] = storageOf(t);
      if (out[r]->nbytes != g.results[r].nbytes)
        throw std::invalid_argument("torch_tpu: compiled graph replay: an output storage changed size");
      results.push_back(std::move(t));
    }
    {
      py::gil_scoped_release release;
      runtime::Executor::get().replayCompiledGraph(g, in, operands, out);
    }
    return results;
  });
}
