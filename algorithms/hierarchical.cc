// Hierarchical all-reduce: reduce-scatter in the zone, cross-zone phase per shard,
// all-gather in the zone (hierarchical.h).
#include "algorithms/hierarchical.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "algorithms/all_reduce_impl.h"
#include "algorithms/cost_model.h"
#include "algorithms/in_flight.h"
#include "algorithms/ring.h"
#include "algorithms/sub_link.h"
#include "algorithms/zone_layout.h"
#include "core/reduce.h"

namespace tributary::algorithms {

std::uint64_t cross_zone_seq(std::uint64_t seq) { return seq ^ (std::uint64_t{0xA0} << 56); }

CrossZoneReduce default_cross_zone_reduce(DType dtype, ReduceOp op,
                                          const CollectiveOptions& options) {
  return [dtype, op, &options](Link& cross, std::byte* shard, std::size_t, std::size_t count,
                               std::uint64_t seq) {
    CollectiveOptions o = options;
    o.seq = seq;
    o.zones = {};
    o.algorithm = AllReduceAlgorithm::kAuto;
    const CostModel& model = options.cost_model ? *options.cost_model : CostModel::default_model();
    const CostModel wan = model.cross_zone();
    o.cost_model = &wan;
    return all_reduce(cross, shard, shard, count, dtype, op == ReduceOp::kAvg ? ReduceOp::kSum : op,
                      o);
  };
}

namespace {

// Two zones with the plain cross phase: the owners of a shard swap their zones' partials
// chunk by chunk (each side then combines the two in zone order: zone 0's partial op
// zone 1's, the same bits on both). For two zones this moves what an all-reduce between
// them would (the shard, each way), in one step.
class ShardSwap final : public CrossZoneStream {
 public:
  ShardSwap(const ReduceJob& job) : job_(job), tags_(0, job.tags.check()) {}

  void open(Link& cross, std::uint64_t seq, Range shard, std::size_t chunks) override {
    cross_ = &cross;
    tags_ = TagMaker(seq, job_.tags.check());
    shard_ = shard;
    theirs_.resize(shard.count * job_.element_size());
    const int peer = 1 - cross.rank();
    for (std::size_t c = 0; c < chunks; ++c) {
      const Range r = shard.count ? chunk_of(shard, job_.chunk_elements, c) : shard;
      recvs_.push_back(cross.recv(peer, tags_.at(c), {at(theirs_.data(), r), bytes(r)}));
    }
  }
  Status start(std::size_t c, Range r, std::byte* data) override {
    sends_.push_back(cross_->send(1 - cross_->rank(), tags_.at(c), {data, bytes(r)}));
    return Status::ok();
  }
  Status finish(std::size_t c, Range r, std::byte* mine) override {
    TRIB_RETURN_IF_ERROR(wait_or_abort(*cross_, sends_.at(c), job_.deadline));
    TRIB_RETURN_IF_ERROR(wait_or_abort(*cross_, recvs_.at(c), job_.deadline));
    std::byte* theirs = at(theirs_.data(), r);
    if (cross_->rank() == 0) {
      reduce_into(mine, theirs, r.count, job_.dtype, job_.op);
    } else {
      reduce_into(theirs, mine, r.count, job_.dtype, job_.op);
      if (r.count) std::memcpy(mine, theirs, bytes(r));
    }
    return Status::ok();
  }
  Status close() override { return Status::ok(); }

 private:
  std::size_t bytes(Range r) const { return r.count * job_.element_size(); }
  std::byte* at(std::byte* base, Range r) const {
    return base + (r.begin - shard_.begin) * job_.element_size();
  }

