// torch.compile replay (torch_tpu/compile/replay.py): capture what a compiled graph's
// flush ran, and launch it again on new input buffers with no tracing.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/Dtype.h>

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

// inputs[p]: the tensor whose storage feeds storage parameter p (undefined otherwise);
// outputs[r]: the tensor whose storage receives result r (a mutated input), or undefined for
// a new storage, allocated here. Returns, per result, a tensor on the storage it went to.
std::vector<at::Tensor> launchCapturedGraph(const runtime::CapturedGraph& g, const std::vector<at::Tensor>& inputs,
                                            const std::vector<at::Tensor>& outputs) {
  if (!g.complete) throw std::invalid_argument("torch_tpu: this compiled graph was not captured whole");
  if (inputs.size() != g.params.size() || outputs.size() != g.results.size())
    throw std::invalid_argument("torch_tpu: compiled graph replay: wrong number of inputs or outputs");
  std::vector<runtime::DeviceStorage*> in(inputs.size(), nullptr), out(outputs.size(), nullptr);
  for (size_t p = 0; p < inputs.size(); ++p)
    if (inputs[p].defined()) in[p] = storageOf(inputs[p]);
  std::vector<at::Tensor> results;
  results.reserve(outputs.size());
  for (size_t r = 0; r < outputs.size(); ++r) {
    at::Tensor t = outputs[r].defined()
                       ? outputs[r]
                       : at::empty({static_cast<int64_t>(g.results[r].nbytes)},
                                   at::TensorOptions().dtype(at::kByte).device(c10::DeviceType::PrivateUse1, g.device));
    out[r] = storageOf(t);
    if (out[r]->nbytes != g.results[r].nbytes)
      throw std::invalid_argument("torch_tpu: compiled graph replay: an output storage changed size");
    results.push_back(std::move(t));
  }
  std::vector<runtime::HostOperand> operands = operandsForLaunch(g);
  {
    py::gil_scoped_release release;
    runtime::Executor::get().replayCompiledGraph(g, in, operands, out);
  }
  return results;
}

// A graph's replay plan for one argument signature (replay.py builds the mapping once):
// each call checks the arguments against the capture and launches, all in C++, so a
// replayed call costs no Python per argument or output.
class ReplayPlan {
 public:
  struct Output {
    // kSame: the argument object itself (a saved input: autograd checks its version at backward).
    // kEmpty: a tensor of no elements, which no program writes: made anew (no allocation, no launch).
    enum Kind { kNew, kArg, kSame, kValue, kEmpty } kind = kValue;
    int index = 0;  // result (kNew), argument (kArg, kSame) or device index (kEmpty)
    c10::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
    py::object value;  // kValue
  };

  // args: the capture's arguments; params[p] / results[r]: argument index or -1.
  ReplayPlan(std::shared_ptr<runtime::CapturedGraph> graph, const py::list& args, std::vector<int> params,
             std::vector<int> results, std::vector<Output> outputs)
      : graph_(std::move(graph)), params_(std::move(params)), results_(std::move(results)),
        outputs_(std::move(outputs)) {
    for (const py::handle& a : args) {
      Arg sig;
      if (!describe(a, sig)) throw std::invalid_argument("torch_tpu: replay plan: an argument that cannot be replayed");
      signature_.push_back(std::move(sig));
    }
  }

  // True when `args` look as the capture's did: dtype, sizes, strides, storage offset and
  // size, device, which arguments share a storage (Dynamo's guards do not cover offsets or
  // storage sharing), and the same values for plain numbers.
  bool matches(const py::list& args) const {
    if (args.size() != signature_.size()) return false;
    groups_.clear();
    for (size_t i = 0; i < signature_.size(); ++i) {
      const Arg& want = signature_[i];
      PyObject* a = args[i].ptr();
      if (want.kind != Arg::kTensor) {
        Arg got;
        if (!describe(a, got) || got.kind != want.kind || got.number != want.number) return false;
        continue;
      }
      if (!THPVariable_Check(a)) return false;
      const at::Tensor& t = THPVariable_Unpack(a);
      if (t.device().type() != c10::DeviceType::PrivateUse1 || t.device().index() != want.device ||
          t.scalar_type() != want.dtype || t.storage_offset() != want.offset || t.sizes() != want.sizes ||
          t.strides() != want.strides || t.storage().nbytes() != want.nbytes)
        return false;
      if (groupOf(t.storage().data_ptr().get()) != want.group) return false;
    }
    return true;
  }

