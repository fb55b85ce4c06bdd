// DDP graph splitting: which piece each node of a graph goes to, from the parameters it reads.
#include <gtest/gtest.h>

#include "autograd/ddp_buckets.h"

using kiln::autograd::ddp_bucket_pieces;

// Six linear layers of 100 bytes of parameters each (weight and bias), one node per layer plus
// an activation after each but the last; buckets of 250 bytes.
TEST(DdpBuckets, PiecesCloseOnceABucketIsFull) {
  std::vector<std::vector<int>> reads;
  std::vector<int64_t> bytes;
  for (int l = 0; l < 6; ++l) {
    reads.push_back({2 * l, 2 * l + 1});
    bytes.push_back(80);
    bytes.push_back(20);
    if (l < 5) reads.push_back({});
  }
  std::vector<int> got = ddp_bucket_pieces(reads, bytes, 250);
  // Backwards: layers 5, 4, 3 fill the last piece (300 bytes); layers 2, 1, 0 the one before.
  std::vector<int> want = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
  EXPECT_EQ(got, want);
}

TEST(DdpBuckets, OneBucketOrNoParametersIsOnePiece) {
  std::vector<std::vector<int>> reads = {{0}, {}, {1}};
  EXPECT_EQ(ddp_bucket_pieces(reads, {10, 10}, 1000), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(ddp_bucket_pieces({{}, {}}, {}, 1), (std::vector<int>{0, 0}));
}

TEST(DdpBuckets, APieceBeforeAnyParameterJoinsTheNextOne) {
  // reshape, layer0, act, layer1: buckets of one layer each; the leading reshape reads nothing
  // and the activation goes with the layer before it (its backward runs between theirs).
  std::vector<std::vector<int>> reads = {{}, {0}, {}, {1}};
  EXPECT_EQ(ddp_bucket_pieces(reads, {100, 100}, 100), (std::vector<int>{0, 0, 0, 1}));
}

TEST(DdpBuckets, ASharedParameterCountsOnceAtItsLastReader) {
  std::vector<std::vector<int>> reads = {{0}, {1}, {0}};
  // Backwards: node 2 adds p0 (100: full), node 1 adds p1 in a new piece, node 0 reads p0 again.
  EXPECT_EQ(ddp_bucket_pieces(reads, {100, 50}, 100), (std::vector<int>{0, 0, 1}));
}
