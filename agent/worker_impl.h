// Worker::Impl, shared by the Worker's parts: its lifecycle (worker.cc: joining, the
// control listener, step boundaries, the state sync, leaving), the driver that carries out the
// epoch machine's decisions for run() and transition() (worker_driver.cc; the protocol of
// docs/fault-tolerance.md is agent/runtime/epoch_machine.h), and the collective API built
// on run() (worker_collectives.cc). Internal to agent/.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/agent_metrics.h"
#include "agent/attempt_deadline.h"
#include "agent/boundary_vote.h"
#include "agent/data_plane.h"
#include "agent/runtime/epoch_machine.h"
#include "agent/view_context.h"
#include "agent/worker.h"
#include "algorithms/cost_model.h"
#include "algorithms/cost_refit.h"
#include "algorithms/zone_layout.h"
#include "compression/collectives/compressed_all_reduce.h"
#include "control_client/control_plane.h"
#include "core/hash.h"
#include "core/log.h"
#include "transport/failover_link.h"

namespace tributary::agent {

class Worker::Impl {
 public:
  explicit Impl(WorkerConfig config) : config(std::move(config)) {}
  ~Impl() { stop_listening(); }

  Status start();

  // One attempt of a collective on the current epoch's link.
  using CollectiveFn =
      std::function<Status(algorithms::Link& link, const algorithms::CollectiveOptions& options)>;

  // What run() does about an all-reduce algorithm.
  enum class AlgorithmChoice : std::uint8_t {
    kNone,        // the collective resolves its own (or has none): options.algorithm is kAuto
    kPerAttempt,  // the user's all-reduce: pick() chooses for each attempt's view (members
                  // that chose for different views would fail each other's checks), the
                  // choice is logged and labels the metrics, its data phase feeds the refit
  };

  // Runs one collective: the epoch machine decides (attempts, the commit round, recovery,
  // the repair step), the driver (worker_driver.cc) carries it out. `input` is the caller's
  // send buffer when the collective writes over it (in-place): it is stashed and restored
  // before a re-run. `retry` = false makes failures return instead of re-running (the
  // state sync decides for itself). `reduced`: the collective is an all-reduce and writes
  // its result there (every member's result depends on every member's input, which is
  // what lets a small one return without the commit round: docs/fault-tolerance.md,
  // "Small all-reduces"); empty for the others.
  // The caller holds call_mu (step_boundary, the state sync, the compressed all-reduce);
  // call() takes it for a collective of the public API.
  Result<Outcome> run(std::string_view op, AlgorithmChoice choice, std::size_t bytes,
                      std::span<std::byte> input, const CollectiveFn& fn, bool retry = true,
                      std::span<std::byte> reduced = {});
  Result<Outcome> call(std::string_view op, AlgorithmChoice choice, std::size_t bytes,
                       std::span<std::byte> input, const CollectiveFn& fn, bool retry = true,
                       std::span<std::byte> reduced = {}) {
    std::lock_guard lock(call_mu);
    return run(op, choice, bytes, input, fn, retry, reduced);
  }

  // Metrics of one attempt of a collective (and, now and then, of the links).
  void record_attempt(std::string_view op, std::string_view algorithm, const Status& status,
                      double seconds);
  // Tells the coordinator the paths of the current links (`tributary status`): after each
  // connect, and when a pair moved. The worker's thread.
  void report_links();
  // A federated round's attempt of `op` (`what`: "round 3") in view `epoch` failed with
  // `status`: drops the epoch's links, reports the failure unless a newer view overtook
  // it, logs.
  void attempt_failed(std::string_view op, const std::string& what, membership::Epoch epoch,
                      const Status& status);

  // A federated round (worker_federated.cc, docs/federated.md).
  Result<FederatedOutcome> federated_round(float* data, std::size_t count,
                                           const FederatedRound& round);

  // Moves to a view newer than the current one (the machine's move(): Ready/Go with the
  // coordinator, quorum, new links, the repair step), outside a call.
  Status transition(Deadline deadline);
  // Worker::leave(): moves into views the coordinator says a peer may need this member's
  // returned result in, until it takes the Leave.
  Status move_before_leaving(Deadline deadline);

