// Sharding strategies of the data-parallel group and what they cost: per-GPU memory of parameters (P),
// gradients (G) and optimizer states (OS), and the communication volume of one mini-batch, split into
// intra-group and inter-group parts. Source: PaRO ("Rethinking Memory and Communication Costs for Efficient Large
// Language Model Training", Wu et al.), sections 3.1–3.5, Tables 1–3 and Eq. 1; ZeRO++ and MiCS as PaRO describes them;
// FSDP hybrid sharding (Zhao et al. 2023, "PyTorch FSDP: Experiences on Scaling Fully Sharded Data Parallel"); RTP
// ("RTP: Rethinking Tensor Parallelism with Memory Deduplication"), Table 1, Eq. 2.
//
// Every strategy is a triple (S_P, S_G, S_OS) of N / I / G (layout.hpp's Shard) plus how global collectives
// run (a flat ring over all N GPUs, or PaRO's two-step intra/inter-group ring), ZeRO++'s secondary copy and
// RTP's rotation. Memory and volumes are derived from the rules of PaRO section 3, never typed per scheme.
// All functions below except the parsers are closed forms that do not allocate.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "headroom/estimator/layout.hpp"

namespace headroom {

// How collectives over all N GPUs run. `ring`: one NCCL-style ring over N GPUs ordered group by group, so g
// of its N links cross groups (Table 3's ZeRO rows). `hierarchical`: PaRO's H-Ring/HO-Ring (Sec. 3.4):
// reduce-scatter intra-group then inter-group, all-gather inter-group then intra-group (Table 3's PaRO rows).
enum class Collectives { ring, hierarchical };

// RTP (RTP paper Sec. 3.3): weights rotate around a ring instead of being all-gathered. Out-of-place keeps a
// communication buffer to overlap rotation with compute; in-place does not (RTP Table 1).
enum class Rotation { none, in_place, out_of_place };

struct Strategy {
  std::string name;  // display name, e.g. "ZeRO-3", "PaRO-IIG", "NGI"
  StateSharding sharding;
  Collectives collectives = Collectives::hierarchical;
  bool secondary_param_copy = false;  // ZeRO++ hpZ: a second, intra-group copy of the parameters
  Rotation rotation = Rotation::none;
};

// The data-parallel job: PaRO Sec. 3.1 notation. Bytes per element default to mixed-precision Adam
// (2Ψ, 2Ψ', 12Ψ' — PaRO Sec. 3.1.2).
struct CommSetup {
  double params = 0;            // Ψ
  double trainable = 0;         // Ψ' (≤ Ψ)
  std::int64_t gpus = 1;        // N
  std::int64_t group_size = 1;  // M (a group is usually a node)
  std::int64_t accum = 1;       // s, micro-batches per mini-batch
  double weight_bytes = 2;
  double grad_bytes = 2;
  double optimizer_bytes = 12;                                             // K
  [[nodiscard]] std::int64_t groups() const { return gpus / group_size; }  // g = N / M
};

// Throws Error naming the first bad value: Ψ > 0, 0 < Ψ' ≤ Ψ, N, M, s ≥ 1, M | N, byte sizes > 0.
void validate_comm_setup(const CommSetup& setup);

// ---- names ----

// A strategy by name, case-insensitive, '-' and '_' ignored: ddp, zero1, zero2, zero3, fsdp, mics, hsdp
// (fsdp-hs), zero++ (zeropp), rtp / rtp-out-of-place, rtp-inplace, paro-XYZ for the 14 PaRO codes, or any of
// the 27 codes XYZ over {N, I, G}. ZeRO/DDP/MiCS/HSDP/ZeRO++/RTP use flat rings as in Table 3's rows; PaRO
// codes use hierarchical collectives. Throws Error listing the valid names.
[[nodiscard]] Strategy parse_strategy(std::string_view name);
// The sharding part alone, for the memory model's DP dimension (`estimate --sharding`). ZeRO++ and RTP
// are refused: their extra copy and buffer are not in the per-stage model.
[[nodiscard]] StateSharding parse_sharding(std::string_view name);
// "IIG": the P, G, OS letters.
[[nodiscard]] std::string sharding_code(const StateSharding& s);
[[nodiscard]] std::string_view to_string(Collectives c);
[[nodiscard]] std::string_view to_string(Rotation r);
// The named schemes of PaRO Figure 5 plus DDP and RTP, in the order `headroom comm --compare` prints them.
[[nodiscard]] std::span<const std::string_view> named_schemes();

// ---- principles and Table 1 ----

// 0 = no sharding, 1 = intra-group, 2 = global: how finely a state is split (the inverse of PaRO's
// "granularity" order N > I > G).
[[nodiscard]] constexpr int shard_level(Shard s) { return s == Shard::none ? 0 : s == Shard::intra ? 1 : 2; }
// PaRO Sec. 3.1.3 Principle 1: S_P ≥ S_OS and S_G ≥ S_OS in granularity, i.e. OS is split at least as finely
// as P and as G. 14 of the 27 triples satisfy it: the PaRO set.
[[nodiscard]] bool satisfies_principle1(const StateSharding& s);
// PaRO Principle 2 (for Ψ' ≥ Ψ/6): S_P ≥ S_G ≥ S_OS in granularity.
[[nodiscard]] bool satisfies_principle2(const StateSharding& s);
// PaRO Principle 3 (PEFT): gradients are not sharded.
[[nodiscard]] bool satisfies_principle3(const StateSharding& s);

// The columns of PaRO Table 1.
enum class TrainableRegime { full, at_least_sixth, below_sixth, peft };
// Ψ'/Ψ = 1 → full; ≥ 1/6 → at_least_sixth; below kPeftMaxFraction → peft; otherwise below_sixth. PaRO gives
// no number for PEFT ("Ψ' ≪ Ψ"); LoRA adapters are typically 0.1–1% of the model, hence 1%.
inline constexpr double kPeftMaxFraction = 0.01;
[[nodiscard]] TrainableRegime trainable_regime(double trainable_fraction);
[[nodiscard]] std::string_view to_string(TrainableRegime r);

struct Table1Row {
  StateSharding sharding;
  std::string_view alias;  // "DDP", "ZeRO-1", "ZeRO-2", "MiCS", "ZeRO-3" or empty
  bool full = false;       // ✓ for Ψ' = Ψ
  bool at_least_sixth = false;
  bool below_sixth = false;
  bool peft = false;
  [[nodiscard]] bool recommended(TrainableRegime r) const;
};
// PaRO Table 1 as printed (the marks are the paper's judgement, not derivable): the 14 strategies in order.
[[nodiscard]] std::span<const Table1Row> paro_table1();
// The row of a PaRO strategy, or nullptr when the triple violates Principle 1.
[[nodiscard]] const Table1Row* table1_row(const StateSharding& s);
// All 27 triples, P slowest, in the order N, I, G.
[[nodiscard]] std::array<StateSharding, 27> all_shardings();

// ---- memory (bytes per GPU) ----

// How many GPUs share one copy of a state: N → 1, I → M, G → N (PaRO Sec. 3.1.1).
[[nodiscard]] double shard_ways(Shard s, const CommSetup& setup);

struct StateMemory {
  double params = 0;
  double grads = 0;
  double optimizer = 0;
  double buffers = 0;  // RTP out-of-place rotation buffer
  [[nodiscard]] double total() const { return params + grads + optimizer + buffers; }
};

// PaRO Table 2 generalised: 2Ψ/ways(S_P) (+ 2Ψ/M for ZeRO++'s secondary copy), 2Ψ'/ways(S_G), KΨ'/ways(S_OS).
[[nodiscard]] double param_bytes_per_gpu(const Strategy& st, const CommSetup& setup);
[[nodiscard]] double grad_bytes_per_gpu(const Strategy& st, const CommSetup& setup);
[[nodiscard]] double optimizer_bytes_per_gpu(const Strategy& st, const CommSetup& setup);
// RTP Table 1: out-of-place adds max(W, G) to the whole system (one rotating shard per GPU), in-place nothing.
[[nodiscard]] double rotation_buffer_bytes_per_gpu(const Strategy& st, const CommSetup& setup);
[[nodiscard]] StateMemory state_memory_per_gpu(const Strategy& st, const CommSetup& setup);

// ---- communication volume (elements, summed over all N GPUs) ----

struct Volume {
  double intra = 0;
  double inter = 0;
  [[nodiscard]] double total() const { return intra + inter; }
  Volume& operator+=(const Volume& o) {
    intra += o.intra;
    inter += o.inter;
    return *this;
  }
  friend Volume operator+(Volume a, const Volume& b) { return a += b; }
  friend Volume operator*(double k, const Volume& v) { return {k * v.intra, k * v.inter}; }
};

// One ring all-gather or reduce-scatter of `elements` inside every group at once (g rings of M):
// N·(elements/M)·(M − 1), all intra-group (PaRO Table 3, MiCS rows).
[[nodiscard]] Volume intra_group_collective(double elements, const CommSetup& setup);
// One ring all-gather or reduce-scatter of `elements` across groups, between the GPUs of equal rank in each
// group (M rings of g): N·(elements/g)·(g − 1), all inter-group (Table 3, PaRO-IIG update; Eq. 1).
[[nodiscard]] Volume inter_group_collective(double elements, const CommSetup& setup);
// One all-gather or reduce-scatter of `elements` over all N GPUs. Ring: elements·(N − 1) over N links of
// which g cross groups (none when g = 1). Hierarchical: intra_group(elements) + inter_group(elements/M).
[[nodiscard]] Volume global_collective(double elements, Collectives c, const CommSetup& setup);

// What the update stage does to the gradients before the optimizer step.
enum class GradSync { none, reduce_scatter, all_reduce, all_gather, reduce_then_all_gather };
[[nodiscard]] std::string_view to_string(GradSync g);

struct StageVolumes {
  Volume forward_gather_params;   // Forward A-G(P), every micro-batch
  Volume backward_gather_params;  // Backward A-G(P), every micro-batch
  Volume backward_reduce_grads;   // Backward R-S(G), every micro-batch
  Volume update_sync_grads;       // Update R-S(G) / A-R(G), once per mini-batch
  Volume update_gather_params;    // Update A-G(P), once per mini-batch
  GradSync update_sync = GradSync::none;
  [[nodiscard]] Volume total() const {
    return forward_gather_params + backward_gather_params + backward_reduce_grads + update_sync_grads +
           update_gather_params;
  }
};

// PaRO Sec. 3.1.1: P sharded I or G is all-gathered over its scope before every forward (s times).
[[nodiscard]] Volume forward_param_gather(const Strategy& st, const CommSetup& setup);
// Same before every backward; ZeRO++ gathers from its intra-group secondary copy instead (Sec. 3.5).
[[nodiscard]] Volume backward_param_gather(const Strategy& st, const CommSetup& setup);
// PaRO Sec. 3.1.1/3.3: G sharded I or G is reduce-scattered over its scope after every micro-batch; G = N
// accumulates locally.
[[nodiscard]] Volume backward_grad_reduce(const Strategy& st, const CommSetup& setup);
// PaRO Sec. 3.1.1 (OS bullet), 3.3: once per mini-batch the gradients still unreduced across groups (or
// across everyone) are reduced and left sharded like OS: reduce-scatter to a finer OS scope, all-reduce to
// the same scope, all-gather to a coarser one (the last only outside Principle 1).
[[nodiscard]] GradSync update_grad_sync_kind(const StateSharding& s);
[[nodiscard]] Volume update_grad_sync(const Strategy& st, const CommSetup& setup);
// After the step each GPU holds updated parameters for its OS shard; they are all-gathered to P's scope
// (Ψ' elements changed). Nothing when P is split at least as finely as OS, or for ZeRO++'s secondary copy,
// which the next forward all-gather refreshes.
[[nodiscard]] Volume update_param_gather(const Strategy& st, const CommSetup& setup);
[[nodiscard]] StageVolumes communication_volume(const Strategy& st, const CommSetup& setup);

// PaRO Eq. 1: per-GPU volume saved by the grouped two-step reduce-scatter (intra every micro-batch, inter
// once) against a global reduce-scatter every micro-batch: Ψ(s − 1)(g − 1)/N.
[[nodiscard]] double grouped_reduce_scatter_saving(const CommSetup& setup);

}  // namespace headroom
