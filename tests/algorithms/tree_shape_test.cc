// The trees of tree_shape.h: every rank but the root has one parent, parents and children
// agree, the tree reaches every rank, and the shapes the collectives rely on hold (the
// mirrored heap tree's interior is the plain tree's leaves; the pipeline tree is a chain
// with many chunks and a binary tree with few).
#include <gtest/gtest.h>

#include <vector>

#include "algorithms/partition.h"
#include "algorithms/tree_shape.h"

namespace tributary::testing {
namespace {

using algorithms::TreeNode;

// Checks that `nodes` (by rank) form one tree rooted at `root`; returns its depth.
int check_tree(const std::vector<TreeNode>& nodes, int root) {
  const int n = static_cast<int>(nodes.size());
  std::vector<int> depth(static_cast<std::size_t>(n), -1);
  depth[static_cast<std::size_t>(root)] = 0;
  EXPECT_EQ(nodes[static_cast<std::size_t>(root)].parent, -1);
  std::vector<int> frontier = {root};
  int deepest = 0;
  while (!frontier.empty()) {
    std::vector<int> next;
    for (int r : frontier) {
      const TreeNode& node = nodes[static_cast<std::size_t>(r)];
      for (int c = 0; c < node.num_children; ++c) {
        const int child = node.children[c];
        EXPECT_EQ(nodes[static_cast<std::size_t>(child)].parent, r) << "child " << child;
        EXPECT_EQ(depth[static_cast<std::size_t>(child)], -1) << "rank " << child << " twice";
        depth[static_cast<std::size_t>(child)] = depth[static_cast<std::size_t>(r)] + 1;
        deepest = std::max(deepest, depth[static_cast<std::size_t>(child)]);
        next.push_back(child);
      }
    }
    frontier = std::move(next);
  }
  for (int r = 0; r < n; ++r) EXPECT_GE(depth[static_cast<std::size_t>(r)], 0) << "rank " << r;
  return deepest;
}

TEST(TreeShape, HeapTreesReachEveryRankAtLogDepth) {
  for (int n = 1; n <= 33; ++n) {
    for (bool mirrored : {false, true}) {
      std::vector<TreeNode> nodes;
      for (int r = 0; r < n; ++r) nodes.push_back(algorithms::heap_tree_node(r, n, mirrored));
      EXPECT_EQ(check_tree(nodes, mirrored ? n - 1 : 0), algorithms::floor_log2(n)) << "n=" << n;
    }
  }
}

TEST(TreeShape, MirroredInteriorIsThePlainTreesLeaves) {
  for (int n = 2; n <= 33; ++n) {
    for (int r = 0; r < n; ++r) {
      const bool plain_leaf = algorithms::heap_tree_node(r, n, false).num_children == 0;
      const bool mirrored_interior = algorithms::heap_tree_node(r, n, true).num_children > 0;
      if (mirrored_interior) {
        EXPECT_TRUE(plain_leaf) << "n=" << n << " rank " << r;
      }
    }
  }
}

TEST(TreeShape, PipelineTreeIsAChainWithManyChunksAndABinaryTreeWithFew) {
  for (int n = 1; n <= 17; ++n) {
    for (int root : {0, n / 2, n - 1}) {
      std::vector<TreeNode> chain, tree;
      for (int r = 0; r < n; ++r) {
        chain.push_back(algorithms::pipeline_tree(r, n, root, 1000));
        tree.push_back(algorithms::pipeline_tree(r, n, root, 1));
      }
      EXPECT_EQ(check_tree(chain, root), n - 1) << "n=" << n << " root " << root;
      const int depth = check_tree(tree, root);
      EXPECT_LE(depth, n <= 1 + 2 * algorithms::floor_log2(n) ? n - 1 : algorithms::floor_log2(n))
          << "n=" << n << " root " << root;
    }
  }
}

}  // namespace
}  // namespace tributary::testing