  // The driver (worker_driver.cc): carries the machine's actions out until it ends the
  // call or move, and returns that end action.
  struct CallContext;
  runtime::Action drive(runtime::Actions actions, CallContext* call);
  void apply(const runtime::Action& effect, CallContext* call);
  runtime::Actions carry_out(const runtime::Action& wait, CallContext* call);
  runtime::Actions attempt(const runtime::Action& run, CallContext& call);
  void attempt_ended(CallContext& call, const Status& status,
                     std::chrono::steady_clock::time_point t1);
  // Posts what other threads learned (a newer view, eviction, abort, shutdown) to the
  // machine before it decides.
  void sync_machine();
  // The machine's time is the Worker's clock (`clock`, WorkerEnvironment::clock): every
  // deadline it decides by (the move's, the view nudges, the connect's) is on it, so a
  // test that drives the clock drives them. The waits that carry a deadline out are real
  // (sockets, the control plane) and get what remains of it on that clock.
  TimePoint machine_now() const { return clock->now(); }
  Deadline real_deadline(TimePoint machine_until) const;
  TimePoint machine_deadline(Deadline real) const;

  // The view's cost model (worker_links.cc). Right after a view's links come up, on every
  // member: orders the ring (order_ring()), measures the ordered ring's links and fits the
  // cost model to the slowest (algorithms/link_probe.h), into the view's context (its
  // `ring_order` and `fitted`). A failure is the new links'.
  Status fit_links();
  // When the view's members span more than one host label (4 to kRingOrderMaxRanks of
  // them): measures every pair and returns the ring order by bandwidth
  // (algorithms/ring_order.h); otherwise, or when that is the identity, none (empty). A
  // view that only lost members reuses the last measurement when every member agrees to
  // (pair_matrix()).
  Result<std::vector<int>> order_ring();
  // The view's pair bandwidths: from the last measurement when every member holds one
  // that covers the view (the same one: they agree on it first), else measured now.
  Result<std::vector<double>> pair_matrix();

  // The refit of the cost model as collectives run (docs/algorithms.md): this member's
  // two fields of the step boundary's all-reduce (its fit of alpha and beta over `refit`,
  // negated, or 0 for none), and what every member of the view does with their max.
  bool refit_enabled() const;
  // This member's refit of the cost model into its boundary vote (none when refits are
  // off or there is no fit yet), and the members' agreed refit adopted.
  void vote_refit(BoundaryVote* vote) const;
  void adopt_refit(const BoundaryVote& agreed);

  Result<BoundaryOutcome> step_boundary();
  // The state sync at a boundary: every member takes part; joiners receive.
  struct StateSync {
    int root = -1;  // the rank whose state everyone holds now
    std::uint64_t bytes = 0;
    Sha256Digest digest{};
  };
  Result<StateSync> sync_state();

  // The view's context (view_context.h) is replaced by adopt_view() and its link set by
  // install_link() and dropped by drop_link(), each under link_mu: on_control_news()
  // reads the context's epoch and aborts its link from the control plane's thread.
  void adopt_view(const membership::View& view, int rank) {
    auto next = std::make_unique<ViewContext>(view, rank);
    std::lock_guard lock(link_mu);
    if (ctx->link)
      ctx->link->abort(
          error(StatusCode::kAborted, "superseded by view " + std::to_string(view.epoch)));
    ctx = std::move(next);
  }
  void install_link(std::unique_ptr<algorithms::Link> l) {
    std::lock_guard lock(link_mu);
    ctx->link = std::move(l);
  }
  // Before leaving on purpose: the peers acknowledge what this member sent them (a
  // failover link keeps it until then, and a peer that sees every path close before it
  // read the last message would fail its step). Bounded; a plain link returns at once.
  // On the worker's thread, the only one that replaces `link`, so without link_mu: the
  // listener may abort the link meanwhile (abort is thread-safe and ends the drain) instead
  // of waiting out the drain for the lock.
  void settle_link(Duration within) {
    if (ctx->link) (void)transport::drain(*ctx->link, Deadline::after(within));
  }
  void drop_link(const Status& why) {
    std::lock_guard lock(link_mu);
    if (ctx->link) {
      ctx->link->abort(why);
      ctx->link.reset();
    }
  }