  const ReduceJob& job_;
  Link* cross_ = nullptr;
  TagMaker tags_;
  Range shard_;
  std::vector<std::byte> theirs_;
  std::vector<Link::Handle> recvs_;
  std::vector<Link::Handle> sends_;
};

}  // namespace

Status hierarchical_job(const ReduceJob& job, const ZoneLayout& layout,
                        const CollectiveOptions& options, const CrossZoneReduce* cross,
                        CrossZoneStream* stream, int shard_cap) {
  const int rank = job.link.rank();
  const std::vector<int>& zone = layout.members(layout.zone_of(rank));
  const int k = static_cast<int>(zone.size());
  const int shards = shard_cap > 0 ? std::min(shard_cap, layout.shards()) : layout.shards();
  const int local = layout.local_index(rank);
  const std::size_t es = job.element_size();
  std::vector<Range> blocks(static_cast<std::size_t>(k));
  for (int i = 0; i < k; ++i) {
    blocks[static_cast<std::size_t>(i)] =
        i < shards ? balanced_part(job.count, shards, i) : Range{job.count, 0};
  }
  const Range owned = blocks[static_cast<std::size_t>(local)];
  std::byte* owned_out = job.recv + owned.begin * es;
  const bool crosses = layout.zones() > 1 && local < shards;

  // Phase 2's form: a stream between two zones (the caller's, or the plain swap), else one
  // call on the whole shard (the caller's, or an all_reduce among the owners).
  std::optional<SubLink> cross_link;
  std::optional<ShardSwap> swap;
  CrossZoneReduce plain;
  if (crosses) {
    cross_link.emplace(job.link, layout.cross_group(local));
    if (layout.zones() != 2) stream = nullptr;
    if (stream == nullptr && cross == nullptr && layout.zones() == 2) stream = &swap.emplace(job);
    if (stream == nullptr && cross == nullptr) {
      plain = default_cross_zone_reduce(job.dtype, job.op, options);
      cross = &plain;
    }
  } else {
    stream = nullptr;
  }
  const std::size_t chunks = num_messages(owned.count, job.chunk_elements);
  auto chunk = [&](std::size_t c) {
    return owned.count ? chunk_of(owned, job.chunk_elements, c) : owned;
  };
  if (stream) stream->open(*cross_link, cross_zone_seq(job.tags.at(0).seq), owned, chunks);

  SubLink zone_link(job.link, zone);
  const ReduceJob zone_job{zone_link, job.send,           job.recv,     job.count, job.dtype,
                           job.op,    job.chunk_elements, job.deadline, job.tags};
  SendWindow sends(zone_link, job.deadline);
  // As in the flat ring, the all-gather's receives are posted first: block b returns only
  // after its owner has the whole zone's partial, i.e. after this rank sent its own.
  std::optional<RingAllGather> gather;
  auto on_owned = [&](std::size_t c, Range r) {
    return stream ? stream->start(c, r, job.recv + r.begin * es) : Status::ok();
  };
  if (k > 1) {
    gather.emplace(zone_job, blocks, job.recv, ring_phase_slots(blocks, job.chunk_elements));
    TRIB_RETURN_IF_ERROR(
        ring_reduce_scatter(zone_job, blocks, job.send, job.recv, owned_out, 0, sends, on_owned));
  } else if (job.send != job.recv) {
    std::memcpy(job.recv, job.send, job.count * es);
  }
  auto fail = [&](const Status& st) {
    job.link.abort(st);
    return st;
  };
  if (stream) {
    // The reduce-scatter reports no chunk of an empty block, and a zone of one has none.
    if (k == 1 || owned.count == 0) {
      for (std::size_t c = 0; c < chunks; ++c) {
        if (Status st = on_owned(c, chunk(c)); !st.is_ok()) return fail(st);
      }
    }
    for (std::size_t c = 0; c < chunks; ++c) {
      const Range r = chunk(c);
      if (Status st = stream->finish(c, r, job.recv + r.begin * es); !st.is_ok()) return fail(st);
      if (job.op == ReduceOp::kAvg) {
        scale_by_count(job.recv + r.begin * es, r.count, job.dtype, layout.size());
      }
      if (gather && owned.count) TRIB_RETURN_IF_ERROR(gather->send_own(c, owned_out, sends));
    }
    if (Status st = stream->close(); !st.is_ok()) return fail(st);
  } else {
    if (crosses) {
      const Status st = (*cross)(*cross_link, owned_out, owned.begin, owned.count,
                                 cross_zone_seq(job.tags.at(0).seq));
      if (!st.is_ok()) return fail(st);
    }
    if (job.op == ReduceOp::kAvg) scale_by_count(owned_out, owned.count, job.dtype, layout.size());
  }
  if (gather) TRIB_RETURN_IF_ERROR(gather->run(owned_out, sends));
  return sends.drain();
}

}  // namespace tributary::algorithms
