#include "headroom/kernels/measurement.hpp"

#include <cstdio>
#include <type_traits>

namespace headroom::kernels {

KernelKind kind_of(const Case& c) {
  return std::visit(
      [](const auto& x) -> KernelKind {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, GemmCase>)
          return KernelKind::gemm;
        else if constexpr (std::is_same_v<T, AttentionCase>)
          return KernelKind::attention;
        else if constexpr (std::is_same_v<T, CollectiveCase>)
          return KernelKind::collective;
        else
          return KernelKind::copy;
      },
      c);
}

std::string_view to_string(KernelKind k) {
  switch (k) {
    case KernelKind::gemm: return "gemm";
    case KernelKind::attention: return "attention";
    case KernelKind::collective: return "collective";
    case KernelKind::copy: return "copy";
  }
  return "?";
}

std::string label(const Case& c) {
  char buf[160];
  if (const auto* g = std::get_if<GemmCase>(&c)) {
    std::snprintf(buf, sizeof buf, "gemm m=%lld n=%lld k=%lld", static_cast<long long>(g->m),
                  static_cast<long long>(g->n), static_cast<long long>(g->k));
  } else if (const auto* a = std::get_if<AttentionCase>(&c)) {
    std::snprintf(buf, sizeof buf, "attention %s s=%lld d=%lld heads=%lld %s", a->backward ? "bwd" : "fwd",
                  static_cast<long long>(a->seq), static_cast<long long>(a->head_dim), static_cast<long long>(a->heads),
                  a->causal ? "causal" : "full");
  } else if (const auto* x = std::get_if<CollectiveCase>(&c)) {
    std::snprintf(buf, sizeof buf, "%s ranks=%d bytes=%lld", std::string(to_string(x->op)).c_str(), x->ranks,
                  static_cast<long long>(x->bytes));
  } else {
    std::snprintf(buf, sizeof buf, "copy bytes=%lld", static_cast<long long>(std::get<CopyCase>(c).bytes));
  }
  return buf;
}

BusBandwidth bus_bandwidth(Collective op, int ranks, double bytes, double seconds) {
  const double algbw = bytes / seconds;
  return {algbw, algbw * bus_bandwidth_factor(op, ranks)};
}

}  // namespace headroom::kernels
