// The trees collectives run along: which ranks are a rank's parent and children.
//
// Every function here is a pure function of values all ranks agree on (rank, size, root,
// number of chunks), so every rank derives the same tree without talking.
#pragma once

#include <cstddef>

namespace tributary::algorithms {

struct TreeNode {
  int parent = -1;  // -1 at the root
  int children[2] = {-1, -1};
  int num_children = 0;
};

// Positions 0..n-1 in heap order (parent (p-1)/2, children 2p+1 and 2p+2), depth
// floor(log2 n). Position p holds rank p, or rank n-1-p when mirrored: the mirrored tree's
// interior positions [0, n/2) then hold exactly the ranks that are leaves of the plain
// tree, which is what the double-tree all-reduce needs.
TreeNode heap_tree_node(int rank, int size, bool mirrored);

// A rank's place in the tree that a pipelined broadcast (root to leaves) or reduce
// (leaves to root) runs along. With many chunks it is a chain: every rank sends each chunk
// once, so the pipeline runs at full link speed after n-1 steps of fill. With few chunks it
// is the heap tree rotated to start at `root`: depth log2(n) instead of n-1, at the cost of
// interior ranks sending each chunk twice. The switch is where the two estimated step
// counts cross.
TreeNode pipeline_tree(int rank, int size, int root, std::size_t num_chunks);

// Chunks a pipeline along such a tree keeps in flight per peer: enough that a link is busy
// while the previous chunk is being reduced or forwarded, few enough to bound scratch.
inline constexpr std::size_t kPipelineDepth = 4;

}  // namespace tributary::algorithms
