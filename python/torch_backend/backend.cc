// The "tributary" torch.distributed backend (backend.h): its lifecycle (joining or forming the
// group's cluster through torch's store, abort, shutdown), its Works and its Python module,
// tributary.torch._c10d. The collectives are backend_ops.cc. With backend_ops.cc the only
// translation units that include torch headers: each takes most of a minute to compile on
// the development machines.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <string>

#include "core/auth.h"
#include "core/hash.h"
#include "python/torch_backend/backend.h"

namespace tributary::python::torch_backend {
namespace {

std::chrono::milliseconds remaining(Deadline d) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      d.at - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

// The group's store (torch gives every group a store of its own, under the group's name):
// bounded waits, strings in and out, torch's exceptions turned into Status.
//
// Keys live under a generation: a store can outlive a group (torchrun's agent keeps one for
// the whole run, and a script may init_process_group again after destroy_process_group under
// the same group name), and a member must never read the previous group's coordinator. Every
// member counts itself in once per group; the n members of one group get n consecutive
// counts, so count / n names the generation alike on all of them.
class GroupStore {
 public:
  GroupStore(c10::intrusive_ptr<c10d::Store> store, Deadline deadline)
      : store_(std::move(store)), deadline_(deadline) {}
  Status enter(int size) {
    try {
      const std::int64_t arrival = store_->add("tributary/arrivals", 1);
      prefix_ = "tributary/" + std::to_string((arrival - 1) / size) + "/";
      return Status::ok();
    } catch (const std::exception& e) {
      return error(StatusCode::kUnavailable, std::string("torch's store refused a count: ") +
                                                 e.what());
    }
  }
  Status set(const std::string& key, const std::string& value) {
    try {
      store_->set(prefix_ + key, std::vector<std::uint8_t>(value.begin(), value.end()));
      return Status::ok();
    } catch (const std::exception& e) {
      return error(StatusCode::kUnavailable, "torch's store refused '" + key + "': " + e.what());
    }
  }
  Result<std::string> get(const std::string& key, const std::string& what) {
    try {
      store_->wait({prefix_ + key}, remaining(deadline_));
      const std::vector<std::uint8_t> v = store_->get(prefix_ + key);
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      return error(StatusCode::kTimedOut, "waiting in torch's store for " + what + ": " + e.what());
    }
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  Deadline deadline_;
  std::string prefix_ = "tributary/";
};

// Where the group's cluster is: the coordinator named by the environment (checked first, so
// that a world that cannot form there is named at once), or one this group starts: its rank 0
// hosts it and publishes its endpoint and a fresh secret through the group's store, which
// every member of the group can already read (torch's rendezvous trusts it the same way).
Status find_cluster(GroupStore& store, int rank, int size, GroupSetup& setup,
                    std::unique_ptr<EmbeddedCoordinator>* hosted) {
  agent::WorkerConfig& config = setup.worker;
  if (!config.coordinator.empty()) {
    if (rank == 0) {
      // Before anyone joins (the others wait for the verdict), so what it sees is the
      // coordinator as this job finds it.
      const Status s = check_world_forms(config.coordinator, config.secret, size,
                                         std::chrono::seconds(10));
      TRIB_RETURN_IF_ERROR(store.set("cluster_check", s.is_ok() ? "" : s.to_string()));
      return s;
    }
    TRIB_ASSIGN_OR_RETURN(std::string verdict, store.get("cluster_check", "rank 0's look at the coordinator"));
    if (!verdict.empty()) return error(StatusCode::kUnavailable, "(seen by rank 0) " + verdict);
    return Status::ok();
  }
  if (rank == 0) {
    const Nonce n1 = random_nonce();
    const Nonce n2 = random_nonce();
    std::string secret = to_hex(n1) + to_hex(n2);
    TRIB_ASSIGN_OR_RETURN(*hosted, EmbeddedCoordinator::start(
                                       "tcp://" + setup.coordinator_host + ":0", secret, size));
    TRIB_RETURN_IF_ERROR(store.set("coordinator", (*hosted)->endpoint() + "\n" + secret));
  }
  TRIB_ASSIGN_OR_RETURN(std::string published, store.get("coordinator", "the group's coordinator, which its rank 0 starts"));
  const auto newline = published.find('\n');
  if (newline == std::string::npos) {
    return error(StatusCode::kBadFrame, "the group's store holds a malformed coordinator entry");
  }
  config.coordinator = published.substr(0, newline);
  config.secret = published.substr(newline + 1);
  return Status::ok();
}

// Every group of this process that is alive, for shutdown_all() (weakly: it never keeps one).
std::mutex g_live_mu;
std::vector<c10::weak_intrusive_ptr<TributaryBackend>> g_live;  // guarded by g_live_mu

void register_live(const c10::intrusive_ptr<TributaryBackend>& b) {
  std::lock_guard lock(g_live_mu);
  std::erase_if(g_live, [](const auto& w) { return w.expired(); });
  g_live.emplace_back(b);
}

// Holds off the GIL while this thread waits for threads that may want it (a comm hook's
// Future callback runs on the queue's thread).
struct NoGil {
  std::optional<pybind11::gil_scoped_release> release;
  NoGil() {
    if (Py_IsInitialized() && PyGILState_Check()) release.emplace();
  }
};

}  // namespace

TributaryWork::TributaryWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
                             std::chrono::milliseconds default_timeout,
                             std::weak_ptr<AbortTarget> abort_group, Staged staged)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      staging_(std::move(staged.staging)),
      default_timeout_(default_timeout),
      // With the tensors' device, the Future is CUDA-aware: marked completed with the side
      // stream current (complete()), it records an event there that whoever waits on the
      // Future (DDP's reducer, a comm hook's then()) makes its own stream wait on.
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), std::move(staged.devices))),
      abort_group_(std::move(abort_group)) {}

