// tributary._tributary: the C++ half of the Python package (python/tributary/). The
// Python half checks arrays and tensors, picks defaults and waits; this half runs the agent.
#include <pybind11/pybind11.h>

#include "python/py_elastic.h"
#include "python/py_worker.h"
#include "python/status_error.h"

PYBIND11_MODULE(_tributary, m) {
  m.doc() = "Tributary's agent runtime for Python (use the tributary package, not this module)";
  tributary::python::bind_errors(m);
  tributary::python::bind_worker(m);
  tributary::python::bind_elastic(m);
}
