#include "agent/worker.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "agent/agent_metrics.h"
#include "agent/tcp_endpoint.h"
#include "algorithms/cost_model.h"
#include "core/check.h"
#include "membership/coordinator_client.h"

namespace tributary {

class Worker::Impl {
 public:
  explicit Impl(WorkerConfig config) : config(std::move(config)) {}

  Status start();
  Status connect_view(const membership::View& view);

  // Runs one collective on the current epoch's link: tags it with the next sequence
  // number, bounds it by the collective timeout, records metrics. On failure the link is
  // abandoned (links.h: errors are fatal to a link).
  template <typename Fn>
  Result<Outcome> run(std::string_view op, AllReduceAlgorithm algorithm, Fn&& fn) {
    // Only all-reduce has a choice of algorithm; the others report their fixed one by name.
    if (!link) return error(StatusCode::kAborted, "no data-plane links: " + broken.to_string());
    CollectiveOptions options;
    options.seq = next_seq++;
    options.deadline = Deadline::after(config.collective_timeout);
    options.chunk_bytes = config.chunk_bytes;
    options.algorithm = algorithm;
    const auto t0 = std::chrono::steady_clock::now();
    Status status = fn(*link, options);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (metrics) {
      metrics->record_collective(
          op, algorithm == AllReduceAlgorithm::kAuto ? std::string_view("fixed") : to_string(algorithm),
          status, seconds);
      if (++collectives_since_sync >= 64 || !status.is_ok()) {
        metrics->sync_links(endpoint->stats());
        collectives_since_sync = 0;
      }
    }
    if (!status.is_ok()) {
      link->abort(status);
      broken = status;
      link.reset();
      return status;
    }
    return Outcome{view.epoch, static_cast<int>(view.size()), algorithm};
  }

  AllReduceAlgorithm pick(std::size_t bytes) const {
    if (config.algorithm != AllReduceAlgorithm::kAuto) return config.algorithm;
    return CostModel::default_model().choose(static_cast<int>(view.size()), bytes);
  }

  WorkerConfig config;
  std::unique_ptr<AgentMetrics> metrics;
  std::unique_ptr<TcpEndpoint> endpoint;
  std::unique_ptr<membership::CoordinatorClient> client;
  membership::View view;
  int rank = -1;
  std::unique_ptr<Link> link;
  Status broken;
  std::uint64_t next_seq = 1;
  int collectives_since_sync = 0;
  bool left = false;
};

namespace {
std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}
}  // namespace

Status Worker::Impl::start() {
  if (config.secret.empty()) {
    return error(StatusCode::kInvalidArgument,
                 "no cluster secret: pass --secret or set TRIBUTARY_SECRET");
  }
  const Deadline deadline = Deadline::after(config.join_timeout);
  if (!config.metrics_bind.empty()) {
    auto m = AgentMetrics::serve(config.metrics_bind);
    if (!m) return m.status();
    metrics = std::move(*m);
  }
  TcpEndpointConfig ec;
  ec.bind_host = config.bind_host;
  ec.port = config.data_port;
  ec.secret = config.secret;
  auto ep = TcpEndpoint::listen(ec);
  if (!ep) return ep.status();
  endpoint = std::move(*ep);

  client = std::make_unique<membership::CoordinatorClient>(
      membership::stderr_log_sink("agent"), metrics ? &metrics->registry() : nullptr);
  membership::ClientConfig cc;
  cc.endpoint = config.coordinator;
  cc.secret = config.secret;
  cc.host = config.host.empty() ? hostname() : config.host;
  cc.zone = config.zone;
  cc.data_address = endpoint->address();
  cc.capabilities = {"tcp"};
  auto joined = client->join(cc, deadline);
  if (!joined) return joined.status();
  auto first = client->wait_for_view(1, deadline);
  if (!first) return first.status();
  TRIB_RETURN_IF_ERROR(connect_view(*first));
  // One line for operators and the integration tests: where this agent can be reached.
  std::fprintf(stderr, "tributary[agent]: member %llu rank %d data %s metrics %u\n",
               static_cast<unsigned long long>(client->member_id()), rank,
               endpoint->address().c_str(), metrics ? static_cast<unsigned>(metrics->port()) : 0u);
  return Status::ok();
}