int TributaryWork::sourceRank() const {
  const int r = source_.load();
  TORCH_CHECK(r >= 0,
              "tributary: sourceRank() of a Work that received nothing (not a recv, or "
              "no message matched yet)");
  return r;
}

bool TributaryWork::wait(std::chrono::milliseconds timeout) {
  const auto bound = timeout == kNoTimeout ? default_timeout_ : timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  const bool done = cv_.wait_for(lock, bound, [&] { return completed_; });
  TORCH_CHECK(done, "tributary: ", c10d::opTypeToString(retrieveOpType()), " not done after ",
              bound.count(), " ms (the operation goes on; abort() the group to end it)");
  if (exception_) std::rethrow_exception(exception_);
  lock.unlock();
  synchronize();
  return true;
}

void TributaryWork::synchronize() {
  if (!staging_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!completed_ || exception_) return;  // nothing was copied back to wait for
  }
  staging_->join();
}

void TributaryWork::abort() {
  if (auto target = abort_group_.lock()) target->abort();
}

void TributaryWork::complete(const Status& status) {
  if (status.is_ok()) {
    if (staging_) {
      staging_->complete([&] { future_->markCompleted(c10::IValue(outputs_)); });
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
    finish();
    return;
  }
  auto failure = std::make_exception_ptr(std::runtime_error("tributary: " + status.to_string()));
  future_->setError(failure);
  finish(failure);
}

void AbortTarget::abort() {
  std::lock_guard lock(mu);
  if (backend != nullptr) backend->abort();
}

TributaryBackend::TributaryBackend(int rank, int size, GroupSetup setup)
    : c10d::Backend(rank, size),
      setup_(std::move(setup)),
      abort_target_(std::make_shared<AbortTarget>()) {
  abort_target_->backend = this;
}

Result<c10::intrusive_ptr<TributaryBackend>> TributaryBackend::create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, GroupSetup setup) {
  auto b = c10::make_intrusive<TributaryBackend>(rank, size, std::move(setup));
  agent::WorkerConfig& config = b->setup_.worker;
  GroupStore group_store(store, Deadline::after(config.join_timeout));
  TRIB_RETURN_IF_ERROR(group_store.enter(size));
  TRIB_RETURN_IF_ERROR(find_cluster(group_store, rank, size, b->setup_, &b->coordinator_));
  // No quorum wait: a group that lost a member fails its next collective (enqueue's
  // contributor check) instead of waiting for a replacement, and at the end, when the members
  // leave one by one, one still finishing its last collective resolves it with the fewer
  // members left (the commit rule keeps what the others committed) rather than wait forever
  // for a quorum that has gone home.
  config.min_world_size = 1;
  TRIB_ASSIGN_OR_RETURN(b->worker_, agent::Worker::start(config));
  if (b->worker_->size() != size) {
    return error(StatusCode::kMismatch,
                 "the cluster at " + config.coordinator + " formed with " +
                     std::to_string(b->worker_->size()) + " members but this torch.distributed "
                     "group has " + std::to_string(size));
  }
  TRIB_RETURN_IF_ERROR(
      group_store.set("worker_rank/" + std::to_string(rank), std::to_string(b->worker_->rank())));
  std::vector<int> worker_rank_of;
  for (int t = 0; t < size; ++t) {
    TRIB_ASSIGN_OR_RETURN(std::string v, group_store.get("worker_rank/" + std::to_string(t),
                                                         "rank " + std::to_string(t) + "'s join"));
    worker_rank_of.push_back(std::stoi(v));
  }
  TRIB_ASSIGN_OR_RETURN(b->ranks_, RankMap::from_worker_ranks(std::move(worker_rank_of)));
  if (size > 1) {
    PointToPoint::Exchange exchange =
        [&](const std::string& mine) -> Result<std::vector<std::string>> {
      TRIB_RETURN_IF_ERROR(group_store.set("p2p/" + std::to_string(rank), mine));
      std::vector<std::string> all;
      for (int r = 0; r < size; ++r) {
        TRIB_ASSIGN_OR_RETURN(std::string a, group_store.get("p2p/" + std::to_string(r),
                                                             "rank " + std::to_string(r) +
                                                                 "'s point-to-point address"));
        all.push_back(std::move(a));
      }
      return all;
    };
    TRIB_ASSIGN_OR_RETURN(b->p2p_, PointToPoint::connect(config, rank, size, exchange,
                                                         Deadline::after(config.join_timeout)));
  }
  b->queue_ = std::make_unique<agent::CollectiveQueue>();
  register_live(b);
  return b;
}

