// Eager-mode selection from Python and the torch side of the runtime's error
// hooks (csrc/runtime/ExecutionMode.h): c10 exceptions (IndexError, ...),
// TORCH_WARN, the op being dispatched (a RecordFunction callback installed
// only in debug mode) and the user's Python file:line (frames walked only
// when an error is raised).
#include <pybind11/pybind11.h>  // Python.h first
#include <pybind11/stl.h>
#include <frameobject.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "csrc/runtime/ExecutionMode.h"
#include "csrc/runtime/Executor.h"

namespace py = pybind11;

namespace tpu::python {
namespace {

using runtime::EagerMode;
using runtime::ErrorKind;

// ---- the op being dispatched (debug mode only) -----------------------------------

thread_local std::vector<std::string> tOpStack;

std::unique_ptr<at::ObserverContext> onOpStart(const at::RecordFunction& fn) {
  std::optional<c10::OperatorName> op = fn.operator_name();
  if (op) {
    std::string name = op->name;
    if (!op->overload_name.empty()) name += "." + op->overload_name;
    tOpStack.push_back(std::move(name));
  } else {
    tOpStack.emplace_back(fn.name());
  }
  return nullptr;
}

void onOpEnd(const at::RecordFunction&, at::ObserverContext*) {
  if (!tOpStack.empty()) tOpStack.pop_back();
}

std::mutex gCallbackMutex;
std::optional<at::CallbackHandle> gCallback;

void observeOps(bool on) {
  std::lock_guard<std::mutex> lock(gCallbackMutex);
  if (on && !gCallback) {
    gCallback = at::addGlobalCallback(
        at::RecordFunctionCallback(onOpStart, onOpEnd).scopes({at::RecordScope::FUNCTION}).needsInputs(false));
  } else if (!on && gCallback) {
    at::removeCallback(*gCallback);
    gCallback.reset();
    tOpStack.clear();
  }
}

std::string currentOp() { return tOpStack.empty() ? std::string() : tOpStack.back(); }

// ---- the user's Python line ------------------------------------------------------

std::vector<std::string> gInternalDirs;  // torch/ and torch_tpu/ package dirs

bool internal(const std::string& file) {
  for (const std::string& dir : gInternalDirs)
    if (file.compare(0, dir.size(), dir) == 0) return true;
  return false;
}

// The innermost frame outside torch and torch_tpu on this thread, as
// "file:line"; "" when the thread runs no Python (autograd's device threads).
std::string userLocation() {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return "";
  py::gil_scoped_acquire gil;
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  std::string where;
  while (frame && where.empty()) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    PyObject* fileObj = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_filename");
    const char* file = fileObj ? PyUnicode_AsUTF8(fileObj) : nullptr;
    if (file && !internal(file) && file[0] != '<') where = std::string(file) + ":" + std::to_string(PyFrame_GetLineNumber(frame));
    Py_XDECREF(fileObj);
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyErr_Clear();
  return where;
}

// ---- errors and warnings ----------------------------------------------------------

void raise(ErrorKind kind, const std::string& msg) {
  switch (kind) {
    case ErrorKind::Index: TORCH_CHECK_INDEX(false, msg);
    case ErrorKind::OutOfMemory: TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
    case ErrorKind::Runtime: break;
  }
  TORCH_CHECK(false, msg);
}

void warn(const std::string& msg) { TORCH_WARN(msg); }

void setMode(const std::string& name) {
  std::optional<EagerMode> m = runtime::parseEagerMode(name);
  if (!m) {
    throw py::value_error("torch_tpu: unknown eager mode '" + name + "'; available modes: " +
                          runtime::availableEagerModes());
  }
  observeOps(*m == EagerMode::Debug);
  runtime::Executor::get().setFused(*m == EagerMode::Fused);  // flushes a pending graph
  runtime::setEagerMode(*m);
}

}  // namespace

void initEagerModes(py::module& m) {
  runtime::ErrorHooks hooks;
  hooks.raise = raise;
  hooks.warn = warn;
  hooks.currentOp = currentOp;
  hooks.userLocation = userLocation;
  runtime::setErrorHooks(hooks);

  m.def("_set_eager_mode", &setMode);
  m.def("_get_eager_mode", [] { return std::string(runtime::eagerModeName(runtime::eagerMode())); });
  m.def("_available_eager_modes", [] {
    return std::vector<std::string>{runtime::eagerModeName(EagerMode::Strict),
                                    runtime::eagerModeName(EagerMode::Debug),
                                    runtime::eagerModeName(EagerMode::Fused)};
  });
  // Package directories whose frames are not "the user's line".
  m.def("_set_internal_dirs", [](std::vector<std::string> dirs) { gInternalDirs = std::move(dirs); });
  m.def("_user_location", &userLocation);  // for tests
}

}  // namespace tpu::python