  AttemptDeadline collective_deadline(std::size_t bytes,
                                      std::chrono::steady_clock::time_point now) const {
    return attempt_deadline(now, bytes, throughput, config.deadline_floor, config.deadline_slack,
                            config.collective_timeout);
  }
  AttemptDeadline collective_deadline(std::size_t bytes) const {
    return collective_deadline(bytes, std::chrono::steady_clock::now());
  }

  // Under call_mu (an attempt of run()).
  algorithms::AllReduceAlgorithm pick(std::size_t bytes) const {
    if (config.algorithm != algorithms::AllReduceAlgorithm::kAuto) return config.algorithm;
    if (picks.epoch != ctx->epoch() || picks.model_version != cost_model_version) {
      picks = {.epoch = ctx->epoch(), .model_version = cost_model_version};
    }
    for (std::size_t i = 0; i < picks.used; ++i) {
      if (picks.entries[i].bytes == bytes) return picks.entries[i].algorithm;
    }
    const algorithms::AllReduceAlgorithm a = cost_model.choose(ctx->layout, bytes);
    picks.entries[picks.next] = {bytes, a};
    picks.next = (picks.next + 1) % picks.entries.size();
    picks.used = std::max(picks.used, picks.next == 0 ? picks.entries.size() : picks.next);
    return a;
  }
  // The only way cost_model changes, so that pick() never answers from another model.
  void set_cost_model(const algorithms::CostModel& m) {
    cost_model = m;
    ++cost_model_version;
  }
  // Logs the first all-reduce of each algorithm in each view, so the log says what the
  // cost model chose (flat or hierarchical by zone) without a line per collective.
  void note_algorithm(algorithms::AllReduceAlgorithm a, std::size_t bytes) {
    if (algorithms_logged_epoch != ctx->epoch()) {
      algorithms_logged = 0;
      algorithms_logged_epoch = ctx->epoch();
    }
    const unsigned bit = 1u << static_cast<unsigned>(a);
    if (algorithms_logged & bit) return;
    algorithms_logged |= bit;
    log.logf(LogLevel::kInfo, "all_reduce of %zu bytes over %d members in %d zone(s) runs %s%s",
             bytes, ctx->size(), ctx->layout.zones(), std::string(to_string(a)).c_str(),
             config.algorithm == algorithms::AllReduceAlgorithm::kAuto ? " (cost model)" : "");
  }
  membership::Epoch algorithms_logged_epoch = 0;
  unsigned algorithms_logged = 0;  // bit per AllReduceAlgorithm logged in that epoch

  // Held by every call of the public API on the user's thread (once: what runs inside a
  // call, like step_boundary's collectives, uses run() under it) and by the idle recovery
  // below, so that the two never move the view at once; it guards the epoch machine.
  std::mutex call_mu;

  // What rank(), size() and epoch() report: the view this member adopted last, published
  // by transition() as it adopts one. Not under call_mu, so that another thread asking
  // (a logger, the torch backend) is not held for the length of a move between calls; it
  // sees the view being left until the next one is adopted.
  struct Position {
    int rank = -1;
    int size = 0;
    std::uint64_t epoch = 0;
  };
  Position position() const {
    std::lock_guard lock(position_mu);
    return shown;
  }
  void publish_position() {
    std::lock_guard lock(position_mu);
    shown = {ctx->rank, ctx->size(), ctx->epoch()};
  }
  mutable std::mutex position_mu;
  Position shown;  // guarded by position_mu
  // Idle recovery: a newer view needs this member's Ready (and maybe its copy, for the
  // repair) while its user thread is between calls, possibly for a long compute phase. A
  // member that returned a small all-reduce early is often exactly there when the others
  // fail. This thread, the agent's only one, moves it to the view (transition()) when no
  // call is running; on_control_news() wakes it.
  std::thread idle_recovery;
  std::mutex idle_mu;
  std::condition_variable idle_cv;
  bool idle_wake = false;                     // guarded by idle_mu
  std::atomic<bool> idle_transitioning{false};
  std::atomic<std::uint64_t> adopted_epoch{0};  // ctx->epoch(), readable without call_mu
  void wake_idle_recovery() {
    {
      std::lock_guard lock(idle_mu);
      idle_wake = true;
    }
    idle_cv.notify_one();
  }
  void run_idle_recovery();