TributaryBackend::~TributaryBackend() {
  {
    std::lock_guard lock(abort_target_->mu);
    abort_target_->backend = nullptr;
  }
  finish(Deadline{std::chrono::steady_clock::now()});  // fails what is still queued
}

void TributaryBackend::finish(Deadline deadline) {
  NoGil no_gil;
  {
    std::lock_guard lock(finish_mu_);
    if (finished_) return;
    finished_ = true;  // from here on every operation raises
  }
  // Not under finish_mu_: abort() may come meanwhile and must not wait for this.
  if (queue_) (void)queue_->wait_idle(deadline);
  std::unique_ptr<agent::CollectiveQueue> queue;
  std::unique_ptr<PointToPoint> p2p;
  {
    std::scoped_lock lock(finish_mu_, abort_mu_);  // an abort() meanwhile closes them first
    queue.swap(queue_);
    p2p.swap(p2p_);
  }
  queue.reset();  // fails what is queued, waits for the running job, joins the thread
  p2p.reset();
  if (worker_) (void)worker_->leave();
  // The host of the group's coordinator keeps it until the others have left too (bounded):
  // a member whose coordinator vanished would wait out its leave.
  if (coordinator_) {
    coordinator_->wait_until_empty(Deadline::after(std::chrono::seconds(10)));
    coordinator_.reset();
  }
}

void TributaryBackend::abort() {
  const Status why = error(StatusCode::kAborted, "the process group was aborted");
  // Not finish_mu_: closing the queue completes the queued Works on this thread, and a
  // Future callback may issue the next operation (a comm hook chaining one), which takes it.
  std::lock_guard lock(abort_mu_);
  if (worker_) worker_->abort(why);
  if (queue_) queue_->close(why);
  if (p2p_) p2p_->close(why);
}

void TributaryBackend::shutdown() { finish(op_deadline()); }

void TributaryBackend::shutdown_all() {
  std::vector<c10::weak_intrusive_ptr<TributaryBackend>> live;
  {
    std::lock_guard lock(g_live_mu);
    live.swap(g_live);
  }
  // Quickly: the interpreter is exiting; what is still queued fails.
  for (auto& w : live) {
    if (auto b = w.lock()) b->finish(Deadline{std::chrono::steady_clock::now()});
  }
}

int TributaryBackend::worker_root(std::int64_t torch_root) const {
  TORCH_CHECK(torch_root >= 0 && torch_root < size_, "tributary: root ", torch_root,
              " is not a rank of this group of ", size_);
  return ranks_.worker_rank(static_cast<int>(torch_root));
}

c10::intrusive_ptr<TributaryWork> TributaryBackend::make_work(c10d::OpType type,
                                                              std::vector<at::Tensor> outputs,
                                                              Staged staged) {
  return c10::make_intrusive<TributaryWork>(rank_, type, std::move(outputs), setup_.timeout,
                                            abort_target_, std::move(staged));
}

