#include "python/py_elastic.h"

#include <chrono>
#include <memory>
#include <optional>

#include "agent/drain_on_sigterm.h"
#include "agent/elastic_loop.h"
#include "python/py_worker.h"
#include "python/status_error.h"

namespace tributary::python {
namespace py = pybind11;

namespace {

Duration seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

agent::StepResult step_result(const py::object& value) {
  const std::string word = py::str(value);
  if (word == "continue") return agent::StepResult::kContinue;
  if (word == "finished") return agent::StepResult::kFinished;
  if (word == "drain") return agent::StepResult::kDrain;
  throw_status(error(StatusCode::kInvalidArgument,
                     "step() returned \"" + word + "\"; expected continue, finished or drain"));
}

// One run() of the loop: the Python callbacks, the borrowed worker, the first error a
// callback raised.
class PythonWorkload {
 public:
  PythonWorkload(agent::WorkerConfig config, py::function register_state, py::function step,
                 py::function position, double queue_timeout_s)
      : config_(std::move(config)),
        register_state_(std::move(register_state)),
        step_(std::move(step)),
        position_(std::move(position)),
        queue_timeout_s_(queue_timeout_s) {}

  agent::ElasticWorkload workload() {
    agent::ElasticWorkload w;
    w.start_worker = [this] { return agent::Worker::start(config_); };
    w.register_state = [this](agent::Worker& worker) { on_join(worker); };
    w.step = [this](agent::Worker& worker, const agent::BoundaryOutcome& b) {
      return on_step(worker, b);
    };
    w.position = [this]() -> std::int64_t {
      py::gil_scoped_acquire gil;
      try {
        return position_().cast<std::int64_t>();
      } catch (const py::error_already_set&) {
        return -1;  // only a log line's step number; the step callback reports errors
      }
    };
    return w;
  }

  // After run(): drops the borrowed worker; re-raises a callback's exception.
  void finish() {
    if (current_) current_->detach();
    current_.reset();
    if (failure_) {
      failure_->restore();
      failure_.reset();
      throw py::error_already_set();
    }
  }

 private:
  void on_join(agent::Worker& worker) {
    py::gil_scoped_acquire gil;
    if (current_) current_->detach();
    current_ = PyWorker::borrow(worker);
    if (failure_) return;
    try {
      register_state_(current_);
    } catch (py::error_already_set& e) {
      failure_.emplace(std::move(e));
    }
  }

  Result<agent::StepResult> on_step(agent::Worker&, const agent::BoundaryOutcome& boundary) {
    py::gil_scoped_acquire gil;
    if (failure_) return error(StatusCode::kInternal, "register_state() raised");
    Result<agent::StepResult> result = error(StatusCode::kInternal, "step() did not return");
    try {
      result = step_result(step_(current_, boundary));
    } catch (py::error_already_set& e) {
      const StatusCode code = status_code_of(e);
      if (code == StatusCode::kEvicted) {
        result = error(code, e.what());
      } else {
        result = error(StatusCode::kInternal, "step() raised");
        failure_.emplace(std::move(e));
      }
    } catch (const StatusError& e) {
      result = e.status();
    }
    // The loop uses the Worker next: nothing may still be queued on it.
    try {
      current_->wait_idle(queue_timeout_s_);
    } catch (const StatusError& e) {
      return e.status();
    }
    return result;
  }

  agent::WorkerConfig config_;
  py::function register_state_;
  py::function step_;
  py::function position_;
  double queue_timeout_s_;
  std::shared_ptr<PyWorker> current_;
  std::optional<py::error_already_set> failure_;
};

class PyElasticLoop {
 public:
  explicit PyElasticLoop(agent::ElasticConfig config) : loop_(config, Logger("elastic")) {}

  agent::ElasticReport run(const agent::WorkerConfig& config, py::function register_state,
                           py::function step, py::function position, double queue_timeout_s) {
    PythonWorkload workload(config, std::move(register_state), std::move(step), std::move(position),
                            queue_timeout_s);
    Result<agent::ElasticReport> report = error(StatusCode::kInternal, "not run");
    {
      const agent::DrainOnSigterm drain_on_sigterm(loop_);
      py::gil_scoped_release release;
      report = loop_.run(workload.workload());
    }
    workload.finish();
    return value_or_throw(std::move(report));
  }

  void request_drain() { loop_.request_drain(); }
  bool drain_requested() const { return loop_.drain_requested(); }

 private:
  agent::ElasticLoop loop_;
};

}  // namespace

void bind_elastic(py::module_& m) {
  py::class_<agent::ElasticReport>(m, "ElasticReport", "How an elastic run ended.")
      .def_readonly("drained", &agent::ElasticReport::drained)
      .def_readonly("left", &agent::ElasticReport::left)
      .def_readonly("joins", &agent::ElasticReport::joins)
      .def_readonly("evictions", &agent::ElasticReport::evictions)
      .def_readonly("world_size", &agent::ElasticReport::world_size)
      .def_readonly("rank", &agent::ElasticReport::rank)
      .def_readonly("epoch", &agent::ElasticReport::epoch);
  py::class_<PyElasticLoop>(m, "ElasticLoop", "The agent's elastic loop (see py_elastic.h).")
      .def(py::init([](double rejoin_delay, double retry_delay, double retry_for,
                       bool retry_first_join) {
             agent::ElasticConfig c;
             c.rejoin_delay = seconds(rejoin_delay);
             c.retry_delay = seconds(retry_delay);
             c.retry_for = seconds(retry_for);
             c.retry_first_join = retry_first_join;
             return std::make_unique<PyElasticLoop>(c);
           }),
           py::arg("rejoin_delay") = 1.5, py::arg("retry_delay") = 1.5,
           py::arg("retry_for") = 120.0, py::arg("retry_first_join") = false)
      .def("run", &PyElasticLoop::run, py::arg("config"), py::arg("register_state"),
           py::arg("step"), py::arg("position"), py::arg("queue_timeout"))
      .def("request_drain", &PyElasticLoop::request_drain)
      .def_property_readonly("drain_requested", &PyElasticLoop::drain_requested);
}

}  // namespace tributary::python
