// CPU references every backend's kernels are checked against: straightforward loops in double precision.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "headroom/core/collectives.hpp"

namespace headroom::kernels::reference {

// One element of C = A·B (row-major A[m×k], B[k×n]) and the sum of |a||b| that bounds its rounding error.
struct Dot {
  double value = 0, magnitude = 0;
};
[[nodiscard]] Dot gemm_element(std::span<const float> a, std::span<const float> b, std::int64_t n, std::int64_t k,
                               std::int64_t i, std::int64_t j);

// One head: Q, K, V, O row-major [s×d]; softmax(Q·Kᵀ/√d [masked]) · V.
void attention_forward(std::span<const float> q, std::span<const float> k, std::span<const float> v, std::int64_t s,
                       std::int64_t d, bool causal, std::vector<double>& out);
// Gradients dQ, dK, dV of the same head for the output gradient dO.
void attention_backward(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                        std::span<const float> dout, std::int64_t s, std::int64_t d, bool causal,
                        std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv);

// Deterministic inputs in [-1, 1) (a fixed linear congruential sequence, identical on every platform).
void fill_uniform(std::span<float> x, std::uint64_t seed);
// Collective inputs: small integers, so that FP32 sums are exact whatever the reduction order.
[[nodiscard]] float collective_value(int rank, std::int64_t index);
// Element i of rank `rank`'s output of `op` over `ranks` ranks whose inputs are collective_value(q, ·), `count`
// being the whole buffer in elements as nccl-tests counts it (a multiple of `ranks` except for all-reduce and
// send/recv). All-gather and all-to-all: chunk q of the output comes from rank q; reduce-scatter: i indexes the
// rank's own chunk; send/recv: the ring's left neighbour's input.
[[nodiscard]] float collective_expected(Collective op, int ranks, int rank, std::int64_t count, std::int64_t i);
// The buffer of a `bytes`-sized FP32 collective over `ranks` ranks, in elements as nccl-tests counts it: at least
// one, a multiple of `ranks` (and at least `ranks`) for the collectives that split it into per-rank chunks.
[[nodiscard]] std::int64_t collective_count(Collective op, int ranks, std::int64_t bytes);
// Elements of each rank's input for that buffer: one chunk for all-gather, the whole buffer otherwise.
[[nodiscard]] std::int64_t collective_input_count(Collective op, int ranks, std::int64_t count);

// Max |x − ref| over max |ref| (0 when ref is all zero).
[[nodiscard]] double normalised_max_error(std::span<const float> x, std::span<const double> ref);

}  // namespace headroom::kernels::reference
