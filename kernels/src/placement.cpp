// Where MPI ranks sit (mpi.hpp): built with or without MPI, so that it is tested everywhere.
#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "headroom/kernels/mpi.hpp"

namespace headroom::kernels::mpi {

Placement place(std::span<const Slot> slots, int rank) {
  Placement p;
  p.rank = rank;
  p.size = static_cast<int>(slots.size());
  std::vector<int> order(slots.size());
  std::iota(order.begin(), order.end(), 0);
  const auto slot = [&](int r) { return slots[static_cast<std::size_t>(r)]; };
  // By node (named by its lowest rank, so rank 0's node comes first), then by rank within the node.
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return std::pair(slot(a).node, slot(a).local) < std::pair(slot(b).node, slot(b).local);
  });
  p.position = static_cast<int>(std::find(order.begin(), order.end(), rank) - order.begin());
  p.nodes = static_cast<int>(std::count_if(slots.begin(), slots.end(), [](const Slot& s) { return s.local == 0; }));
  p.ranks_on_first_node =
      slots.empty() ? 1 : static_cast<int>(std::count_if(slots.begin(), slots.end(), [&](const Slot& s) {
        return s.node == slots.front().node;
      }));
  return p;
}

}  // namespace headroom::kernels::mpi
