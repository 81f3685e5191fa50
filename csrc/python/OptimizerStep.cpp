// Strict mode runs a torch.optim step as one program: an op group (Executor::beginOpGroup) from the step's
// pre-hook to its post-hook (torch_tpu/optim.py decides which steps qualify). AdamW's eight foreach ops were eight
// launches a step; as one group they are one, replayed without tracing from the second step on.
//
// The post-hooks do not run when the step raises. torch wraps every step (with its hooks) in a
// record_function("Optimizer.step#<class>.step") scope, whose end runs either way: a RecordFunction callback
// on that scope ends a group the post-hook did not (what was traced still runs, as in asOneProgram).
#include <pybind11/pybind11.h>  // Python.h first
#include <ATen/record_function.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstring>
#include <vector>

#include "csrc/runtime/ExecutionMode.h"
#include "csrc/runtime/Executor.h"

namespace py = pybind11;

namespace tpu::python {
namespace {

constexpr const char kStepScope[] = "Optimizer.step#";

// One entry per optimizer step scope open on this thread (nested: a wrapper optimizer stepping its inner
// one): whether that step opened the op group.
thread_local std::vector<bool> tSteps;

bool isStepScope(const at::RecordFunction& fn) {
  return std::strncmp(fn.name(), kStepScope, sizeof(kStepScope) - 1) == 0;
}

std::unique_ptr<at::ObserverContext> onScopeStart(const at::RecordFunction& fn) {
  if (isStepScope(fn)) tSteps.push_back(false);
  return nullptr;
}

void onScopeEnd(const at::RecordFunction& fn, at::ObserverContext*) {
  if (!isStepScope(fn) || tSteps.empty()) return;
  bool open = tSteps.back();
  tSteps.pop_back();
  if (!open) return;
  try {  // the step raised before its post-hook: its exception is on its way, this one would hide it
    runtime::Executor::get().endOpGroup();
  } catch (...) {
  }
}

// Every parameter of `paramGroups` (torch.optim's list of dicts) is a plain dense tpu tensor with a dense
// gradient or none, and there is one: a tensor subclass (DTensor) may talk to other processes inside its
// ops, and a sparse gradient's ops do not trace. Checked in C++: a Python loop cost 0.64 us a parameter on
// every step.
bool plainTpuParameters(py::handle paramGroups) {
  static PyObject* parameterType = py::object(py::module_::import("torch.nn").attr("Parameter")).release().ptr();
  bool seen = false;
  for (py::handle group : paramGroups) {
    for (py::handle param : group["params"]) {
      PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(param.ptr()));
      if (type != THPVariableClass && type != parameterType) return false;
      const at::Tensor& p = THPVariable_Unpack(param.ptr());
      if (p.device().type() != c10::DeviceType::PrivateUse1 || p.layout() != at::kStrided) return false;
      const at::Tensor& grad = p.grad();
      if (grad.defined() && grad.layout() != at::kStrided) return false;
      seen = true;
    }
  }
  return seen;
}

// From the step's pre-hook: opens the group when this thread is inside a step scope that has none yet, in
// Strict mode, with no group open (an outer step's group already holds an inner step) and plain parameters.
// True when it did.
bool beginStep(py::handle paramGroups) {
  if (tSteps.empty() || tSteps.back() || runtime::eagerMode() != runtime::EagerMode::Strict) return false;
  if (!plainTpuParameters(paramGroups)) return false;
  bool opened;
  {
    py::gil_scoped_release noGil;  // another thread's step holding the group needs the GIL to end it
    opened = runtime::Executor::get().beginOpGroup(/*waitForOtherThread=*/true);
  }
  if (!opened) return false;
  tSteps.back() = true;
  return true;
}

// From the step's post-hook: runs the group (its errors raise here, naming the step's ops).
void endStep() {
  if (tSteps.empty() || !tSteps.back()) return;
  tSteps.back() = false;
  runtime::Executor::get().endOpGroup();
}

}  // namespace

void initOptimizerStep(py::module& m) {
  // User scopes only: torch's ops (RecordScope::FUNCTION) keep their callback-free dispatch.
  at::addGlobalCallback(
      at::RecordFunctionCallback(onScopeStart, onScopeEnd).scopes({at::RecordScope::USER_SCOPE}).needsInputs(false));
  m.def("_optimizer_step_begin", &beginStep, py::arg("param_groups"));
  m.def("_optimizer_step_end", &endStep);
}

}  // namespace tpu::python
