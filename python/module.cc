// tributary._tributary: the C++ half of the Python package (python/tributary/). The
// Python half checks arrays and tensors, picks defaults and waits; this half runs the agent.
#include <pybind11/pybind11.h>

#include "python/cluster_setup.h"
#include "python/py_elastic.h"
#include "python/py_worker.h"
#include "python/status_error.h"

PYBIND11_MODULE(_tributary, m) {
  m.doc() = "Tributary's agent runtime for Python (use the tributary package, not this module)";
  tributary::python::bind_errors(m);
  tributary::python::bind_worker(m);
  tributary::python::bind_elastic(m);

  // A coordinator inside this process (tributary/torch/torchrun.py hosts the run's in a
  // process of its own); it stops when the object is closed or collected.
  namespace py = pybind11;
  using tributary::python::EmbeddedCoordinator;
  py::class_<EmbeddedCoordinator>(m, "EmbeddedCoordinator")
      .def(py::init([](const std::string& bind, const std::string& secret, int world_size,
                       bool serve_jobs) {
             auto c = tributary::Result<std::unique_ptr<EmbeddedCoordinator>>(
                 tributary::error(tributary::StatusCode::kInternal, "not started"));
             {
               py::gil_scoped_release release;
               c = EmbeddedCoordinator::start(bind, secret, world_size, serve_jobs);
             }
             return tributary::python::value_or_throw(std::move(c));
           }),
           py::arg("bind"), py::arg("secret"), py::arg("world_size"),
           py::arg("serve_jobs") = false)
      .def_property_readonly("endpoint", &EmbeddedCoordinator::endpoint)
      .def_property_readonly("member_count", &EmbeddedCoordinator::member_count);
}
