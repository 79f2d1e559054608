// tributary._tributary's Worker surface: configuration, the collectives (each returns a
// Ticket at once; tributary/worker.py waits for the synchronous forms), step boundaries,
// state registration, drain and leave. Buffers arrive as (address, count) pairs that
// tributary/_arrays.py extracted and checked from NumPy arrays or torch tensors, with the
// objects that own them (`keep`); dtype and op arrive as names.
#include <pybind11/stl.h>

#include <algorithm>
#include <sstream>

#include "algorithms/collectives.h"
#include "python/py_worker.h"
#include "python/status_error.h"

namespace tributary::python {
namespace py = pybind11;

namespace {

DType dtype_named(const std::string& name) {
  auto d = parse_dtype(name);
  if (!d) throw_status(error(StatusCode::kInvalidArgument, "unsupported dtype \"" + name + "\""));
  return *d;
}

ReduceOp op_named(const std::string& name) {
  auto op = parse_reduce_op(name);
  if (!op) {
    throw_status(error(StatusCode::kInvalidArgument,
                       "unsupported reduction \"" + name + "\" (sum, prod, min, max, avg)"));
  }
  return *op;
}

void* at(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

// A millisecond property over a std::chrono::milliseconds member of WorkerConfig.
template <typename Class>
void milliseconds_property(Class& cls, const char* name,
                           std::chrono::milliseconds agent::WorkerConfig::*member) {
  cls.def_property(
      name, [member](const agent::WorkerConfig& c) { return (c.*member).count(); },
      [member](agent::WorkerConfig& c, std::int64_t ms) {
        if (ms <= 0) throw_status(error(StatusCode::kInvalidArgument, "must be > 0 ms"));
        c.*member = std::chrono::milliseconds(ms);
      });
}

void bind_config(py::module_& m) {
  py::class_<agent::WorkerConfig> cls(m, "WorkerConfig");
  cls.def(py::init<>())
      .def_readwrite("coordinator", &agent::WorkerConfig::coordinator)
      .def_readwrite("secret", &agent::WorkerConfig::secret)
      .def_readwrite("host", &agent::WorkerConfig::host)
      .def_readwrite("zone", &agent::WorkerConfig::zone)
      .def_readwrite("bind_host", &agent::WorkerConfig::bind_host)
      .def_readwrite("data_port", &agent::WorkerConfig::data_port)
      .def_readwrite("advertise_host", &agent::WorkerConfig::advertise_host)
      .def_readwrite("transport", &agent::WorkerConfig::transport)
      .def_readwrite("data_addresses", &agent::WorkerConfig::data_addresses)
      .def_readwrite("chunk_bytes", &agent::WorkerConfig::chunk_bytes)
      .def_readwrite("metrics_bind", &agent::WorkerConfig::metrics_bind)
      .def_readwrite("deadline_slack", &agent::WorkerConfig::deadline_slack)
      .def_readwrite("min_world_size", &agent::WorkerConfig::min_world_size)
      .def_readwrite("agreement", &agent::WorkerConfig::agreement)
      .def_readwrite("speculative_max_bytes", &agent::WorkerConfig::speculative_max_bytes)
      .def_readwrite("codec", &agent::WorkerConfig::codec)
      .def_readwrite("codec_seed", &agent::WorkerConfig::codec_seed)
      .def_readwrite("wan_codec", &agent::WorkerConfig::wan_codec)
      .def_readwrite("wan_bandwidth_bps", &agent::WorkerConfig::wan_bandwidth_bps)
      .def_property(
          "algorithm",
          [](const agent::WorkerConfig& c) {
            return std::string(algorithms::to_string(c.algorithm));
          },
          [](agent::WorkerConfig& c, const std::string& name) {
            if (!algorithms::parse_all_reduce_algorithm(name, &c.algorithm)) {
              throw_status(error(StatusCode::kInvalidArgument,
                                 "unknown all-reduce algorithm \"" + name + "\""));
            }
          });
  // TLS on data-plane links (docs/security.md): "off", "cross-zone" or "all", and the
  // optional certificate files (all three or none: the endpoint checks them at start).
  cls.def_property(
      "tls", [](const agent::WorkerConfig& c) { return std::string(tls_mode_name(c.tls.mode)); },
      [](agent::WorkerConfig& c, const std::string& name) {
        auto mode = transport::parse_tls_mode(name);
        if (!mode) throw_status(mode.status());
        c.tls.mode = *mode;
      });
  cls.def_property(
      "tls_cert", [](const agent::WorkerConfig& c) { return c.tls.cert_file; },
      [](agent::WorkerConfig& c, const std::string& f) { c.tls.cert_file = f; });
  cls.def_property(
      "tls_key", [](const agent::WorkerConfig& c) { return c.tls.key_file; },
      [](agent::WorkerConfig& c, const std::string& f) { c.tls.key_file = f; });
  cls.def_property(
      "tls_ca", [](const agent::WorkerConfig& c) { return c.tls.ca_file; },
      [](agent::WorkerConfig& c, const std::string& f) { c.tls.ca_file = f; });
  // Standby paths (docs/transports.md, "Runtime fallback in the agent"): "auto" (where there
  // is a second data address or an RDMA device, and the group is not on shared memory),
  // "on" or "off".
  cls.def_property(
      "failover",
      [](const agent::WorkerConfig& c) { return std::string(transport::to_string(c.failover)); },
      [](agent::WorkerConfig& c, const std::string& name) {
        auto choice = transport::parse_path_choice(name);
        if (!choice) {
          throw_status(error(StatusCode::kInvalidArgument,
                             "failover must be auto, on or off, not \"" + name + "\""));
        }
        c.failover = *choice;
      });
  milliseconds_property(cls, "stall_timeout_ms", &agent::WorkerConfig::stall_timeout);
  milliseconds_property(cls, "join_timeout_ms", &agent::WorkerConfig::join_timeout);
  milliseconds_property(cls, "collective_timeout_ms", &agent::WorkerConfig::collective_timeout);
  milliseconds_property(cls, "deadline_floor_ms", &agent::WorkerConfig::deadline_floor);
  milliseconds_property(cls, "recovery_timeout_ms", &agent::WorkerConfig::recovery_timeout);
}

void bind_outcomes(py::module_& m) {
  py::class_<agent::Outcome>(m, "Outcome", "What a collective reports besides its data.")
      .def_readonly("epoch", &agent::Outcome::epoch)
      .def_readonly("contributors", &agent::Outcome::contributors)
      .def_readonly("attempts", &agent::Outcome::attempts)
      .def_readonly("contributor_ids", &agent::Outcome::contributor_ids)
      .def_property_readonly(
          "algorithm", [](const agent::Outcome& o) { return std::string(to_string(o.algorithm)); })
      .def("__repr__", [](const agent::Outcome& o) {
        std::ostringstream s;
        s << "Outcome(epoch=" << o.epoch << ", contributors=" << o.contributors
          << ", attempts=" << o.attempts << ")";
        return s.str();
      });
  py::class_<agent::FederatedOutcome>(m, "FederatedOutcome",
                                      "What a federated round did (docs/federated.md).")
      .def_readonly("round", &agent::FederatedOutcome::round)
      .def_readonly("epoch", &agent::FederatedOutcome::epoch)
      .def_readonly("contributed", &agent::FederatedOutcome::contributed)
      .def_readonly("total_weight", &agent::FederatedOutcome::total_weight)
      .def_readonly("attempts", &agent::FederatedOutcome::attempts)
      .def_property_readonly("contributors",
                             [](const agent::FederatedOutcome& o) {
                               std::vector<std::pair<std::uint64_t, double>> out;
                               for (const auto& c : o.contributors)
                                 out.emplace_back(c.member_id, c.weight);
                               return out;
                             })
      .def("__repr__", [](const agent::FederatedOutcome& o) {
        std::ostringstream s;
        s << "FederatedOutcome(round=" << o.round << ", contributed=" << o.contributed
          << ", contributors=" << o.contributors.size() << ", total_weight=" << o.total_weight
          << ")";
        return s.str();
      });
  py::class_<agent::BoundaryOutcome>(m, "BoundaryOutcome", "What a step boundary did.")
      .def_readonly("left", &agent::BoundaryOutcome::left)
      .def_readonly("view_changed", &agent::BoundaryOutcome::view_changed)
      .def_readonly("received_state", &agent::BoundaryOutcome::received_state)
      .def_readonly("epoch", &agent::BoundaryOutcome::epoch)
      .def_readonly("world_size", &agent::BoundaryOutcome::world_size)
      .def("__repr__", [](const agent::BoundaryOutcome& b) {
        std::ostringstream s;
        s << "BoundaryOutcome(epoch=" << b.epoch << ", world_size=" << b.world_size
          << ", view_changed=" << b.view_changed << ", received_state=" << b.received_state
          << ", left=" << b.left << ")";
        return s.str();
      });
  py::class_<PyTicket, std::shared_ptr<PyTicket>>(m, "Ticket", "A queued collective.")
      .def("done", &PyTicket::done)
      .def("wait", &PyTicket::wait, py::arg("timeout"))
      .def_property_readonly("started_at", &PyTicket::started_at)
      .def_property_readonly("finished_at", &PyTicket::finished_at)
      .def_property_readonly("op", &PyTicket::op)
      .def_property_readonly("index", &PyTicket::index);
}

using Cls = py::class_<PyWorker, std::shared_ptr<PyWorker>>;

void bind_collectives(Cls& cls) {
  cls.def("all_reduce",
          [](PyWorker& self, std::uintptr_t send, std::uintptr_t recv, std::size_t count,
             const std::string& dtype, const std::string& op, py::object keep) {
            const DType d = dtype_named(dtype);
            const ReduceOp o = op_named(op);
            return self.submit("all_reduce", std::move(keep), [=](agent::Worker& w) {
              return w.all_reduce(at(send), at(recv), count, d, o);
            });
          });
  cls.def("reduce_scatter",
          [](PyWorker& self, std::uintptr_t send, std::uintptr_t recv, std::size_t recv_count,
             const std::string& dtype, const std::string& op, py::object keep) {
            const DType d = dtype_named(dtype);
            const ReduceOp o = op_named(op);
            return self.submit("reduce_scatter", std::move(keep), [=](agent::Worker& w) {
              return w.reduce_scatter(at(send), at(recv), recv_count, d, o);
            });
          });
  cls.def("all_gather", [](PyWorker& self, std::uintptr_t send, std::uintptr_t recv,
                           std::size_t send_count, const std::string& dtype, py::object keep) {
    const DType d = dtype_named(dtype);
    return self.submit("all_gather", std::move(keep), [=](agent::Worker& w) {
      return w.all_gather(at(send), at(recv), send_count, d);
    });
  });
  cls.def("broadcast", [](PyWorker& self, std::uintptr_t send, std::uintptr_t recv,
                          std::size_t count, const std::string& dtype, int root, py::object keep) {
    const DType d = dtype_named(dtype);
    return self.submit("broadcast", std::move(keep), [=](agent::Worker& w) {
      return w.broadcast(at(send), at(recv), count, d, root);
    });
  });
  cls.def("reduce", [](PyWorker& self, std::uintptr_t send, std::uintptr_t recv, std::size_t count,
                       const std::string& dtype, const std::string& op, int root, py::object keep) {
    const DType d = dtype_named(dtype);
    const ReduceOp o = op_named(op);
    return self.submit("reduce", std::move(keep), [=](agent::Worker& w) {
      return w.reduce(at(send), at(recv), count, d, o, root);
    });
  });
  cls.def("gather",
          [](PyWorker& self, std::uintptr_t send, std::uintptr_t recv, std::size_t send_count,
             const std::string& dtype, int root, py::object keep) {
            const DType d = dtype_named(dtype);
            return self.submit("gather", std::move(keep), [=](agent::Worker& w) {
              return w.gather(at(send), at(recv), send_count, d, root);
            });
          });
  cls.def("scatter",
          [](PyWorker& self, std::uintptr_t send, std::uintptr_t recv, std::size_t recv_count,
             const std::string& dtype, int root, py::object keep) {
            const DType d = dtype_named(dtype);
            return self.submit("scatter", std::move(keep), [=](agent::Worker& w) {
              return w.scatter(at(send), at(recv), recv_count, d, root);
            });
          });
  cls.def("all_to_all", [](PyWorker& self, std::uintptr_t send, std::uintptr_t recv,
                           std::size_t count_per_peer, const std::string& dtype, py::object keep) {
    const DType d = dtype_named(dtype);
    return self.submit("all_to_all", std::move(keep), [=](agent::Worker& w) {
      return w.all_to_all(at(send), at(recv), count_per_peer, d);
    });
  });
  cls.def("barrier", [](PyWorker& self) {
    return self.submit("barrier", py::none(), [](agent::Worker& w) { return w.barrier(); });
  });
  cls.def("all_reduce_compressed",
          [](PyWorker& self, std::uintptr_t data, std::size_t count, const std::string& op,
             std::uint64_t tensor_id, std::uint64_t step,
             const std::vector<std::array<std::size_t, 3>>& matrices, py::object keep) {
            const ReduceOp o = op_named(op);
            std::vector<agent::TensorMatrix> shapes;
            for (const auto& m : matrices) shapes.push_back({m[0], m[1], m[2]});
            return self.submit("all_reduce_compressed", std::move(keep), [=](agent::Worker& w) {
              return w.all_reduce_compressed(static_cast<float*>(at(data)), count, o, tensor_id,
                                             step, shapes);
            });
          });
}

}  // namespace

void bind_worker(py::module_& m) {
  bind_config(m);
  bind_outcomes(m);
  Cls cls(m, "Worker", "One member of a Tributary cluster (see tributary.Worker).");
  cls.def_static("start", &PyWorker::start, py::arg("config"))
      .def_property_readonly("rank", [](PyWorker& s) { return s.worker().rank(); })
      .def_property_readonly("size", [](PyWorker& s) { return s.worker().size(); })
      .def_property_readonly("epoch", [](PyWorker& s) { return s.worker().epoch(); })
      .def_property_readonly("member_id", [](PyWorker& s) { return s.worker().member_id(); })
      .def_property_readonly("data_port", [](PyWorker& s) { return s.worker().data_port(); })
      .def_property_readonly("metrics_port", [](PyWorker& s) { return s.worker().metrics_port(); })
      .def_property_readonly("step", [](PyWorker& s) { return s.worker().step(); })
      .def_property_readonly("draining", [](PyWorker& s) { return s.worker().draining(); })
      .def_property_readonly("attached", &PyWorker::attached)
      .def("wait_idle", &PyWorker::wait_idle, py::arg("timeout"))
      .def("step_boundary", &PyWorker::step_boundary, py::arg("timeout"))
      .def(
          "federated_round",
          [](PyWorker& self, std::uintptr_t address, std::size_t count, std::uint64_t round,
             double weight, double deadline_s, int min_participants, const std::string& late,
             std::uint64_t tensor_id, double timeout_s) {
            if (late != "fold" && late != "drop") {
              throw_status(error(StatusCode::kInvalidArgument,
                                 "late=\"" + late + "\": \"fold\" or \"drop\""));
            }
            if (!(deadline_s > 0) || deadline_s > 86400) {
              throw_status(error(StatusCode::kInvalidArgument,
                                 "deadline must be within (0, 86400] s"));
            }
            agent::FederatedRound r;
            r.round = round;
            r.weight = weight;
            r.deadline = std::chrono::milliseconds(
                std::max<std::int64_t>(1, static_cast<std::int64_t>(deadline_s * 1000)));
            r.min_participants = min_participants;
            r.late = late == "fold" ? agent::LatePolicy::kFoldIntoResidual
                                    : agent::LatePolicy::kDrop;
            r.tensor_id = tensor_id;
            return self.federated_round(address, count, r, timeout_s);
          },
          py::arg("address"), py::arg("count"), py::arg("round"), py::arg("weight"),
          py::arg("deadline"), py::arg("min_participants"), py::arg("late"),
          py::arg("tensor_id"), py::arg("timeout"))
      .def("register_state", &PyWorker::register_state, py::arg("name"), py::arg("address"),
           py::arg("nbytes"), py::arg("keep"), py::arg("timeout"))
      .def("drain", [](PyWorker& s) { s.worker().drain(); })
      .def("leave", [](PyWorker& s) { ok_or_throw(s.close()); });
  bind_collectives(cls);
}

}  // namespace tributary::python
