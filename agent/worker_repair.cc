// The repair step of a view change (docs/fault-tolerance.md, "Small all-reduces:
// speculative return"): a member that returned a small all-reduce without the commit round
// may leave survivors behind that lack its result; the coordinator's Go then commits it
// (commit_through covers every seq a survivor returned), and before anything else runs in
// the new view, the members that lack it receive a member's private copy, bit for bit.
#include <cstring>
#include <limits>
#include <string>

#include "agent/worker_impl.h"
#include "algorithms/seq_space.h"

namespace tributary::agent {

Result<std::uint64_t> Worker::Impl::repair(std::uint64_t through) {
  if (through == 0) return through;
  const bool hold = result_copy.held && result_copy.seq == through;
  // Lemma 3: a survivor that lacks a result another survivor returned is inside that very
  // call (it returned every earlier one) and has not finished its data phase.
  const bool lack = pending.active && !pending.held && pending.seq == through;
  if (view.size() <= 1) {
    // Alone: whoever returned it is gone (the repair of an earlier view died with it).
    if (!lack || hold) return through;
    if (metrics) metrics->record_result_repair("re-run");
    log.logf(LogLevel::kWarn, "view %llu: seq %llu was committed, but its only holder is gone; it runs again",
             static_cast<unsigned long long>(view.epoch), static_cast<unsigned long long>(through));
    return through - 1;
  }
  std::vector<std::byte> blob;
  if (hold) blob = encode_result_copy(result_copy);
  // One tiny all-reduce (min): the lowest rank holding a copy, whether any member lacks
  // it, and the copy's size.
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
  std::int64_t found[3] = {hold ? rank : kNone, lack ? -1 : 0,
                           hold ? -static_cast<std::int64_t>(blob.size()) : 0};
  algorithms::CollectiveOptions options;
  options.seq = algorithms::seq_in(algorithms::SeqSpace::kRepair, 2 * view.epoch);
  options.deadline = collective_deadline(sizeof(found)).deadline;
  options.chunk_bytes = config.chunk_bytes;
  TRIB_RETURN_IF_ERROR(
      algorithms::all_reduce(*link, found, found, 3, DType::kInt64, ReduceOp::kMin, options));
  if (found[1] == 0) return through;  // nobody lacks it: the common case
  if (found[0] == kNone) {
    // Lemma 3 of the doc: a member that returned `through` keeps its copy until every
    // member returned it. So no member of this view returned it: its returner died after
    // its Ready (or claimed a seq it never returned). Every member runs it again.
    log.logf(LogLevel::kWarn,
             "view %llu: the coordinator committed seq %llu, but no member of the view holds "
             "its result; it runs again",
             static_cast<unsigned long long>(view.epoch), static_cast<unsigned long long>(through));
    if (lack && metrics) metrics->record_result_repair("re-run");
    return through - 1;
  }
  const int root = static_cast<int>(found[0]);
  const auto size = static_cast<std::size_t>(-found[2]);
  if (!hold) blob.resize(size);
  options.seq = algorithms::seq_in(algorithms::SeqSpace::kRepair, 2 * view.epoch + 1);
  options.deadline = collective_deadline(size).deadline;
  TRIB_RETURN_IF_ERROR(
      algorithms::broadcast(*link, blob.data(), blob.data(), size, DType::kUInt8, root, options));
  if (hold) return through;
  ResultCopy received;
  TRIB_RETURN_IF_ERROR(decode_result_copy(blob, through, received));
  if (lack) {
    if (received.bytes.size() != pending.reduced.size()) {
      return error(StatusCode::kMismatch,
                   "seq " + std::to_string(through) + ": rank " + std::to_string(root) +
                       "'s result has " + std::to_string(received.bytes.size()) +
                       " bytes, this member's call " + std::to_string(pending.reduced.size()) +
                       " (not the same all-reduce on every member)");
    }
    std::memcpy(pending.reduced.data(), received.bytes.data(), received.bytes.size());
    pending.repaired = true;
    pending.repaired_epoch = received.epoch;
    pending.repaired_contributors = received.contributors;
    if (metrics) metrics->record_result_repair("received");
    log.logf(LogLevel::kInfo,
             "seq %llu: another member returned it before the failure; received its result "
             "(%zu bytes, view %llu) from rank %d's copy",
             static_cast<unsigned long long>(through), received.bytes.size(),
             static_cast<unsigned long long>(received.epoch), root);
  }
  // Now this member holds it too: a later failure may need this copy to repair another.
  result_copy = std::move(received);
  return through;
}

}  // namespace tributary::agent