  // The graph's outputs; None when `args` do not match the capture; False when they match
  // but the launch cannot run now (a donated buffer is shared): then the call is traced.
  py::object run(py::list args) const {
    if (!matches(args)) return py::none();
    std::vector<at::Tensor> inputs(params_.size()), targets(results_.size());
    for (size_t p = 0; p < params_.size(); ++p)
      if (params_[p] >= 0) inputs[p] = THPVariable_Unpack(args[params_[p]].ptr());
    for (size_t r = 0; r < results_.size(); ++r)
      if (results_[r] >= 0) targets[r] = THPVariable_Unpack(args[results_[r]].ptr());
    std::vector<at::Tensor> raw;
    try {
      raw = launchCapturedGraph(*graph_, inputs, targets);
    } catch (const std::exception&) {  // e.g. a donated buffer is shared now
      return py::bool_(false);
    }
    py::list outs(outputs_.size());
    std::vector<const at::Tensor*> firstOnResult(raw.size(), nullptr);
    std::vector<at::Tensor> made(outputs_.size());
    for (size_t k = 0; k < outputs_.size(); ++k) {
      const Output& o = outputs_[k];
      if (o.kind == Output::kValue) {
        outs[k] = o.value;
        continue;
      }
      if (o.kind == Output::kSame) {
        outs[k] = args[o.index];
        continue;
      }
      if (o.kind == Output::kEmpty) {
        auto options = at::TensorOptions().dtype(o.dtype).device(c10::DeviceType::PrivateUse1, o.index);
        at::Tensor t = at::empty_strided(o.sizes, o.strides, options);
        outs[k] = py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(t)));
        continue;
      }
      const at::Tensor& from = o.kind == Output::kNew ? raw[o.index] : THPVariable_Unpack(args[o.index].ptr());
      // A tensor on the existing storage, as set_ would leave it, without first
      // allocating (and freeing) an empty storage for every output.
      at::Tensor t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(from.storage()),
                                                              c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                              c10::scalarTypeToTypeMeta(o.dtype));
      t.unsafeGetTensorImpl()->set_sizes_and_strides(o.sizes, o.strides, o.offset);
      // Tensors on one storage share a version counter, as the traced graph's views do, so a later
      // in-place write to one is seen by autograd through any other (saved for backward).
      const at::Tensor* sibling = o.kind == Output::kArg ? &from : firstOnResult[o.index];
      if (sibling != nullptr) t.unsafeGetTensorImpl()->set_version_counter(sibling->unsafeGetTensorImpl()->version_counter());
      made[k] = t;
      if (o.kind == Output::kNew && firstOnResult[o.index] == nullptr) firstOnResult[o.index] = &made[k];
      outs[k] = py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(t)));
    }
    PyList_SetSlice(args.ptr(), 0, PyList_GET_SIZE(args.ptr()), nullptr);  // boxed convention: inputs released
    return outs;
  }

  // The signature check alone (tests, and Plans deciding whether to capture).
  static bool replayable(const py::list& args) {
    Arg sig;
    for (const py::handle& a : args)
      if (!describe(a.ptr(), sig)) return false;
    return true;
  }

 private:
  struct Arg {
    enum Kind { kTensor, kInt, kFloat, kBool } kind = kTensor;
    double number = 0;  // plain numbers: a symbolic size's value, traced in as a constant
    c10::ScalarType dtype = at::kFloat;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
    size_t nbytes = 0;
    int device = 0;
    int group = 0;
  };

  static bool describe(PyObject* a, Arg& out) {
    if (PyBool_Check(a)) {
      out.kind = Arg::kBool;
      out.number = a == Py_True;
      return true;
    }
    if (PyLong_Check(a)) {
      int overflow = 0;
      long long v = PyLong_AsLongLongAndOverflow(a, &overflow);
      if (overflow) return false;
      out.kind = Arg::kInt;
      out.number = static_cast<double>(v);
      return static_cast<long long>(out.number) == v;  // exact in a double
    }
    if (PyFloat_Check(a)) {
      out.kind = Arg::kFloat;
      out.number = PyFloat_AS_DOUBLE(a);
      return out.number == out.number;  // NaN never compares equal
    }
    if (!THPVariable_Check(a)) return false;
    const at::Tensor& t = THPVariable_Unpack(a);
    if (t.device().type() != c10::DeviceType::PrivateUse1) return false;  // CPU tensors can become operands
    out.kind = Arg::kTensor;
    out.dtype = t.scalar_type();
    out.sizes = t.sizes().vec();
    out.strides = t.strides().vec();
    out.offset = t.storage_offset();
    out.nbytes = t.storage().nbytes();
    out.device = t.device().index();
    return true;
  }
  bool describe(const py::handle& a, Arg& out) {
    if (!describe(a.ptr(), out)) return false;
    if (out.kind == Arg::kTensor) out.group = groupOf(THPVariable_Unpack(a.ptr()).storage().data_ptr().get());
    return true;
  }

  // Arguments sharing a storage get the same group number, in first-seen order.
  int groupOf(const void* storage) const {
    for (size_t g = 0; g < groups_.size(); ++g)
      if (groups_[g] == storage) return static_cast<int>(g);
    groups_.push_back(storage);
    return static_cast<int>(groups_.size() - 1);
  }

  std::shared_ptr<runtime::CapturedGraph> graph_;
  std::vector<Arg> signature_;
  std::vector<int> params_, results_;
  std::vector<Output> outputs_;
  mutable std::vector<const void*> groups_;  // scratch for matches(); calls hold the GIL
};

}  // namespace

