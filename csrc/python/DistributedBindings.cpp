// torch_tpu._C._distributed: the tpu_dist c10d backend class (csrc/distributed).
//
// The class derives from c10d::Backend, whose pybind type torch registers when torch.distributed
// is imported (torch._C._c10d_init); the binding is therefore made on demand by
// torch_tpu.distributed (`_C._init_distributed()`), never inside `import torch`.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "csrc/distributed/Fingerprint.h"
#include "csrc/distributed/TpuBackend.h"

namespace py = pybind11;
using tpu::distributed::TpuBackend;

void registerDistributedBindings(py::module& m) {
  m.def("_init_distributed", [m]() mutable -> py::object {
    if (py::hasattr(m, "_distributed")) return py::object(m.attr("_distributed"));
    py::module::import("torch.distributed");  // registers c10d::Backend's pybind type
    auto d = m.def_submodule("_distributed", "tpu_dist c10d backend");
    py::class_<TpuBackend, c10d::Backend, c10::intrusive_ptr<TpuBackend>>(d, "TpuBackend")
        .def(py::init([](int rank, int size, const c10::intrusive_ptr<c10d::Backend>& host,
                         std::chrono::milliseconds timeout, const std::string& groupName, bool check) {
               TpuBackend::Config config;
               config.timeout = timeout;
               config.groupName = groupName;
               config.checkCollectives = check;
               return c10::make_intrusive<TpuBackend>(rank, size, host, std::move(config));
             }),
             py::arg("rank"), py::arg("size"), py::arg("host"), py::arg("timeout"), py::arg("group_name"),
             py::arg("check_collectives") = true, py::call_guard<py::gil_scoped_release>())
        .def_property_readonly("transport", &TpuBackend::transportName)
        .def_property("check_collectives", &TpuBackend::checksCollectives, &TpuBackend::setCheckCollectives)
        .def_property_readonly("collective_count", &TpuBackend::collectiveCount);
    d.attr("FINGERPRINT_WORDS") = tpu::distributed::Fingerprint::kWords;  // ranks agree on it at group creation
    return py::object(d);
  });
}
