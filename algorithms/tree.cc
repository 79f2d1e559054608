#include "algorithms/tree.h"

#include <algorithm>

#include "core/check.h"
#include "core/reduce.h"

namespace tributary::algorithms {
namespace {

constexpr int kUp = 0;
constexpr int kDown = 1;

}  // namespace

TreePipeline::TreePipeline(const ReduceJob& job, const TreeNode& node, Range range, int tree_id)
    : job_(job),
      node_(node),
      range_(range),
      tree_id_(tree_id),
      chunks_(num_chunks(range.count, job.chunk_elements)),
      // Long enough for a chunk to climb to the root and come back before this node
      // waits for it, so waiting for chunk c-lag rarely stalls sending chunk c up.
      lag_(node.parent < 0 ? 0 : 2 * static_cast<std::size_t>(floor_log2(job.link.size())) + 2),
      // Children run up to their lag ahead of this node; posting that far ahead lets
      // their chunks land in staging instead of arriving unexpected.
      depth_(std::max<std::size_t>(
          1, std::min(chunks_, 2 * static_cast<std::size_t>(floor_log2(job.link.size())) + 4))),
      slot_bytes_(std::min(job.chunk_elements, range.count) * job.element_size()),
      down_sends_(job.link, job.deadline) {
  if (node_.num_children > 0 && chunks_ > 0) {
    staging_ = Scratch(static_cast<std::size_t>(node_.num_children) * depth_ * slot_bytes_);
    for (auto& r : child_recvs_) r.resize(depth_);
  }
}

std::size_t TreePipeline::iterations() const { return chunks_ == 0 ? 0 : chunks_ + lag_; }

Tag TreePipeline::tag(std::size_t chunk, int direction) const {
  return job_.tags.at(static_cast<std::uint64_t>(chunk) * 4 +
                      static_cast<std::uint64_t>(tree_id_) * 2 +
                      static_cast<std::uint64_t>(direction));
}

std::byte* TreePipeline::staging(int child, std::size_t chunk) {
  return staging_.data() +
         (static_cast<std::size_t>(child) * depth_ + chunk % depth_) * slot_bytes_;
}

Status TreePipeline::step(std::size_t iteration) {
  if (iteration < chunks_) TRIB_RETURN_IF_ERROR(up(iteration));
  if (iteration >= lag_ && iteration - lag_ < chunks_) TRIB_RETURN_IF_ERROR(down(iteration - lag_));
  return Status::ok();
}

void TreePipeline::post_children(std::size_t chunk) {
  const std::size_t es = job_.element_size();
  const Range r = chunk_of(range_, job_.chunk_elements, chunk);
  const std::size_t bytes = r.count * es;
  for (int c = 0; c < node_.num_children; ++c) {
    if (c == 0 && job_.link.combines()) {
      // The first child's chunk is reduced with this rank's own as it lands in recv: its
      // region is nobody else's until this chunk goes up (the second child's is reduced
      // into that result, so it stays staged).
      child_recvs_[c][chunk % depth_] = job_.link.recv_combine(
          node_.children[c], tag(chunk, kUp),
          std::span<std::byte>(job_.recv + r.begin * es, bytes),
          Combine{job_.send + r.begin * es, job_.dtype, job_.op, false});
      continue;
    }
    child_recvs_[c][chunk % depth_] = job_.link.recv(
        node_.children[c], tag(chunk, kUp), std::span<std::byte>(staging(c, chunk), bytes));
  }
}

Status TreePipeline::up(std::size_t chunk) {
  const std::size_t es = job_.element_size();
  const Range r = chunk_of(range_, job_.chunk_elements, chunk);
  const std::byte* mine = job_.send + r.begin * es;
  std::byte* out = job_.recv + r.begin * es;
  const std::byte* result = mine;
  if (node_.num_children > 0) {
    // depth_ chunks are posted ahead: chunk + depth_ - 1 goes into the slot that chunk - 1
    // finished with.
    if (chunk == 0) {
      for (std::size_t k = 0; k + 1 < depth_; ++k) post_children(k);
    }
    if (chunk + depth_ - 1 < chunks_) post_children(chunk + depth_ - 1);
    TRIB_RETURN_IF_ERROR(wait_or_abort(job_.link, child_recvs_[0][chunk % depth_], job_.deadline));
    if (!job_.link.combines()) reduce_to(out, mine, staging(0, chunk), r.count, job_.dtype, job_.op);
    if (node_.num_children == 2) {
      TRIB_RETURN_IF_ERROR(
          wait_or_abort(job_.link, child_recvs_[1][chunk % depth_], job_.deadline));
      reduce_into(out, staging(1, chunk), r.count, job_.dtype, job_.op);
    }
    result = out;
  }
  if (node_.parent < 0) {
    TRIB_CHECK(result == out) << "a root without children cannot reduce";
    if (job_.op == ReduceOp::kAvg) scale_by_count(out, r.count, job_.dtype, job_.link.size());
    return Status::ok();
  }
  const Link::Handle sent = job_.link.send(node_.parent, tag(chunk, kUp),
                                           std::span<const std::byte>(result, r.count * es));
  // The reduced chunk can only come down after the parent has what was just sent, so its
  // receive is posted now and the payload lands in place instead of arriving unexpected.
  const Link::Handle down =
      job_.link.recv(node_.parent, tag(chunk, kDown), std::span<std::byte>(out, r.count * es));
  up_sends_.push_back({sent, down});
  return Status::ok();
}

Status TreePipeline::down(std::size_t chunk) {
  const std::size_t es = job_.element_size();
  const Range r = chunk_of(range_, job_.chunk_elements, chunk);
  std::byte* out = job_.recv + r.begin * es;
  if (node_.parent >= 0) {
    // The up-send of this chunk may read `out` (interior nodes, in-place leaves): it has
    // completed before `out` is forwarded or returned.
    TRIB_CHECK(!up_sends_.empty()) << "chunk " << chunk << " came down before going up";
    const InFlight f = up_sends_.front();
    up_sends_.pop_front();
    TRIB_RETURN_IF_ERROR(wait_or_abort(job_.link, f.up_send, job_.deadline));
    TRIB_RETURN_IF_ERROR(wait_or_abort(job_.link, f.down_recv, job_.deadline));
  }
  for (int c = 0; c < node_.num_children; ++c) {
    TRIB_RETURN_IF_ERROR(down_sends_.add(job_.link.send(
        node_.children[c], tag(chunk, kDown), std::span<const std::byte>(out, r.count * es))));
  }
  return Status::ok();
}

Status TreePipeline::finish() {
  TRIB_CHECK(up_sends_.empty()) << up_sends_.size() << " chunks never came down";
  return down_sends_.drain();
}

Status tree_all_reduce(const ReduceJob& job) {
  const TreeNode node = heap_tree_node(job.link.rank(), job.link.size(), false);
  TreePipeline tree(job, node, Range{0, job.count}, 0);
  for (std::size_t i = 0; i < tree.iterations(); ++i) TRIB_RETURN_IF_ERROR(tree.step(i));
  return tree.finish();
}

}  // namespace tributary::algorithms
