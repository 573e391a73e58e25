// calibrate --mpi's link levels come from where mpirun placed the ranks (kernels/src/placement.cpp): a group of
// n ranks is the first n in (node, rank within node) order, so groups up to rank 0's node stay intra-node.
#include <gtest/gtest.h>

#include <vector>

#include "headroom/calibration/fit.hpp"
#include "headroom/calibration/sweep.hpp"
#include "headroom/kernels/mpi.hpp"

namespace headroom::kernels::mpi {
namespace {

// The world ranks at positions 0 … size−1.
std::vector<int> order(const std::vector<Slot>& slots) {
  std::vector<int> o(slots.size());
  for (int r = 0; r < static_cast<int>(slots.size()); ++r) o[static_cast<std::size_t>(place(slots, r).position)] = r;
  return o;
}

TEST(MpiPlacement, OneMachineIsOneNodeAndEveryGroupIntra) {
  const std::vector<Slot> slots = {{0, 0}, {0, 1}};
  const Placement p = place(slots, 1);
  EXPECT_EQ(p.size, 2);
  EXPECT_EQ(p.nodes, 1);
  EXPECT_EQ(p.ranks_on_first_node, 2);
  EXPECT_EQ(p.position, 1);
  EXPECT_EQ(calibrate::link_level(2, p.ranks_on_first_node), "intra");
}

TEST(MpiPlacement, RoundRobinRanksAreGroupedByNode) {
  // mpirun --map-by node over two hosts: ranks 0, 2 on the first, 1, 3 on the second.
  const std::vector<Slot> slots = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  EXPECT_EQ(order(slots), (std::vector<int>{0, 2, 1, 3}));
  const Placement p = place(slots, 3);
  EXPECT_EQ(p.nodes, 2);
  EXPECT_EQ(p.ranks_on_first_node, 2);
  EXPECT_EQ(p.position, 3);
  // The group of 2 is ranks 0 and 2, on one node; the group of 4 spans both.
  EXPECT_EQ(calibrate::link_level(2, p.ranks_on_first_node), "intra");
  EXPECT_EQ(calibrate::link_level(4, p.ranks_on_first_node), "inter");
}

TEST(MpiPlacement, OneRankPerNodeMakesEveryGroupInter) {
  const std::vector<Slot> slots = {{0, 0}, {1, 0}, {2, 0}};
  const Placement p = place(slots, 2);
  EXPECT_EQ(p.nodes, 3);
  EXPECT_EQ(p.ranks_on_first_node, 1);
  EXPECT_EQ(order(slots), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(calibrate::link_level(2, p.ranks_on_first_node), "inter");
}

}  // namespace
}  // namespace headroom::kernels::mpi
