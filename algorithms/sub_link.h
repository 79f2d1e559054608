// A Link over a subset of another link's ranks: the groups of a hierarchical collective
// (a zone, the owners of one shard across zones) as Links of their own, so the existing
// algorithms run on them unchanged.
//
// Rank i of the sub-link is parent rank members[i]; tags pass through unchanged, so the
// caller keeps the sub-collectives' tags apart (distinct seqs or slots) where the same
// pair of ranks could meet in two of them. Waits, errors and deadlines are the parent's:
// an error on the parent (a dead peer anywhere, an abort from the watcher) fails the
// sub-link's waits, and abort() aborts the parent (errors are fatal to the whole epoch's
// link anyway, link.h). Holds a reference: the parent must outlive it. Same threading as
// the parent: one thread issues operations.
#pragma once

#include <vector>

#include "algorithms/link.h"

namespace tributary::algorithms {

class SubLink final : public Link {
 public:
  // `members`: distinct parent ranks, including parent.rank().
  SubLink(Link& parent, std::vector<int> members);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  Handle send(int peer, Tag tag, std::span<const std::byte> data) override;
  Handle recv(int peer, Tag tag, std::span<std::byte> data) override;
  Status wait(Handle handle, Deadline deadline) override { return parent_.wait(handle, deadline); }
  void abort(const Status& reason) override { parent_.abort(reason); }
  bool combines() const override { return parent_.combines(); }
  Handle recv_combine(int peer, Tag tag, std::span<std::byte> data, const Combine& c) override;

 private:
  int parent_rank(int peer) const;

  Link& parent_;
  std::vector<int> members_;
  int rank_ = -1;
};

}  // namespace tributary::algorithms
