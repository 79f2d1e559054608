#include "python/status_error.h"

#include <array>
#include <string>

namespace tributary::python {
namespace py = pybind11;

namespace {

struct ErrorClass {
  StatusCode code;
  const char* name;
  PyObject* also;  // a builtin it also derives from, or nullptr
};

// The classes, by code; created once per process and never destroyed (they live as long as
// the module, which Python does not unload).
std::array<PyObject*, 13> g_classes{};

}  // namespace

void bind_errors(py::module_& m) {
  PyObject* base = PyErr_NewExceptionWithDoc(
      "tributary._tributary.Error",
      "A Tributary operation failed; the message is the Status text, `code` its name.",
      PyExc_RuntimeError, nullptr);
  m.add_object("Error", py::handle(base));
  const ErrorClass classes[] = {
      {StatusCode::kPeerLost, "PeerLost", nullptr},
      {StatusCode::kTimedOut, "TimedOut", PyExc_TimeoutError},
      {StatusCode::kAborted, "Aborted", nullptr},
      {StatusCode::kStaleEpoch, "StaleEpoch", nullptr},
      {StatusCode::kBadFrame, "BadFrame", nullptr},
      {StatusCode::kMismatch, "Mismatch", PyExc_ValueError},
      {StatusCode::kInvalidArgument, "InvalidArgument", PyExc_ValueError},
      {StatusCode::kAuthFailed, "AuthFailed", nullptr},
      {StatusCode::kUnavailable, "Unavailable", nullptr},
      {StatusCode::kEvicted, "Evicted", nullptr},
      {StatusCode::kInternal, "Internal", nullptr},
      {StatusCode::kRoundFailed, "RoundFailed", nullptr},
  };
  g_classes.fill(base);
  for (const ErrorClass& c : classes) {
    const std::string qualified = std::string("tributary._tributary.") + c.name;
    // Both arms as py::tuple: pybind11 3 (torch's) types make_tuple by its arguments.
    py::tuple bases = c.also ? py::tuple(py::make_tuple(py::handle(base), py::handle(c.also)))
                             : py::tuple(py::make_tuple(py::handle(base)));
    PyObject* cls = PyErr_NewException(qualified.c_str(), bases.ptr(), /*dict=*/nullptr);
    if (cls == nullptr) throw py::error_already_set();
    g_classes.at(static_cast<std::size_t>(c.code)) = cls;
    m.add_object(c.name, py::handle(cls));
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      PyObject* cls = g_classes.at(static_cast<std::size_t>(e.status().code()));
      py::object instance =
          py::reinterpret_steal<py::object>(PyObject_CallFunction(cls, "s", e.what()));
      if (!instance) throw py::error_already_set();
      instance.attr("code") = std::string(to_string(e.status().code()));
      PyErr_SetObject(cls, instance.ptr());
    }
  });
}

StatusCode status_code_of(const py::error_already_set& e) {
  // Most derived first: every class also matches the base Error.
  for (std::size_t code = g_classes.size(); code-- > 1;) {
    if (g_classes[code] != nullptr && e.matches(py::handle(g_classes[code]))) {
      return static_cast<StatusCode>(code);
    }
  }
  return StatusCode::kInternal;
}

}  // namespace tributary::python
