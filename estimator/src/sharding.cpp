#include "headroom/estimator/sharding.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "headroom/core/error.hpp"
#include "headroom/core/units.hpp"

namespace headroom {
namespace {

using units::d;

constexpr Shard N = Shard::none;
constexpr Shard I = Shard::intra;
constexpr Shard G = Shard::global;

constexpr std::array<Table1Row, 14> kTable1 = {{
    // PaRO Table 1, rows in printed order: P, G, OS; alias; Ψ'=Ψ, Ψ'≥Ψ/6, Ψ'<Ψ/6, PEFT.
    {{N, N, N}, "DDP", true, true, true, true},
    {{N, N, I}, "", true, true, true, true},
    {{N, N, G}, "ZeRO-1", true, true, true, false},
    {{N, I, I}, "", true, true, true, false},
    {{N, I, G}, "", true, true, true, false},
    {{N, G, G}, "ZeRO-2", true, true, true, false},
    {{I, N, I}, "", false, false, false, true},
    {{I, N, G}, "", false, true, true, false},
    {{I, I, I}, "MiCS", false, false, true, false},
    {{I, I, G}, "", true, true, false, false},
    {{I, G, G}, "", true, true, true, false},
    {{G, N, G}, "", false, true, true, true},
    {{G, I, G}, "", false, true, true, false},
    {{G, G, G}, "ZeRO-3", true, true, true, false},
}};

constexpr std::array<std::string_view, 11> kNamedSchemes = {
    "ddp", "zero1", "zero2", "zero3", "mics", "zero++", "paro-igg", "paro-iig", "paro-nig", "rtp-inplace", "rtp"};

constexpr std::string_view kValidNames =
    "ddp, zero1, zero2, zero3, fsdp, mics, hsdp, zero++, rtp (out-of-place), rtp-inplace, paro-XYZ for the 14 "
    "PaRO codes, or any code XYZ of N/I/G for P, G, OS (e.g. IIG)";

char letter(Shard s) { return s == N ? 'N' : s == I ? 'I' : 'G'; }

// Lower case without '-', '_' and blanks, so that "ZeRO-3", "zero_3" and "zero3" are one name.
std::string normalise(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '-' || c == '_' || c == ' ') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

Strategy flat(std::string name, StateSharding s) {
  Strategy st;
  st.name = std::move(name);
  st.sharding = s;
  st.collectives = Collectives::ring;
  return st;
}

// All-gather (or, run backwards, reduce-scatter) of `elements` from shards of scope `fine` to shards of the
// coarser scope `coarse`: G → N is global, G → I crosses groups on the M-th pieces, I → N stays in groups.
Volume scope_change(double elements, Shard fine, Shard coarse, Collectives c, const CommSetup& setup) {
  if (shard_level(fine) <= shard_level(coarse)) return {};
  if (fine == G && coarse == N) return global_collective(elements, c, setup);
  if (fine == G) return inter_group_collective(elements / d(setup.group_size), setup);
  return intra_group_collective(elements, setup);
}

}  // namespace

void validate_comm_setup(const CommSetup& s) {
  auto num = [](double v) { return std::to_string(v); };
  if (!(s.params > 0) || !std::isfinite(s.params))
    throw Error("parameters Ψ = " + num(s.params) + " must be a positive number");
  if (!(s.trainable > 0) || s.trainable > s.params)
    throw Error("trainable parameters Ψ' = " + num(s.trainable) + " must be positive and at most Ψ = " + num(s.params));
  if (s.gpus < 1) throw Error("GPUs N = " + std::to_string(s.gpus) + " must be at least 1");
  if (s.group_size < 1) throw Error("group size M = " + std::to_string(s.group_size) + " must be at least 1");
  if (s.accum < 1) throw Error("accumulation steps s = " + std::to_string(s.accum) + " must be at least 1");
  if (s.gpus % s.group_size != 0)
    throw Error("group size M = " + std::to_string(s.group_size) +
                " must divide the GPU count N = " + std::to_string(s.gpus));
  if (!(s.weight_bytes > 0) || !(s.grad_bytes > 0) || !(s.optimizer_bytes > 0))
    throw Error("bytes per parameter, gradient and optimizer state must be positive");
  // No strategy holds more than three times the unsharded states a GPU (ZeRO++'s second parameter shard, RTP's
  // rotation buffer): bounding those keeps every reported byte count countable (kMaxByteCount).
  const double states = s.weight_bytes * s.params + (s.grad_bytes + s.optimizer_bytes) * s.trainable;
  if (!(3.0 * states <= kMaxByteCount)) {
    const auto g = [](double v) {
      char text[32];
      std::snprintf(text, sizeof text, "%.4g", v);
      return std::string(text);
    };
    throw Error(field("params") + " " + g(s.params) + " at " + field("weight_bytes") + " " + g(s.weight_bytes) + " + " +
                field("grad_bytes") + " " + g(s.grad_bytes) + " + " + field("optimizer_bytes") + " " +
                g(s.optimizer_bytes) + " make more bytes of model states than the " + g(kMaxByteCount / 3.0) +
                " (2^62 / 3) headroom counts");
  }
}

// ---- names ----

Strategy parse_strategy(std::string_view name) {
  const std::string n = normalise(name);
  if (n == "ddp") return flat("DDP", {N, N, N});
  if (n == "zero1") return flat("ZeRO-1", {N, N, G});
  if (n == "zero2") return flat("ZeRO-2", {N, G, G});
  if (n == "zero3") return flat("ZeRO-3", {G, G, G});
  if (n == "fsdp") return flat("FSDP", {G, G, G});
  if (n == "mics") return flat("MiCS", {I, I, I});
  if (n == "hsdp" || n == "fsdphs") return flat("HSDP", {I, I, I});
  if (n == "zero++" || n == "zeropp") {
    Strategy st = flat("ZeRO++", {G, G, G});
    st.secondary_param_copy = true;
    return st;
  }
  if (n == "rtp" || n == "rtpoutofplace" || n == "rtpoutplace") {
    Strategy st = flat("RTP (out-of-place)", {G, G, G});
    st.rotation = Rotation::out_of_place;
    return st;
  }
  if (n == "rtpinplace") {
    Strategy st = flat("RTP (in-place)", {G, G, G});
    st.rotation = Rotation::in_place;
    return st;
  }
  const bool paro = n.size() == 7 && n.starts_with("paro");
  Strategy st;
  const auto code_sharding = sharding_from_code(paro ? std::string_view(n).substr(4) : std::string_view(n));
  if (code_sharding) st.sharding = *code_sharding;
  if (!code_sharding)
    throw Error("unknown sharding strategy '" + std::string(name) + "' (valid: " + std::string(kValidNames) + ")");
  const std::string code = sharding_code(st.sharding);
  if (paro && !satisfies_principle1(st.sharding))
    throw Error("'" + std::string(name) + "' is not a PaRO strategy: " + code +
                " violates Principle 1 (optimizer states must be sharded at least as finely as parameters and "
                "gradients); give the bare code " +
                code + " to model it anyway");
  st.name = satisfies_principle1(st.sharding) ? "PaRO-" + code : code;
  st.collectives = Collectives::hierarchical;
  return st;
}

StateSharding parse_sharding(std::string_view name) {
  const Strategy strategy = parse_strategy(name);
  // The per-stage memory model knows N/I/G sharding only; refusing beats silently dropping ZeRO++'s
  // secondary copy or RTP's rotation buffer.
  if (strategy.secondary_param_copy || strategy.rotation != Rotation::none)
    throw Error("'" + std::string(name) + "' (" + strategy.name +
                ") is modelled by `headroom comm` only, not per pipeline stage (valid here: ddp, zero1, zero2, "
                "zero3, fsdp, mics, hsdp, paro-XYZ or a code like NIG)");
  return strategy.sharding;
}

std::string sharding_code(const StateSharding& s) { return {letter(s.params), letter(s.grads), letter(s.optimizer)}; }

std::string_view to_string(Collectives c) { return c == Collectives::ring ? "ring" : "hierarchical"; }

std::string_view to_string(Rotation r) {
  switch (r) {
    case Rotation::none: return "none";
    case Rotation::in_place: return "in-place";
    case Rotation::out_of_place: return "out-of-place";
  }
  return "none";
}

std::span<const std::string_view> named_schemes() { return kNamedSchemes; }

// ---- principles and Table 1 ----

bool satisfies_principle1(const StateSharding& s) {
  return shard_level(s.optimizer) >= shard_level(s.params) && shard_level(s.optimizer) >= shard_level(s.grads);
}

bool satisfies_principle2(const StateSharding& s) {
  return shard_level(s.params) <= shard_level(s.grads) && shard_level(s.grads) <= shard_level(s.optimizer);
}

bool satisfies_principle3(const StateSharding& s) { return s.grads == N; }

TrainableRegime trainable_regime(double trainable_fraction) {
  if (trainable_fraction >= 1.0) return TrainableRegime::full;
  if (trainable_fraction >= 1.0 / 6.0) return TrainableRegime::at_least_sixth;
  if (trainable_fraction < kPeftMaxFraction) return TrainableRegime::peft;
  return TrainableRegime::below_sixth;
}

std::string_view to_string(TrainableRegime r) {
  switch (r) {
    case TrainableRegime::full: return "psi_prime_eq_psi";
    case TrainableRegime::at_least_sixth: return "psi_prime_ge_psi_over_6";
    case TrainableRegime::below_sixth: return "psi_prime_lt_psi_over_6";
    case TrainableRegime::peft: return "peft";
  }
  return "psi_prime_eq_psi";
}

bool Table1Row::recommended(TrainableRegime r) const {
  switch (r) {
    case TrainableRegime::full: return full;
    case TrainableRegime::at_least_sixth: return at_least_sixth;
    case TrainableRegime::below_sixth: return below_sixth;
    case TrainableRegime::peft: return peft;
  }
  return false;
}

std::span<const Table1Row> paro_table1() { return kTable1; }

const Table1Row* table1_row(const StateSharding& s) {
  const auto it = std::find_if(kTable1.begin(), kTable1.end(), [&](const Table1Row& r) { return r.sharding == s; });
  return it == kTable1.end() ? nullptr : &*it;
}

std::array<StateSharding, 27> all_shardings() {
  constexpr std::array<Shard, 3> kinds = {N, I, G};
  std::array<StateSharding, 27> out{};
  std::size_t i = 0;
  for (Shard p : kinds)
    for (Shard g : kinds)
      for (Shard os : kinds) out[i++] = {p, g, os};
  return out;
}

// ---- memory ----

double shard_ways(Shard s, const CommSetup& setup) {
  return s == N ? 1.0 : s == I ? d(setup.group_size) : d(setup.gpus);
}

// PaRO Table 2, P column: 2Ψ/ways(S_P); ZeRO++ keeps 2Ψ/M more (its secondary intra-group shard).
double param_bytes_per_gpu(const Strategy& st, const CommSetup& s) {
  const double primary = s.weight_bytes * s.params / shard_ways(st.sharding.params, s);
  return primary + (st.secondary_param_copy ? s.weight_bytes * s.params / d(s.group_size) : 0.0);
}

// PaRO Table 2, G column, with Ψ' trainable (Sec. 3.1.2): 2Ψ'/ways(S_G).
double grad_bytes_per_gpu(const Strategy& st, const CommSetup& s) {
  return s.grad_bytes * s.trainable / shard_ways(st.sharding.grads, s);
}

// PaRO Table 2, OS column: KΨ'/ways(S_OS).
double optimizer_bytes_per_gpu(const Strategy& st, const CommSetup& s) {
  return s.optimizer_bytes * s.trainable / shard_ways(st.sharding.optimizer, s);
}

// RTP Table 1: the system holds W + G + max(W, G) out-of-place (each of N GPUs one extra shard), W + G in place.
double rotation_buffer_bytes_per_gpu(const Strategy& st, const CommSetup& s) {
  if (st.rotation != Rotation::out_of_place) return 0.0;
  return std::max(s.weight_bytes * s.params, s.grad_bytes * s.trainable) / d(s.gpus);
}

StateMemory state_memory_per_gpu(const Strategy& st, const CommSetup& s) {
  return {param_bytes_per_gpu(st, s), grad_bytes_per_gpu(st, s), optimizer_bytes_per_gpu(st, s),
          rotation_buffer_bytes_per_gpu(st, s)};
}

// ---- collectives ----

// Ring inside each group: every GPU receives (M − 1) pieces of elements/M (Table 3, MiCS Forward).
Volume intra_group_collective(double elements, const CommSetup& s) {
  const double m = d(s.group_size);
  return {d(s.gpus) * (elements / m) * (m - 1.0), 0.0};
}

// Ring across groups among same-rank GPUs: every GPU receives (g − 1) pieces of elements/g (Eq. 1's
// (Ψ/N)(g − 1) with elements = Ψ/M).
Volume inter_group_collective(double elements, const CommSetup& s) {
  const double g = d(s.groups());
  return {0.0, d(s.gpus) * (elements / g) * (g - 1.0)};
}

// Flat ring: each of the N links carries (N − 1)·elements/N; a ring laid out group by group crosses groups on
// g links (Table 3, ZeRO rows: g·(Ψ/N)(N − 1)† + (N − g)·(Ψ/N)(N − 1)); with one group, on none.
// Hierarchical (PaRO Sec. 3.4): the intra-group step on all elements, the inter-group step on the 1/M piece.
Volume global_collective(double elements, Collectives c, const CommSetup& s) {
  if (c == Collectives::hierarchical)
    return intra_group_collective(elements, s) + inter_group_collective(elements / d(s.group_size), s);
  const double n = d(s.gpus);
  const double per_link = elements / n * (n - 1.0);
  const double inter_links = s.groups() > 1 ? d(s.groups()) : 0.0;
  return {(n - inter_links) * per_link, inter_links * per_link};
}

std::string_view to_string(GradSync g) {
  switch (g) {
    case GradSync::none: return "none";
    case GradSync::reduce_scatter: return "reduce-scatter";
    case GradSync::all_reduce: return "all-reduce";
    case GradSync::all_gather: return "all-gather";
    case GradSync::reduce_then_all_gather: return "all-reduce + all-gather";
  }
  return "none";
}

// ---- stages ----

Volume forward_param_gather(const Strategy& st, const CommSetup& s) {
  return d(s.accum) * scope_change(s.params, st.sharding.params, N, st.collectives, s);
}

Volume backward_param_gather(const Strategy& st, const CommSetup& s) {
  const Shard source = st.secondary_param_copy && st.sharding.params == G ? I : st.sharding.params;
  return d(s.accum) * scope_change(s.params, source, N, st.collectives, s);
}

Volume backward_grad_reduce(const Strategy& st, const CommSetup& s) {
  return d(s.accum) * scope_change(s.trainable, st.sharding.grads, N, st.collectives, s);
}

GradSync update_grad_sync_kind(const StateSharding& sh) {
  const int g = shard_level(sh.grads);
  const int os = shard_level(sh.optimizer);
  if (g == 2 && os == 2) return GradSync::none;  // reduced over everyone every micro-batch, already OS's shard
  if (os > g) return GradSync::reduce_scatter;
  if (os == g) return GradSync::all_reduce;
  return g == 2 ? GradSync::all_gather : GradSync::reduce_then_all_gather;  // outside Principle 1
}

// After the backward passes the gradients are reduced over nobody (S_G = N), over the group (I) or over all
// (G), split like S_G. The optimizer needs them reduced over all N and split like S_OS.
Volume update_grad_sync(const Strategy& st, const CommSetup& s) {
  const Shard gs = st.sharding.grads;
  const Shard os = st.sharding.optimizer;
  const double psi = s.trainable;
  const double m = d(s.group_size);
  const Collectives c = st.collectives;
  switch (update_grad_sync_kind(st.sharding)) {
    case GradSync::none: return {};
    case GradSync::reduce_scatter:
      if (gs == I) return inter_group_collective(psi / m, s);                            // I → G: IIG, NIG (Sec. 3.2)
      if (os == G) return global_collective(psi, c, s);                                  // N → G: ZeRO-1
      return intra_group_collective(psi, s) + 2.0 * inter_group_collective(psi / m, s);  // N → I
    case GradSync::all_reduce:
      if (gs == I) return 2.0 * inter_group_collective(psi / m, s);  // MiCS/HSDP: over each replication group
      return 2.0 * global_collective(psi, c, s);                     // DDP: reduce-scatter + all-gather
    case GradSync::all_gather: return scope_change(psi, G, os, c, s);
    case GradSync::reduce_then_all_gather:  // I → N: all-reduce across groups, all-gather inside them
      return 2.0 * inter_group_collective(psi / m, s) + intra_group_collective(psi, s);
  }
  return {};
}

Volume update_param_gather(const Strategy& st, const CommSetup& s) {
  return scope_change(s.trainable, st.sharding.optimizer, st.sharding.params, st.collectives, s);
}

StageVolumes communication_volume(const Strategy& st, const CommSetup& s) {
  StageVolumes v;
  v.forward_gather_params = forward_param_gather(st, s);
  v.backward_gather_params = backward_param_gather(st, s);
  v.backward_reduce_grads = backward_grad_reduce(st, s);
  v.update_sync_grads = update_grad_sync(st, s);
  v.update_gather_params = update_param_gather(st, s);
  v.update_sync = update_grad_sync_kind(st.sharding);
  return v;
}

double grouped_reduce_scatter_saving(const CommSetup& s) {
  return s.params * (d(s.accum) - 1.0) * (d(s.groups()) - 1.0) / d(s.gpus);
}

}  // namespace headroom
