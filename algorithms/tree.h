// The pipelined binary tree behind the tree and double-tree all-reduces.
//
// Positions 0..n-1 form a binary tree in heap order (parent (p-1)/2, children 2p+1 and
// 2p+2), depth floor(log2 n). Position p holds rank p, or rank n-1-p when mirrored: the
// mirrored tree's interior positions [0, n/2) then hold exactly the ranks that are leaves
// of the plain tree, which is what the double tree needs.
//
// A TreePipeline all-reduces one range of the vector along one tree. Each chunk is reduced
// up as own (op) first child (op) second child at every node, in that order, scaled at the
// root for kAvg, and broadcast back down; every rank ends with the root's bits. Up and
// down overlap: a non-root node handles the down-going chunk `lag` chunks behind the one
// it sends up, so many chunks are in the tree at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "algorithms/all_reduce_impl.h"
#include "algorithms/in_flight.h"
#include "algorithms/partition.h"
#include "algorithms/scratch.h"

namespace tributary::algorithms {

struct TreeNode {
  int parent = -1;  // -1 at the root
  int children[2] = {-1, -1};
  int num_children = 0;
};

TreeNode heap_tree_node(int rank, int size, bool mirrored);

class TreePipeline {
 public:
  // `tree_id` (0 or 1) keeps the two trees of a double tree on distinct tag slots.
  TreePipeline(const ReduceJob& job, const TreeNode& node, Range range, int tree_id);

  // Iterations this rank runs; step(i) for i >= iterations() does nothing.
  std::size_t iterations() const;
  Status step(std::size_t iteration);
  // Waits for the sends still in flight.
  Status finish();

 private:
  Status up(std::size_t chunk);
  Status down(std::size_t chunk);
  void post_children(std::size_t chunk);
  Tag tag(std::size_t chunk, int direction) const;
  std::byte* staging(int child, std::size_t chunk);

  const ReduceJob& job_;
  TreeNode node_;
  Range range_;
  int tree_id_;
  std::size_t chunks_;
  std::size_t lag_;
  std::size_t depth_;  // children's chunks whose receives are posted ahead
  std::size_t slot_bytes_;
  Scratch staging_;                           // [child][chunk % depth_] slots of one chunk each
  std::vector<Link::Handle> child_recvs_[2];  // [child][chunk % depth_]
  struct InFlight {
    Link::Handle up_send;    // may read recv's chunk (interior nodes, in-place leaves)
    Link::Handle down_recv;  // posted with the up-send, into the same chunk of recv
  };
  std::deque<InFlight> up_sends_;  // in chunk order, one per chunk not yet come down
  SendWindow down_sends_;
};

}  // namespace tributary::algorithms
