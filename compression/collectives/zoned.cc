// The two-tier all-reduce (compressed_all_reduce.h, CompressionContext::wan): float32
// inside each zone, the slow tier's codec across zones, on the hierarchical schedule of
// algorithms/hierarchical.h.
#include <optional>
#include <string>

#include "algorithms/cost_model.h"
#include "algorithms/hierarchical.h"
#include "algorithms/zone_layout.h"
#include "compression/collectives/exchange.h"
#include "compression/collectives/schemes.h"

namespace tributary::compression::collectives {
namespace {

// Between two zones with a quantizing codec (float16, bfloat16, qint8, qint4, sign): the
// two owners of a shard each encode their zone's partial chunk by chunk as the zone's
// reduce-scatter finishes it (error feedback over the shard: the slow tier's stage-1
// residual, through its attempt) and send it to the other; each decodes both payloads in
// zone order (decode, then decode-accumulate: Exchange::sum_piece), so both hold the same
// bits. One quantization, and the shard's payload once each way: what the quantized
// scheme moves between two ranks, without its owner round.
class CompressedSwap final : public algorithms::CrossZoneStream {
 public:
  CompressedSwap(const CompressionContext& wan, const algorithms::CollectiveOptions& options,
                 CompressionStats* stats)
      : wan_(wan), options_(options), stats_(stats), codec_(*wan.plan->codec) {}
  ~CompressedSwap() override {
    // Failed or abandoned: the slow tier's state goes back to before the call.
    if (!closed_ && attempt_ != nullptr) attempt_->rollback();
  }

  void open(algorithms::Link& cross, std::uint64_t seq, algorithms::Range shard,
            std::size_t chunks) override {
    cross_ = &cross;
    shard_ = shard;
    const std::uint32_t check =
        descriptor_check(*wan_.plan, shard.count, ReduceOp::kSum, wan_.step, cross.size());
    exchange_.emplace(cross, seq, check, options_.deadline, stats_);
    scratch_ = wan_.state ? &wan_.state->scratch() : &local_scratch_;
    scratch_->bytes_used = 0;
    attempt_ = wan_.attempt;
    if (attempt_ == nullptr && wan_.plan->stateful()) {
      attempt_ = &own_attempt_.emplace(*wan_.state, wan_.tensor_id);
    }
    if (attempt_ != nullptr) attempt_->begin_run(shard.count);
    incoming_.resize(2);
    exchange_->post_pieces(*scratch_, peer(), kStage1, chunks, incoming_[peer_index()]);
    sent_.resize(chunks);
  }

  Status start(std::size_t c, algorithms::Range r, std::byte* data) override {
    const bool ef = wan_.plan->error_feedback && attempt_ != nullptr;
    const std::size_t local = r.begin - shard_.begin;
    std::vector<std::byte>& out = scratch_->next_bytes();
    sent_[c] = &out;
    out.resize(codec_.max_encoded_bytes(r.count));
    EncodeOptions eo = encode_options(wan_, kStage1, cross_->rank(), local);
    if (ef) eo.residual = attempt_->worker_residual(local, r.count);
    if (ef && codec_.wants_momentum()) eo.momentum = attempt_->worker_momentum(local, r.count);
    auto bytes =
        codec_.encode(reinterpret_cast<const float*>(data), DType::kFloat32, r.count, out, eo);
    if (!bytes) return exchange_->fail(bytes.status());
    out.resize(*bytes);
    return exchange_->send(peer(), kStage1, c, out);
  }

  Status finish(std::size_t c, algorithms::Range r, std::byte* data) override {
    return exchange_->sum_piece(codec_, incoming_, c, *sent_[c], reinterpret_cast<float*>(data),
                                r.count);
  }

  Status close() override {
    TRIB_RETURN_IF_ERROR(exchange_->drain());
    closed_ = true;
    if (own_attempt_) own_attempt_->commit();
    return Status::ok();
  }

 private:
  int peer() const { return 1 - cross_->rank(); }
  std::size_t peer_index() const { return static_cast<std::size_t>(peer()); }

