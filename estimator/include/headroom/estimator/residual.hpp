// The residual model: memory the 4D paper's Eq. 18 leaves out (runtime context, communicators,
// temporaries, allocator fragmentation). Four terms, each with a physical carrier; the coefficients are
// fitted to measured OOM outcomes (residual_fit.hpp) and shipped in data/frameworks/*.json.
#pragma once

#include <cstdint>
#include <string>

namespace headroom {

struct ModelSpec;
struct Layout;

struct ResidualModel {
  std::string name = "none";
  double fixed_bytes = 0;                      // per GPU: CUDA/HIP context, NCCL/RCCL, cuBLAS/TE workspaces
  double logits_bytes_per_element = 0;         // LM-head stage: loss temporaries per s·b·v/(t·c) logit
  double optimizer_shard_bytes_per_param = 0;  // beyond Eq. 10's 12 B, per parameter of this GPU's shard
  double cp_communicator_bytes = 0;            // per extra communicator that context parallelism creates
  // A share of the GPU's usable memory held outside the tensors (allocator reserve and fragmentation): with
  // the other terms 0, the one-parameter form "Eq. 18 fits iff it is at most (1 − share) of capacity".
  double capacity_share = 0;
};

// Logit elements one GPU of `stage` materialises per micro-batch: s·b·v/(t·c) on the stage holding the
// LM head (the last; with p = 1 the only one), else 0.
[[nodiscard]] double logits_elements(const ModelSpec& m, const Layout& l, std::int64_t stage);

// Extra communicators of context parallelism (TransformerEngine 1.9 ring attention): c = 2 sends over the
// CP group's own communicator with batched P2P (1); c > 2 uses unbatched isend/irecv, for which PyTorch
// builds a 2-rank communicator per ring neighbour (3).
[[nodiscard]] double cp_extra_communicators(const Layout& l);

// The TP overlap's communication buffers, physical, not fitted; 0 without the overlap.
//  - TransformerEngine's userbuffers under --tp-comm-overlap (transformer_engine/pytorch/module/base.py
//    initialize_ub, shape (s·b/c, h) from megatron/training/initialize.py): 12 communication buffers of s·b/c·h
//    elements, the 8 all-gather ones in FP8 (1 B) when training in FP8, the 4 reduce-scatter ones and all under
//    BF16 2 B; an FP8 run with BF16 layers (Layout::bf16_layers_at_start/end) holds a BF16 set too.
//  - torch's micro-pipelined TP (torch/distributed/_symmetric_memory/__init__.py get_symm_mem_workspace): one
//    workspace per TP group, grown to its largest request: an all-gather's local shard of s·b/(c·t)·h elements
//    (_pipelined_multi_all_gather_and_consume) or two BF16 chunks of a reduce-scatter's output, 2·s·b/(c·t)·h
//    elements (_pipelined_produce_and_all2all); the gathered and partial tensors themselves are the ones TP without
//    the overlap also holds.
[[nodiscard]] double tp_comm_buffer_bytes(const ModelSpec& m, const Layout& l);

// Residual bytes of one pipeline stage, given how many parameters this GPU's optimizer shard holds and the
// GPU's usable memory; `with_logits` false leaves the loss temporaries out (a moment when none are live).
[[nodiscard]] double residual_bytes(const ModelSpec& m, const Layout& l, const ResidualModel& r, std::int64_t stage,
                                    double optimizer_shard_params, double usable_memory_bytes, bool with_logits = true);

}  // namespace headroom