  WorkerConfig config;
  // The agent's log: its context (member id once joined, the epoch of every adopted view)
  // is shared by the children handed to the data plane ("link") and the control plane
  // ("control").
  Logger log{"agent"};
  std::unique_ptr<AgentMetrics> metrics;
  std::unique_ptr<DataPlane> data_plane;
  // The coordinator, through a CoordinatorClient that start() creates unless one was given.
  std::unique_ptr<control_client::ControlPlane> client;
  // WorkerEnvironment::connect_links (tests); empty: data_plane connects each view.
  std::function<Result<std::unique_ptr<algorithms::Link>>(std::uint64_t, int, int)>
      connect_links;

  // Compression: the plan parsed once from config.codec, and the residuals of every
  // tensor, kept across views (a new Worker after an eviction starts without them).
  compression::collectives::CompressionPlan plan;
  compression::collectives::CompressionState compression_state;
  // The slow tier (config.wan_codec), its residuals, and the shard they belong to.
  std::optional<compression::collectives::CompressionPlan> wan_plan;
  compression::collectives::CompressionState wan_compression_state;
  // The shard those residuals belong to: {zones, shards, zone, local index} of the last
  // view started (adopt_wan_tier()).
  std::vector<int> wan_shard;
  // A view changed: the slow tier's residuals are this member's shard's; they are kept
  // while it owns the same shard of the same split, dropped otherwise (docs/zones.md).
  void adopt_wan_tier() {
    if (!wan_plan) return;
    const algorithms::ZoneLayout& layout = ctx->layout;
    const int rank = ctx->rank;
    const int shards = compression::collectives::two_tier_shards(*wan_plan, layout);
    std::vector<int> shard = {layout.zones(), shards, layout.zone_of(rank),
                              layout.local_index(rank)};
    if (!wan_shard.empty() && shard != wan_shard) wan_compression_state.on_rejoin();
    wan_shard = std::move(shard);
    if (layout.local_index(rank) < shards) {
      wan_compression_state.on_view_change(layout.zones(), layout.zone_of(rank));
    }
  }

  // The view this member is in and what was built for it (view_context.h): replaced
  // whole by adopt_view(), never null. Written on the thread that holds call_mu, under
  // link_mu; read there without it.
  std::unique_ptr<ViewContext> ctx = std::make_unique<ViewContext>();
  // The default, with config's inter-zone link (start()); cost_model is the view's fitted
  // one (ViewContext::fitted) from its start on or, after a step boundary's refit, that
  // with the alpha and beta the members agreed on (adopt_refit()). Equal on every member
  // of a view.
  algorithms::CostModel configured_cost_model;
  algorithms::CostModel cost_model;  // written through set_cost_model()
  std::uint64_t cost_model_version = 0;
  // pick()'s answers for the sizes seen since the view or the model last changed: a training
  // loop's all-reduces repeat a few bucket sizes, and pricing every algorithm again cost
  // about a twentieth of a 4 KiB all-reduce over shared memory. The same answers as
  // choose(), so every member still chooses alike.
  struct PickMemo {
    membership::Epoch epoch = 0;
    std::uint64_t model_version = 0;
    struct Entry {
      std::size_t bytes = 0;
      algorithms::AllReduceAlgorithm algorithm = algorithms::AllReduceAlgorithm::kAuto;
    };
    std::array<Entry, 8> entries{};
    std::size_t used = 0;
    std::size_t next = 0;
  };
  mutable PickMemo picks;
  // This member's all-reduces that completed in the current view (cleared as it starts).
  algorithms::CostRefit refit;
  // The last pair measurement (order_ring()): the epoch of the view it ran in, that view's
  // member ids by rank, and its matrix (the same on every member that ran it).
  struct PairMeasurement {
    std::uint64_t epoch = 0;  // 0: none
    std::vector<std::uint64_t> ids;
    std::vector<double> matrix;
  };
  PairMeasurement pairs;
  std::mutex link_mu;  // guards the replacement of `ctx` and its link (on_control_news reads both)
  // The newest epoch up to which every view after the link's own only let leavers go, each
  // told in turn (on_control_news); guarded by link_mu.
  std::uint64_t leaves_only_through = 0;

