// The Worker: makes each collective all-or-nothing across an epoch's members and re-runs
// aborted ones in the next epoch. The protocol is in docs/fault-tolerance.md and its
// agent side's decisions in agent/runtime/epoch_machine.h, carried out by
// worker_driver.cc; this file is the Worker's lifecycle (joining, the control listener and
// the idle recovery, step boundaries, the state sync, leaving). The collective API is
// worker_collectives.cc.
#include "agent/worker.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "agent/recovery.h"
#include "agent/worker_impl.h"
#include "algorithms/agreement.h"
#include "algorithms/seq_space.h"
#include "control_client/coordinator_client.h"
#include "core/hash.h"

namespace tributary::agent {
namespace {

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

Deadline earlier(Deadline a, Deadline b) { return a.at < b.at ? a : b; }


}  // namespace

void Worker::Impl::on_control_news(const Result<membership::View>& v) {
  if (v) {
    note_newest_epoch(v->epoch);
    data_plane->cancel_connect(v->epoch);  // links being built for an older view are moot
    {
      // A view that only lets leavers go (membership::View::leaves_only) does not end the
      // collective running on the link of the view before it: a member leaves only between
      // its calls, so whatever the others still need of it was sent (or its link's abort
      // notice fails what it never joined), and aborting here would make the others re-run
      // without it a collective it returned with their inputs (a training loop's last
      // all-reduce, before each rank leaves). Nor does a run of such views, one leaver
      // after another, each the one after the last; a gap (a view not told) or any other
      // view ends it. The next call moves to the newest view.
      std::lock_guard lock(link_mu);
      const std::uint64_t link_epoch = ctx->epoch();
      if (leaves_only_through < link_epoch) leaves_only_through = link_epoch;
      const bool lets_it_finish = v->leaves_only && v->epoch == leaves_only_through + 1;
      if (lets_it_finish) leaves_only_through = v->epoch;
      if (ctx->link && link_epoch < v->epoch && !lets_it_finish) {
        ctx->link->abort(error(StatusCode::kAborted, "view " + std::to_string(link_epoch) +
                                                         " superseded by view " +
                                                         std::to_string(v->epoch)));
      }
    }
    wake_idle_recovery();
  } else if (v.status().code() == StatusCode::kEvicted && !evicted.load()) {
    eviction = v.status().message();  // before the flag that publishes it
    evicted = true;
    data_plane->cancel_connect(std::numeric_limits<std::uint64_t>::max());
    // Abort with kAborted, not the eviction itself: the abort notice reaches the peers,
    // and to them this member's removal is a failure to recover from (a new view), not
    // their own eviction. This member's collective sees `evicted`.
    std::lock_guard lock(link_mu);
    if (ctx->link) ctx->link->abort(error(StatusCode::kAborted, v.status().message()));
  }
}

void Worker::Impl::start_listening() {
  client->set_view_listener([this](const Result<membership::View>& v) { on_control_news(v); });
  idle_recovery = std::thread([this] { run_idle_recovery(); });
}

void Worker::Impl::run_idle_recovery() {
  while (!stopping.load()) {
    {
      // Woken by on_control_news(); the tick catches a view that arrived while a call ran
      // and that the call returned without moving to.
      std::unique_lock lock(idle_mu);
      idle_cv.wait_for(lock, std::chrono::milliseconds(50),
                       [&] { return idle_wake || stopping.load(); });
      idle_wake = false;
    }
    if (stopping.load() || evicted.load() || adopted_epoch.load() == 0 ||
        newest_epoch.load() <= adopted_epoch.load()) {
      continue;
    }
    std::unique_lock call(call_mu, std::try_to_lock);
    if (!call.owns_lock()) continue;  // a call is running: it moves to the view itself
    if (newest_epoch.load() <= ctx->epoch()) continue;
    idle_transitioning = true;
    const Status moved = transition(Deadline::after(config.recovery_timeout));
    idle_transitioning = false;
    if (moved.is_ok()) {
      log.logf(LogLevel::kInfo, "moved to view %llu between calls",
               static_cast<unsigned long long>(ctx->epoch()));
    } else if (!stopping.load()) {
      log.warn("moving to view " + std::to_string(newest_epoch.load()) +
               " between calls failed: " + moved.to_string() + "; the next call tries again");
    }
  }
}

void Worker::Impl::stop_listening() {
  stopping = true;
  // No news is acted on from here on (this returns once a call in progress is done).
  if (client) client->set_view_listener(nullptr);
  idle_cv.notify_all();
  if (idle_transitioning.load()) {
    // End the idle recovery's move now: its links and connects, not a deadline.
    data_plane->cancel_connect(std::numeric_limits<std::uint64_t>::max());
    std::lock_guard lock(link_mu);
    if (ctx->link) ctx->link->abort(error(StatusCode::kAborted, "worker leaving"));
  }
  if (idle_recovery.joinable()) idle_recovery.join();
}

Status Worker::Impl::start() {
  if (config.secret.empty()) {
    return error(StatusCode::kInvalidArgument,
                 "no cluster secret: pass --secret or set TRIBUTARY_SECRET");
  }
  auto parsed = compression::collectives::CompressionPlan::parse(config.codec);
  if (!parsed) {
    return error(StatusCode::kInvalidArgument, "--codec: " + parsed.status().message());
  }
  plan = std::move(*parsed);
  if (!config.wan_codec.empty()) {
    auto wan = compression::collectives::CompressionPlan::parse(config.wan_codec);
    if (!wan) return error(StatusCode::kInvalidArgument, "--wan-codec: " + wan.status().message());
    if (plan.kind != compression::collectives::CompressionPlan::Kind::kDense) {
      return error(StatusCode::kInvalidArgument,
                   "--wan-codec needs --codec float32 inside the zones, not " + config.codec);
    }
    wan_plan = std::move(*wan);
  }
  const double wan_seconds = std::chrono::duration<double>(config.wan_latency).count();
  if (!(config.wan_bandwidth_bps > 0) || !std::isfinite(config.wan_bandwidth_bps) ||
      wan_seconds < 0) {
    return error(StatusCode::kInvalidArgument,
                 "--wan-mbps and --wan-latency-ms: need a positive bandwidth and a latency >= 0");
  }
  configured_cost_model =
      algorithms::CostModel::default_model().with_wan(wan_seconds, 8.0 / config.wan_bandwidth_bps);
  set_cost_model(configured_cost_model);
  const Deadline deadline = Deadline::after(config.join_timeout);
  if (!config.metrics_bind.empty()) {
    TRIB_ASSIGN_OR_RETURN(metrics, AgentMetrics::serve(config.metrics_bind, log.child("metrics")));
  }
  TRIB_ASSIGN_OR_RETURN(const DataPlaneConfig plane_config, DataPlaneConfig::of(config));
  TRIB_ASSIGN_OR_RETURN(data_plane, DataPlane::start(plane_config, log.child("link")));

  if (!client) {
    client = std::make_unique<control_client::CoordinatorClient>(
        log.child("control"), metrics ? &metrics->registry() : nullptr);
  }
  control_client::ClientConfig cc;
  cc.endpoint = config.coordinator;
  cc.secret = config.secret;
  cc.host = config.host.empty() ? hostname() : config.host;
  cc.name = config.name;
  cc.zone = config.zone;
  cc.data_address = data_plane->addresses().front();
  cc.capabilities = data_plane->capabilities();
  TRIB_RETURN_IF_ERROR(client->join(cc, deadline).status());
  log.context()->set_member(std::to_string(client->member_id()));
  runtime::MachineConfig mc;
  mc.self = client->member_id();
  mc.recovery_timeout = config.recovery_timeout;
  mc.connect_timeout = config.join_timeout;
  mc.min_world_size = config.min_world_size;
  mc.agreement = config.agreement;
  mc.speculative_max_bytes = config.speculative_max_bytes;
  machine = runtime::EpochMachine(mc);
  // The listener acts from the first view on, so that even this first connect is cancelled
  // when a newer view makes it moot. The idle recovery waits for this first move (call_mu).
  std::lock_guard call(call_mu);
  start_listening();
  TRIB_RETURN_IF_ERROR(transition(deadline));
  // One line for operators and the integration tests: where this agent can be reached.
  log.logf(LogLevel::kInfo, "member %llu rank %d data %s metrics %u",
           static_cast<unsigned long long>(client->member_id()), ctx->rank,
           data_plane->addresses().front().c_str(),
           metrics ? static_cast<unsigned>(metrics->port()) : 0u);
  return Status::ok();
}

void Worker::Impl::record_attempt(std::string_view op, std::string_view algorithm,
                                  const Status& status, double seconds) {
  if (data_plane && data_plane->path_change_total() != path_changes_reported) report_links();
  if (!metrics) return;
  metrics->record_collective(op, algorithm, status, seconds);
  // Every 64 collectives, and at once after a failure or a pair's path change.
  const std::uint64_t path_changes = data_plane->path_change_total();
  if (++collectives_since_sync >= 64 || !status.is_ok() || path_changes != path_changes_synced) {
    path_changes_synced = path_changes;
    metrics->sync_links(data_plane->paths(), data_plane->refusals(), data_plane->path_changes(),
                        data_plane->reconnects());
    collectives_since_sync = 0;
  }
}

void Worker::Impl::attempt_failed(std::string_view op, const std::string& what,
                                  membership::Epoch epoch, const Status& status) {
  // The epoch's links are done for (link.h). Ask the coordinator for the next view.
  drop_link(status);
  if (evicted) return;
  if (newest_epoch.load() <= epoch) {  // not just overtaken by a newer view
    client->report_failure(epoch, 0, std::string(op) + " " + what + ": " + status.to_string());
  }
  log.logf(LogLevel::kWarn, "%.*s %s in view %llu failed: %s; recovering",
           static_cast<int>(op.size()), op.data(), what.c_str(),
           static_cast<unsigned long long>(epoch), status.to_string().c_str());
}

Result<Worker::Impl::StateSync> Worker::Impl::sync_state() {
  // Source: the lowest rank that has the state (the joiners are those that need it).
  std::int64_t source =
      machine.needs_state() ? std::numeric_limits<std::int32_t>::max() : ctx->rank;
  TRIB_RETURN_IF_ERROR(run("state_source", AlgorithmChoice::kNone, 8,
                           std::as_writable_bytes(std::span(&source, 1)),
                           [&](algorithms::Link& l, const algorithms::CollectiveOptions& o) {
                             return algorithms::all_reduce(l, &source, &source, 1, DType::kInt64,
                                                           ReduceOp::kMin, o);
                           },
                           /*retry=*/true, std::as_writable_bytes(std::span(&source, 1)))
                           .status());
  if (source >= ctx->size()) {
    return error(StatusCode::kUnavailable,
                 "no member of view " + std::to_string(ctx->epoch()) + " holds the training state");
  }
  const int root = static_cast<int>(source);
  Sha256 sha;
  std::uint64_t total = 0;
  for (auto& [name, bytes] : state) {
    total += bytes.size();
    TRIB_RETURN_IF_ERROR(run(
                             "state_sync", AlgorithmChoice::kNone, bytes.size(), {},
                             [&](algorithms::Link& l, const algorithms::CollectiveOptions& o) {
                               return algorithms::broadcast(l, bytes.data(), bytes.data(),
                                                            bytes.size(), DType::kUInt8, root, o);
                             },
                             /*retry=*/false)
                             .status());
    sha.update(name).update(bytes);
  }
  const Sha256Digest mine = sha.finish();
  Sha256Digest theirs = mine;
  TRIB_RETURN_IF_ERROR(run(
                           "state_hash", AlgorithmChoice::kNone, theirs.size(), {},
                           [&](algorithms::Link& l, const algorithms::CollectiveOptions& o) {
                             return algorithms::broadcast(l, theirs.data(), theirs.data(),
                                                          theirs.size(), DType::kUInt8, root, o);
                           },
                           /*retry=*/false)
                           .status());
  if (theirs != mine) {
    return error(StatusCode::kBadFrame, "training state received from rank " +
                                            std::to_string(root) + " does not match its SHA-256");
  }
  if (machine.needs_state()) {
    log.logf(LogLevel::kInfo, "received %zu state buffers from rank %d, SHA-256 verified",
             state.size(), root);
  }
  machine.state_received();
  return StateSync{root, total, mine};
}

Result<BoundaryOutcome> Worker::Impl::step_boundary() {
  std::lock_guard call(call_mu);
  BoundaryOutcome out;
  const double compute = std::max(step_compute_seconds, seconds_since_last_collective());
  // That stretch is reported now: the boundary's own collectives must not count it again
  // towards the next step (a member slow in one step would look slow in two).
  step_compute_seconds = 0;
  last_collective_end = clock->now();
  // Keyed by the collective sequence number, which every member (a rejoiner too, after
  // its Go) has in common at a boundary; a local step count would not line up.
  // A step that ran a federated round is not judged by the straggler policy: a member
  // slower than the others is late for the round (its deadline handles it), not evicted
  // (docs/federated.md).
  if (!step_federated) client->report_step(machine.next_seq(), compute);
  step_federated = false;
  client->set_step(machine.next_seq());
  ++step;
  const Deadline deadline = Deadline::after(config.recovery_timeout);
  for (;;) {
    // The listener learns of views on the control plane's schedule; a boundary asks the
    // control plane itself, so that a view (or this member's eviction) issued before the
    // boundary is acted on at this boundary.
    auto latest =
        client->wait_for_view(newest_epoch.load() + 1, Deadline{std::chrono::steady_clock::now()});
    if (latest) {
      note_newest_epoch(latest->epoch);
    } else if (latest.status().code() == StatusCode::kEvicted) {
      return latest.status();
    }
    // What this member brings, combined over the members by one max all-reduce of its
    // encoding (boundary_vote.h says why max is the agreement each field needs).
    BoundaryVote mine;
    mine.leave = drain_requested.load();
    mine.joiners_waiting = client->joiners_pending();
    mine.newest_epoch = newest_epoch.load();
    mine.state_needed = machine.needs_state();
    vote_refit(&mine);
    BoundaryVote::Encoded votes = mine.encode();
    auto boundary = run(
        "step_boundary", AlgorithmChoice::kNone, sizeof(votes),
        std::as_writable_bytes(std::span(votes)),
        [&](algorithms::Link& l, const algorithms::CollectiveOptions& o) {
          return algorithms::all_reduce(l, votes.data(), votes.data(), votes.size(), DType::kInt64,
                                        ReduceOp::kMax, o);
        },
        /*retry=*/true, std::as_writable_bytes(std::span(votes)));
    if (!boundary) return boundary.status();
    const BoundaryVote agreed = BoundaryVote::decode(votes);
    if (agreed.state_needed) {
      const bool receiving = machine.needs_state();
      Result<StateSync> synced = sync_state();
      if (synced) {
        if (receiving) {
          out.received_state = true;
          out.state_bytes = synced->bytes;
          out.state_source_rank = synced->root;
          out.state_sha256 = to_hex(std::span<const std::uint8_t>(synced->digest));
        }
        continue;
      }
      const Status s = synced.status();
      if (!retryable(s) || deadline.passed()) return s;
      continue;  // a failure during the sync: the next round runs in the new view
    }
    if (agreed.leave || agreed.joiners_waiting) {
      const bool leaving = drain_requested.load();
      client->request_boundary(ctx->epoch(), leaving);
      if (leaving) {
        settle_link(config.stall_timeout);
        drop_link(error(StatusCode::kAborted, "drained"));
        stop_listening();
        Status s = client->leave(Deadline::after(std::chrono::seconds(10)));
        left = true;
        out.left = true;
        out.epoch = ctx->epoch();
        if (!s.is_ok()) return s;
        return out;
      }
      // Every member is at this boundary and closes its links for the next view: first
      // the peers acknowledge what this member sent them (a failover link keeps it until
      // then), so that none that is slower to finish the vote finds every path closed
      // before it read its last message. A plain link settles at once.
      settle_link(config.stall_timeout);
      TRIB_RETURN_IF_ERROR(transition(deadline));
      out.view_changed = true;
      continue;
    }
    if (agreed.newest_epoch > ctx->epoch()) {
      settle_link(config.stall_timeout);
      TRIB_RETURN_IF_ERROR(transition(deadline));
      out.view_changed = true;
      continue;
    }
    // The refit, only from an all-reduce of this view: every member that returns it here
    // holds the same fields and the same model. One returned into a later view (a repair,
    // a commit after a failure) is dropped: that view's members refit from its own links.
    if (boundary->epoch == ctx->epoch()) adopt_refit(agreed);
    out.epoch = ctx->epoch();
    out.world_size = ctx->size();
    return out;
  }
}

Result<std::unique_ptr<Worker>> Worker::start(const WorkerConfig& config) {
  return start(config, WorkerEnvironment{});
}

Result<std::unique_ptr<Worker>> Worker::start(const WorkerConfig& config,
                                              WorkerEnvironment environment) {
  auto impl = std::make_unique<Impl>(config);
  impl->client = std::move(environment.control);
  if (environment.clock != nullptr) impl->clock = environment.clock;
  impl->connect_links = std::move(environment.connect_links);
  impl->last_collective_end = impl->clock->now();
  TRIB_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

Worker::Worker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Worker::~Worker() {
  if (!impl_->left) (void)leave();
}

int Worker::rank() const { return impl_->position().rank; }
int Worker::size() const { return impl_->position().size; }
std::uint64_t Worker::epoch() const { return impl_->position().epoch; }
double Worker::predicted_all_reduce_seconds(std::size_t bytes,
                                            algorithms::AllReduceAlgorithm algorithm) const {
  std::lock_guard call(impl_->call_mu);
  const algorithms::ZoneLayout& layout = impl_->ctx->layout;
  if (algorithm == algorithms::AllReduceAlgorithm::kAuto) {
    algorithm = impl_->cost_model.choose(layout, bytes);
  }
  return impl_->cost_model.predict(algorithm, layout, bytes);
}
std::uint64_t Worker::member_id() const { return impl_->client->member_id(); }
std::uint16_t Worker::data_port() const { return impl_->data_plane->port(); }
std::uint16_t Worker::metrics_port() const { return impl_->metrics ? impl_->metrics->port() : 0; }

void Worker::register_state(const std::string& name, std::span<std::byte> bytes) {
  impl_->state[name] = bytes;
}
Result<BoundaryOutcome> Worker::step_boundary() { return impl_->step_boundary(); }
void Worker::drain() { impl_->drain_requested = true; }
bool Worker::draining() const { return impl_->drain_requested.load(); }
std::uint64_t Worker::step() const { return impl_->step; }

Result<Outcome> Worker::all_reduce_compressed(float* data, std::size_t count, ReduceOp op,
                                              std::uint64_t tensor_id, std::uint64_t step,
                                              std::span<const TensorMatrix> matrices,
                                              std::uint64_t* wire_bytes) {
  Impl& im = *impl_;
  std::lock_guard call(im.call_mu);
  std::vector<compression::MatrixShape> shapes;
  for (const auto& m : matrices) shapes.push_back({m.offset, m.rows, m.cols});
  // The residuals change only if the collective commits (docs/compression.md): every run
  // under the attempt starts from the residuals as they were before the call, an attempt
  // aborted after the agreement round leaves no error feedback behind, and one the
  // coordinator commits keeps it.
  compression::collectives::CompressionAttempt attempt(im.compression_state, tensor_id);
  std::optional<compression::collectives::CompressionAttempt> wan_attempt;
  if (im.wan_plan) wan_attempt.emplace(im.wan_compression_state, tensor_id);
  compression::collectives::CompressionStats stats;
  const std::size_t bytes = count * sizeof(float);
  auto r = im.run("all_reduce_compressed", Impl::AlgorithmChoice::kNone, bytes,
                  std::as_writable_bytes(std::span(data, count)),
                  [&](algorithms::Link& link, const algorithms::CollectiveOptions& o) {
                    stats = {};
                    compression::collectives::CompressionContext ctx;
                    ctx.plan = &im.plan;
                    ctx.state = &im.compression_state;
                    ctx.attempt = &attempt;
                    ctx.tensor_id = tensor_id;
                    ctx.step = step;
                    ctx.seed = im.config.codec_seed;
                    ctx.shapes = shapes;
                    ctx.stats = &stats;
                    compression::collectives::CompressionContext wan = ctx;
                    if (im.wan_plan) {
                      wan.plan = &*im.wan_plan;
                      wan.state = &im.wan_compression_state;
                      wan.attempt = &*wan_attempt;
                      ctx.wan = &wan;
                    }
                    algorithms::CollectiveOptions forced = o;
                    forced.algorithm = im.config.algorithm;  // kAuto: flat or by zone
                    return compression::collectives::compressed_all_reduce(link, data, count, op,
                                                                           ctx, forced);
                  });
  if (r) attempt.commit();  // otherwise the attempts' destructors roll them back
  if (r && wan_attempt) wan_attempt->commit();
  if (r && wire_bytes != nullptr) *wire_bytes = stats.wire_bytes_sent + stats.cross_zone_wire_bytes;
  return r;
}

void Worker::abort(const Status& why) {
  Impl& im = *impl_;
  {
    std::lock_guard lock(im.abort_mu);
    if (im.aborted.load()) return;
    im.abort_reason = why;
    im.aborted = true;
  }
  // As on_control_news() does for a newer view: abort (never reset) the link a call may be using;
  // its thread drops it.
  im.data_plane->cancel_connect(std::numeric_limits<std::uint64_t>::max());
  std::lock_guard lock(im.link_mu);
  if (im.ctx->link) im.ctx->link->abort(error(StatusCode::kAborted, why.to_string()));
}

Status Worker::leave() {
  Impl& im = *impl_;
  if (im.left) return Status::ok();
  Status moved;
  {
    // No call and no idle move runs meanwhile (the idle recovery only tries the lock).
    std::lock_guard call(im.call_mu);
    if (im.client) {
      moved = im.move_before_leaving(Deadline::after(im.config.recovery_timeout));
      if (!moved.is_ok()) {
        im.log.warn("leaving without moving to the newer view first: " + moved.to_string());
      }
    }
    im.stop_listening();  // and the idle recovery, before `left` changes under it
  }
  im.left = true;
  im.settle_link(im.config.stall_timeout);
  im.drop_link(error(StatusCode::kAborted, "worker left"));
  if (!im.client) return Status::ok();
  // A coordinator that did not answer that Leave would not answer another in time either.
  if (moved.code() == StatusCode::kTimedOut) return moved;
  return im.client->leave(Deadline::after(std::chrono::seconds(5)));
}

// A member that returned a small all-reduce without the agreement round may be the only
// holder of its result while a peer's attempt of it failed (docs/fault-tolerance.md,
// "Leaving with a returned result"). Its Leave says so; while a view it has not adopted is
// pending, the coordinator does not let it go, and it moves into that view (Ready, Go,
// the repair that hands the copy over) and asks again. Returns once the coordinator took
// the Leave (ok) or when the member cannot move (the caller then leaves regardless).
Status Worker::Impl::move_before_leaving(Deadline deadline) {
  for (;;) {
    if (!machine.result_copy().held || evicted.load() || aborted.load()) {
      return Status::ok();  // nothing a peer could need: the plain Leave below
    }
    settle_link(config.stall_timeout);  // as before any Leave: peers read what it sent
    const Status asked = client->leave(earlier(deadline, Deadline::after(std::chrono::seconds(5))),
                                       membership::LeaveTerms{ctx->epoch(), true});
    if (asked.code() != StatusCode::kUnavailable) return asked;
    log.info(asked.message());
    if (deadline.passed()) return asked;
    TRIB_RETURN_IF_ERROR(transition(deadline));
  }
}

}  // namespace tributary::agent
