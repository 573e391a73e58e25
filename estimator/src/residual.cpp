#include "headroom/estimator/residual.hpp"

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom {

double residual_bytes(const ModelSpec& m, const Layout& l, const ResidualModel& r, std::int64_t stage,
                      double stage_activations) {
  const double tc = static_cast<double>(l.tp) * static_cast<double>(l.cp);
  const double tokens = static_cast<double>(l.seq) * static_cast<double>(l.mbs);
  double bytes = r.fixed_bytes + r.activation_fraction * stage_activations;
  if (stage == l.pp - 1) bytes += r.logits_bytes_per_element * tokens * static_cast<double>(m.vocab_size) / tc;
  if (l.cp > 1) bytes += r.cp_bytes_per_token_hidden * tokens * static_cast<double>(m.hidden_size) / tc;
  return bytes;
}

}  // namespace headroom