  const CompressionContext& wan_;
  const algorithms::CollectiveOptions& options_;
  CompressionStats* stats_;
  const Codec& codec_;
  algorithms::Link* cross_ = nullptr;
  algorithms::Range shard_;
  std::optional<Exchange> exchange_;
  CompressionState::Scratch local_scratch_;
  CompressionState::Scratch* scratch_ = nullptr;
  std::optional<CompressionAttempt> own_attempt_;
  CompressionAttempt* attempt_ = nullptr;
  Exchange::Incomings incoming_;
  std::vector<std::vector<std::byte>*> sent_;
  bool closed_ = false;
};

}  // namespace

int two_tier_shards(const CompressionPlan& wan, const algorithms::ZoneLayout& layout) {
  return wan.kind == CompressionPlan::Kind::kQuantized ? 1 : layout.shards();
}

bool runs_zoned(const CompressionContext& ctx, const algorithms::CollectiveOptions& options,
                std::size_t count, int n) {
  if (ctx.wan == nullptr || options.zones.empty()) return false;
  const algorithms::ZoneLayout layout(options.zones, n);
  if (layout.zones() <= 1) return false;
  if (options.algorithm == algorithms::AllReduceAlgorithm::kHierarchical) return true;
  if (options.algorithm != algorithms::AllReduceAlgorithm::kAuto) return false;
  const algorithms::CostModel& model =
      options.cost_model ? *options.cost_model : algorithms::CostModel::default_model();
  return model.choose(layout, count * sizeof(float)) ==
         algorithms::AllReduceAlgorithm::kHierarchical;
}

Status zoned_all_reduce(algorithms::Link& link, float* data, std::size_t count, ReduceOp op,
                        const CompressionContext& ctx,
                        const algorithms::CollectiveOptions& options) {
  if (ctx.plan->kind != CompressionPlan::Kind::kDense) {
    return error(StatusCode::kInvalidArgument,
                 "compressed_all_reduce: a codec across zones needs float32 inside them, not " +
                     ctx.plan->spec);
  }
  const CompressionContext& wan = *ctx.wan;
  const algorithms::CostModel& model =
      options.cost_model ? *options.cost_model : algorithms::CostModel::default_model();
  const algorithms::CostModel cross_model = model.cross_zone();
  // One cross-zone call per collective (or the stream): its stats are the slow tier's.
  CompressionStats wan_stats;
  const algorithms::CrossZoneReduce cross = [&](algorithms::Link& cross_link, std::byte* shard,
                                                std::size_t, std::size_t shard_count,
                                                std::uint64_t seq) {
    algorithms::CollectiveOptions o = options;
    o.seq = seq;
    o.zones = {};
    o.algorithm = algorithms::AllReduceAlgorithm::kAuto;
    o.cost_model = &cross_model;
    CompressionContext c = wan;
    c.stats = &wan_stats;
    return compressed_all_reduce(cross_link, reinterpret_cast<float*>(shard), shard_count,
                                 ReduceOp::kSum, c, o);
  };
  if (wan.plan->kind == CompressionPlan::Kind::kQuantized) {
    CompressedSwap swap(wan, options, &wan_stats);
    const algorithms::ZoneLayout layout(options.zones, link.size());
    TRIB_RETURN_IF_ERROR(
        algorithms::hierarchical_all_reduce(link, data, data, count, DType::kFloat32, op, options,
                                            cross, swap, two_tier_shards(*wan.plan, layout)));
    if (algorithms::ZoneLayout(options.zones, link.size()).zones() == 2)
      wan_stats.quantizations = 1;
  } else {
    TRIB_RETURN_IF_ERROR(algorithms::hierarchical_all_reduce(link, data, data, count,
                                                             DType::kFloat32, op, options, cross));
  }
  if (ctx.stats) {
    ctx.stats->raw_bytes = count * sizeof(float);
    ctx.stats->cross_zone_wire_bytes = wan_stats.wire_bytes_sent;
    ctx.stats->quantizations = wan_stats.quantizations;
  }
  return Status::ok();
}

}  // namespace tributary::compression::collectives