Status Worker::Impl::connect_view(const membership::View& v) {
  const membership::ViewMember* me = v.find(client->member_id());
  if (me == nullptr) return error(StatusCode::kEvicted, "this member is not in view " + std::to_string(v.epoch));
  std::vector<std::string> addresses(v.size());
  for (const auto& m : v.members) addresses.at(m.rank) = m.data_address;
  auto l = endpoint->connect_group(v.epoch, static_cast<int>(me->rank), addresses,
                                   Deadline::after(config.join_timeout));
  if (!l) return l.status();
  link = std::move(*l);
  view = v;
  rank = static_cast<int>(me->rank);
  return Status::ok();
}

Result<std::unique_ptr<Worker>> Worker::start(const WorkerConfig& config) {
  auto impl = std::make_unique<Impl>(config);
  TRIB_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Worker::~Worker() {
  if (!impl_->left) (void)leave();
}

int Worker::rank() const { return impl_->rank; }
int Worker::size() const { return static_cast<int>(impl_->view.size()); }
std::uint64_t Worker::epoch() const { return impl_->view.epoch; }
std::uint64_t Worker::member_id() const { return impl_->client->member_id(); }
std::uint16_t Worker::data_port() const { return impl_->endpoint->port(); }
std::uint16_t Worker::metrics_port() const { return impl_->metrics ? impl_->metrics->port() : 0; }

Result<Outcome> Worker::all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                                   ReduceOp op) {
  const AllReduceAlgorithm algorithm = impl_->pick(count * dtype_size(dtype));
  return impl_->run("all_reduce", algorithm, [&](Link& link, const CollectiveOptions& o) {
    return tributary::all_reduce(link, send, recv, count, dtype, op, o);
  });
}

Result<Outcome> Worker::reduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                       DType dtype, ReduceOp op) {
  return impl_->run("reduce_scatter", AllReduceAlgorithm::kAuto, [&](Link& link, const CollectiveOptions& o) {
    return tributary::reduce_scatter(link, send, recv, recv_count, dtype, op, o);
  });
}

Result<Outcome> Worker::all_gather(const void* send, void* recv, std::size_t send_count,
                                   DType dtype) {
  return impl_->run("all_gather", AllReduceAlgorithm::kAuto, [&](Link& link, const CollectiveOptions& o) {
    return tributary::all_gather(link, send, recv, send_count, dtype, o);
  });
}

Result<Outcome> Worker::broadcast(const void* send, void* recv, std::size_t count, DType dtype,
                                  int root) {
  return impl_->run("broadcast", AllReduceAlgorithm::kAuto, [&](Link& link, const CollectiveOptions& o) {
    return tributary::broadcast(link, send, recv, count, dtype, root, o);
  });
}

Result<Outcome> Worker::reduce(const void* send, void* recv, std::size_t count, DType dtype,
                               ReduceOp op, int root) {
  return impl_->run("reduce", AllReduceAlgorithm::kAuto, [&](Link& link, const CollectiveOptions& o) {
    return tributary::reduce(link, send, recv, count, dtype, op, root, o);
  });
}

Result<Outcome> Worker::gather(const void* send, void* recv, std::size_t send_count, DType dtype,
                               int root) {
  return impl_->run("gather", AllReduceAlgorithm::kAuto, [&](Link& link, const CollectiveOptions& o) {
    return tributary::gather(link, send, recv, send_count, dtype, root, o);
  });
}

Result<Outcome> Worker::scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                                int root) {
  return impl_->run("scatter", AllReduceAlgorithm::kAuto, [&](Link& link, const CollectiveOptions& o) {
    return tributary::scatter(link, send, recv, recv_count, dtype, root, o);
  });
}

Result<Outcome> Worker::all_to_all(const void* send, void* recv, std::size_t count_per_peer,
                                   DType dtype) {
  return impl_->run("all_to_all", AllReduceAlgorithm::kAuto, [&](Link& link, const CollectiveOptions& o) {
    return tributary::all_to_all(link, send, recv, count_per_peer, dtype, o);
  });
}

Result<Outcome> Worker::barrier() {
  return impl_->run("barrier", AllReduceAlgorithm::kAuto, [&](Link& link, const CollectiveOptions& o) {
    return tributary::barrier(link, o);
  });
}

Status Worker::leave() {
  if (impl_->left) return Status::ok();
  impl_->left = true;
  if (impl_->link) impl_->link->abort(error(StatusCode::kAborted, "worker left"));
  if (!impl_->client) return Status::ok();
  return impl_->client->leave(Deadline::after(std::chrono::seconds(5)));
}

}  // namespace tributary