void registerCompileBindings(py::module& m) {
  using runtime::CapturedGraph;
  py::class_<CapturedGraph, std::shared_ptr<CapturedGraph>>(m, "_CapturedGraph")
      .def(py::init<>())
      .def_readonly("complete", &CapturedGraph::complete)
      .def_readonly("zero_read_storages", &CapturedGraph::zeroRead)
      .def_readonly("device", &CapturedGraph::device)
      .def_readwrite("constant_operands", &CapturedGraph::constantOperands)
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
      })
      // What the launch depends on: the program, each parameter's source (storage, operand value,
      // index flag, donation) and each result's storage. Two captures of the same code with equal
      // fingerprints replay alike; an operand that differs between them (a host value the code
      // computed from data) would be baked into a replay (torch_tpu/vllm/step_graph.py).
      .def_property_readonly("fingerprint", [](const CapturedGraph& g) {
        py::list params;
        for (const auto& p : g.params) {
          bool drawn = p.operand.rngWords != 0;  // drawn again at every launch
          params.append(py::make_tuple(p.storage, p.indexFlag, p.donated, static_cast<int>(p.operand.dtype),
                                       p.operand.count, drawn ? 0.0 : p.operand.f[0], drawn ? 0.0 : p.operand.f[1],
                                       drawn ? 0 : p.operand.i[0], drawn ? 0 : p.operand.i[1], p.operand.rngWords));
        }
        py::list results;
        for (const auto& r : g.results) results.append(py::make_tuple(r.storage, r.nbytes));
        return py::make_tuple(reinterpret_cast<uintptr_t>(g.exe.get()), py::tuple(params), py::tuple(results));
      });
  // outputs: per graph output ("new", result, (dtype, sizes, strides, offset)) |
  // ("arg", argument, (...)) | ("empty", device index, (...)) | ("same", argument) | ("value", v); see replay.py.
  py::class_<ReplayPlan>(m, "_ReplayPlan")
      .def(py::init([](std::shared_ptr<CapturedGraph> g, const py::list& args, std::vector<int> params,
                       std::vector<int> results, const py::list& outputs) {
        std::vector<ReplayPlan::Output> outs;
        for (const py::handle& h : outputs) {
          py::tuple o = py::reinterpret_borrow<py::tuple>(h);
          ReplayPlan::Output out;
          std::string kind = o[0].cast<std::string>();
          if (kind == "value") {
            out.value = py::reinterpret_borrow<py::object>(o[1]);
          } else if (kind == "same") {
            out.kind = ReplayPlan::Output::kSame;
            out.index = o[1].cast<int>();
          } else {
            out.kind = kind == "new"     ? ReplayPlan::Output::kNew
                       : kind == "empty" ? ReplayPlan::Output::kEmpty
                                         : ReplayPlan::Output::kArg;
            out.index = o[1].cast<int>();
            py::tuple meta = o[2].cast<py::tuple>();
            if (!THPDtype_Check(meta[0].ptr())) throw std::invalid_argument("torch_tpu: replay plan: expected a dtype");
            out.dtype = reinterpret_cast<THPDtype*>(meta[0].ptr())->scalar_type;
            out.sizes = meta[1].cast<std::vector<int64_t>>();
            out.strides = meta[2].cast<std::vector<int64_t>>();
            out.offset = meta[3].cast<int64_t>();
          }
          outs.push_back(std::move(out));
        }
        return ReplayPlan(std::move(g), args, std::move(params), std::move(results), std::move(outs));
      }))
      .def("matches", &ReplayPlan::matches)
      .def("run", &ReplayPlan::run)
      .def_static("replayable", &ReplayPlan::replayable);
  // Inside a compiled-graph scope (after _compiled_graph_begin): its final flush fills `g`.
  m.def("_compiled_graph_capture", [](std::shared_ptr<CapturedGraph> g) {
    runtime::Executor::get().captureCompiledGraph(std::move(g));
  });
}
