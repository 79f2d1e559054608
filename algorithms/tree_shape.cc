#include "algorithms/tree_shape.h"

#include "algorithms/partition.h"
#include "core/check.h"

namespace tributary::algorithms {
namespace {

// The node at heap position `pos`, with positions mapped to ranks by `rank_at`.
template <typename RankAt>
TreeNode heap_node(int pos, int size, RankAt rank_at) {
  TreeNode node;
  if (pos > 0) node.parent = rank_at((pos - 1) / 2);
  for (int c = 2 * pos + 1; c <= 2 * pos + 2 && c < size; ++c) {
    node.children[node.num_children++] = rank_at(c);
  }
  return node;
}

}  // namespace

TreeNode heap_tree_node(int rank, int size, bool mirrored) {
  auto flip = [&](int x) { return mirrored ? size - 1 - x : x; };
  return heap_node(flip(rank), size, flip);
}

TreeNode pipeline_tree(int rank, int size, int root, std::size_t num_chunks) {
  TRIB_CHECK(size >= 1 && rank >= 0 && rank < size && root >= 0 && root < size)
      << "rank=" << rank << " size=" << size << " root=" << root;
  // Positions are relative to the root so that any root gets the same shape.
  const int v = (rank - root + size) % size;
  auto actual = [&](int pos) { return (pos + root) % size; };
  // Chain: C + n - 2 steps. Binary tree: about 2 (C + depth - 1) steps.
  const std::size_t n = static_cast<std::size_t>(size);
  if (n > num_chunks + 2 * static_cast<std::size_t>(floor_log2(size))) {
    return heap_node(v, size, actual);
  }
  TreeNode chain;
  if (v > 0) chain.parent = actual(v - 1);
  if (v + 1 < size) chain.children[chain.num_children++] = actual(v + 1);
  return chain;
}

}  // namespace tributary::algorithms