  // The agent's side of the epoch protocol: sequence numbers, commit-through, the private
  // copy of a speculative return, the call in progress and the move to a view. Guarded by
  // call_mu; `ctx` above is built from its view when it adopts one.
  runtime::EpochMachine machine{runtime::MachineConfig{}};
  std::unique_ptr<algorithms::Link> connecting;  // a view's links between connect and install
  double throughput = 100e6;         // bytes/s, EWMA over successful collectives
  int collectives_since_sync = 0;
  std::uint64_t path_changes_synced = 0;  // DataPlane::path_change_total() at the last sync
  std::uint64_t path_changes_reported = 0;  // ... at the last report_links()

  // Federated rounds: residuals of late updates by tensor id (LatePolicy::kFoldIntoResidual),
  // and whether this step ran a round (its step timing is then not reported: the straggler
  // policy does not judge federated lateness).
  std::map<std::uint64_t, std::vector<float>> federated_residuals;
  bool step_federated = false;

  // Elasticity.
  std::map<std::string, std::span<std::byte>> state;
  std::atomic<bool> drain_requested{false};
  std::uint64_t step = 0;
  // Step timing and the epoch machine's time (WorkerEnvironment::clock).
  const Clock* clock = &SteadyClock::instance();
  TimePoint last_collective_end{};                // on `clock`; set by start()
  // The longest stretch this step spent outside collectives (computing): the straggler
  // policy's input, reported at the next step boundary.
  double step_compute_seconds = 0;
  double seconds_since_last_collective() const {
    return std::chrono::duration<double>(clock->now() - last_collective_end).count();
  }

  // What the control plane tells as it arrives (ControlPlane::set_view_listener), on its
  // thread: a newer view or this member's eviction. It only posts: the newest epoch (and
  // the eviction) for the machine to read before it decides, the abort of links a newer
  // view made moot (a link abort is thread-safe and is what ends a wait on it), and a
  // wake of the idle recovery.
  void on_control_news(const Result<membership::View>& news);
  // The listener and the idle recovery: from the first view on (start()) until the
  // member leaves (stop_listening(), which returns once neither acts any more).
  void start_listening();
  void stop_listening();
  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> newest_epoch{0};  // only grows: note_newest_epoch()
  void note_newest_epoch(std::uint64_t epoch) {
    std::uint64_t seen = newest_epoch.load();
    while (seen < epoch && !newest_epoch.compare_exchange_weak(seen, epoch)) {
    }
  }
  std::atomic<bool> evicted{false};
  // Worker::abort(): set once, from any thread, with its reason.
  std::atomic<bool> aborted{false};
  mutable std::mutex abort_mu;
  Status abort_reason;  // guarded by abort_mu
  Status aborted_status() const {
    std::lock_guard lock(abort_mu);
    return error(StatusCode::kAborted, "aborted: " + abort_reason.message());
  }
  std::string
      eviction;  // why (the coordinator's reason); written by on_control_news() before `evicted`
  Status evicted_status() const {
    return error(StatusCode::kEvicted,
                 eviction.empty() ? "the coordinator removed this member" : eviction);
  }
  bool left = false;
};

}  // namespace tributary::agent
