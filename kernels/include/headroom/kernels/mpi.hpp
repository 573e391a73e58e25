// MPI for the CPU backend (`headroom calibrate --mpi`): one process per rank, collectives between processes
// through MPI. Built when CMake finds MPI (HEADROOM_ENABLE_MPI); without it, Session() is a clear Error.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>

#include "headroom/kernels/backend.hpp"

namespace headroom::kernels::mpi {

// Whether this build has MPI.
[[nodiscard]] bool built();

// Where the ranks run. Ranks sharing memory (MPI_Comm_split_type SHARED) are one node; groups are the first
// n ranks ordered by (node, rank within node), nodes ordered by their lowest rank, so a group of up to
// `ranks_on_first_node` ranks stays inside rank 0's node and a larger one spans nodes.
struct Placement {
  int rank = 0;
  int size = 1;
  int nodes = 1;
  int ranks_on_first_node = 1;
  int position = 0;  // this rank's place in that order: a group of n ranks is positions 0 … n−1
};

// What MPI_Comm_split_type(SHARED) tells each rank: its node, named by the node's lowest world rank, and its
// rank within the node.
struct Slot {
  int node = 0;
  int local = 0;
};
// The placement of world rank `rank` from every rank's slot (indexed by world rank). Pure: unit-tested without MPI.
[[nodiscard]] Placement place(std::span<const Slot> slots, int rank);

// MPI_Init on construction and MPI_Finalize on destruction, once per process. Throws Error when the build has
// no MPI or MPI was already finalized.
class Session {
 public:
  Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  [[nodiscard]] const Placement& placement() const;
  [[nodiscard]] bool root() const { return placement().rank == 0; }
  // Runs `f` on rank 0 only and broadcasts how it ended: an Error there is thrown on every rank with the same
  // message, so that all ranks stop together (file writes, fits: what only rank 0 does).
  void on_root(const std::function<void()>& f) const;
  // Rank 0's `text` on every rank.
  [[nodiscard]] std::string broadcast(const std::string& text) const;
  // Whether `ok` holds on every rank (the same answer everywhere).
  [[nodiscard]] bool everywhere(bool ok) const;
  // Called after an Error: true when every rank reached this call within `timeout_s` (the error was raised
  // everywhere at the same point, so finalizing is safe), false when this rank failed alone (the others are
  // blocked in a collective: abort).
  [[nodiscard]] bool all_failed(double timeout_s) const;
  // MPI_Abort: ends every rank with `code`.
  [[noreturn]] void abort(int code) const;
  // The CPU backend over every rank of the session: GEMM, attention and copies run on each rank at once (timed
  // by the slowest), collectives ("collective/mpi") run over groups of ranks.
  [[nodiscard]] std::unique_ptr<Backend> cpu_backend() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace headroom::kernels::mpi
