// Tributary Statuses as Python exceptions: tributary.Error (a RuntimeError) and one subclass
// per StatusCode (PeerLost, TimedOut, Mismatch, Evicted, ...), each carrying the Status text
// as its message and the code's name as its `code` attribute. TimedOut is also a Python
// TimeoutError; InvalidArgument and Mismatch are also ValueErrors.
//
// Binding code throws StatusError (C++); the translator registered by bind_errors() turns it
// into the matching Python class when it crosses into Python.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <string>

#include "core/status.h"

namespace tributary::python {

class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)), text_(status_.to_string()) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return text_.c_str(); }

 private:
  Status status_;
  std::string text_;
};

[[noreturn]] inline void throw_status(const Status& status) { throw StatusError(status); }

template <typename T>
T value_or_throw(Result<T> result) {
  if (!result) throw_status(result.status());
  return std::move(result).value();
}

inline void ok_or_throw(const Status& status) {
  if (!status) throw_status(status);
}

// Creates the exception classes on `m` and registers the translator.
void bind_errors(pybind11::module_& m);

// The StatusCode of a Python exception of one of these classes (kInternal for any other),
// so that C++ code calling back into Python can pass an eviction on as an eviction.
StatusCode status_code_of(const pybind11::error_already_set& e);

}  // namespace tributary::python
