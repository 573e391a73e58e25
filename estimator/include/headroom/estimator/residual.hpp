// The residual model: memory the 4D paper's Eq. 18 leaves out (runtime context, communication buffers,
// temporaries, allocator fragmentation), fitted to measured OOM outcomes. See residual.cpp for each term.
#pragma once

#include <cstdint>
#include <string>

namespace headroom {

struct ModelSpec;
struct Layout;

struct ResidualModel {
  std::string name = "none";
  double fixed_bytes = 0;                // per GPU: CUDA/HIP context, NCCL/RCCL communicators, workspaces
  double activation_fraction = 0;        // allocator fragmentation, as a fraction of stored activations
  double logits_bytes_per_element = 0;   // temporaries of the LM head and loss, per s·b·v/(t·c) element
  double cp_bytes_per_token_hidden = 0;  // context-parallel attention buffers, per s·b·h/(t·c), when c > 1
};

// Residual bytes of one pipeline stage; `stage_activations` is that stage's stored activation bytes.
[[nodiscard]] double residual_bytes(const ModelSpec& m, const Layout& l, const ResidualModel& r,
                                    std::int64_t stage, double stage_activations);

}  // namespace headroom