namespace {

// A collective's result as a torch.distributed group sees it: one with fewer contributors
// than the group's fixed world is an error.
Result<agent::Outcome> in_full_world(Result<agent::Outcome> r, int size) {
  if (!r || r->contributors == size) return r;
  return error(StatusCode::kPeerLost,
               "only " + std::to_string(r->contributors) + " of the group's " +
                   std::to_string(size) +
                   " members contributed (a member failed and the rest re-ran the collective): "
                   "torch.distributed groups have a fixed world; train elastically with "
                   "tributary.torch.ElasticTrainer");
}

}  // namespace

c10::intrusive_ptr<TributaryWork> TributaryBackend::enqueue(c10d::OpType type,
                                                            std::vector<at::Tensor> outputs,
                                                            Staged staged, Job job) {
  auto work = make_work(type, std::move(outputs), std::move(staged));
  const int size = size_;
  agent::Worker* w = worker_.get();
  const Deadline deadline = op_deadline();
  std::lock_guard lock(finish_mu_);
  TORCH_CHECK(!finished_, "tributary: ", c10d::opTypeToString(type),
              " on a process group that was shut down (destroy_process_group)");
  queue_->submit(
      c10d::opTypeToString(type),
      [w, size, deadline, staging = work->staging(),
       job = std::move(job)]() -> Result<agent::Outcome> {
        if (!staging) return in_full_world(job(*w), size);
        Result<agent::Outcome> r = error(StatusCode::kInternal, "the collective did not run");
        const Status s = staging->run(
            [&] {
              r = in_full_world(job(*w), size);
              return r.status();
            },
            deadline);
        if (!s.is_ok()) return s;
        return r;
      },
      [work](const Result<agent::Outcome>& r) { work->complete(r.status()); });
  return work;
}

#ifdef TRIBUTARY_TORCH_HAS_SPLIT
c10::intrusive_ptr<c10d::Backend::Options> TributaryBackend::getBackendOptions() {
  return c10::make_intrusive<Options>("tributary", setup_.timeout);
}

c10::intrusive_ptr<c10d::Backend> TributaryBackend::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  const auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end()) return nullptr;  // not a member: nothing to create
  GroupSetup setup = setup_;
  setup.worker.coordinator.clear();  // a cluster of its own, hosted by its first member
  setup.worker.secret.clear();
  if (opts) setup.timeout = opts->timeout;
  Result<c10::intrusive_ptr<TributaryBackend>> group = error(StatusCode::kInternal, "not started");
  {
    std::optional<pybind11::gil_scoped_release> release;  // the join takes a while
    if (Py_IsInitialized() && PyGILState_Check()) release.emplace();
    group = create(store, static_cast<int>(me - ranks.begin()), static_cast<int>(ranks.size()),
                   std::move(setup));
  }
  if (!group) throw std::runtime_error("tributary: split_group: " + group.status().to_string());
  return *group;
}
#endif

}  // namespace tributary::python::torch_backend

PYBIND11_MODULE(_c10d, m) {
  namespace py = pybind11;
  using tributary::python::torch_backend::GroupSetup;
  using tributary::python::torch_backend::TributaryBackend;
  m.doc() = "The tributary torch.distributed backend (registered by tributary.torch)";
  m.def(
      "create",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout, const std::string& coordinator,
         const std::string& secret, const std::string& bind_host, const std::string& host,
         const std::string& coordinator_host,
         std::int64_t join_timeout_ms) -> c10::intrusive_ptr<c10d::Backend> {
        GroupSetup setup;
        setup.worker.coordinator = coordinator;
        setup.worker.secret = secret;
        setup.worker.bind_host = bind_host;
        setup.worker.host = host;
        setup.worker.join_timeout = std::chrono::milliseconds(join_timeout_ms);
        setup.timeout = timeout;
        setup.coordinator_host = coordinator_host;
        tributary::Result<c10::intrusive_ptr<TributaryBackend>> group =
            tributary::error(tributary::StatusCode::kInternal, "not started");
        {
          py::gil_scoped_release release;
          group = TributaryBackend::create(store, rank, size, std::move(setup));
        }
        if (!group) throw std::runtime_error("tributary: " + group.status().to_string());
        return *group;
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("coordinator"), py::arg("secret"), py::arg("bind_host"), py::arg("host"),
      py::arg("coordinator_host"), py::arg("join_timeout_ms"));
  m.attr("built_with_cuda") = tributary::python::torch_backend::built_with_cuda();
  m.def("_shutdown_all", &TributaryBackend::shutdown_all,
        py::call_guard<py::gil_scoped_release>(),
        "Shuts down every group of this process still alive (the atexit hook).");
}
