// The one vocabulary of request knobs: every setting of a layout a user can give, with its one name and every
// spelling each front end takes. The CLI registers its layout options from this table, the Python API takes its
// keywords from it (and its stubs are checked against it), the run files of `calibrate --from-runs` take their
// columns from it, the Megatron-LM log reader its argument names, and errors name a field by it.
// Adding a knob is one row here and its pricing (the estimator's LayoutRequest, framework.hpp layout_request).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace headroom {

// What a knob's value is. count: a positive integer (sizes, batch, tokens); whole: an integer ≥ 0; flag: on or off;
// number: a real within [min, max]; choice: one of `choices`; list: names separated by commas; text: a name or code
// checked by its own parser (sharding).
enum class KnobType { count, whole, flag, number, choice, list, text };

enum class KnobId : std::uint8_t {
  tp,
  cp,
  pp,
  vpp,
  decoder_first_pipeline_num_layers,
  decoder_last_pipeline_num_layers,
  account_for_embedding_in_pipeline_split,
  account_for_loss_in_pipeline_split,
  pipeline_model_parallel_layout,
  ep,
  etp,
  moe_token_dispatcher_type,
  moe_expert_capacity_factor,
  moe_shared_expert_overlap,
  mtp_num_layers,
  context_parallel_rotate_method,
  cp_comm_type,
  precision,
  fp8_format,
  fp8_recipe,
  fp8_param_gather,
  first_last_layers_bf16,
  num_layers_at_start_in_bf16,
  num_layers_at_end_in_bf16,
  optimizer_cpu_offload,
  optimizer_offload_fraction,
  overlap_cpu_optimizer_d2h_h2d,
  use_precision_aware_optimizer,
  main_grads_dtype,
  main_params_dtype,
  exp_avg_dtype,
  exp_avg_sq_dtype,
  grad_reduce_in_bf16,
  fp16,
  accumulate_allreduce_grads_in_fp32,
  overlap_grad_reduce,
  overlap_param_gather,
  overlap_p2p_comm,
  tp_comm_overlap,
  compile,
  cpu_offloading_num_layers,
  mbs,
  gpus,
  dp,
  gbs,
  seq,
  lora_rank,
  lora_targets,
  recompute,
  recompute_method,
  recompute_num_layers,
  recompute_modules,
  schedule,
  sequence_parallel,
  flash_attention,
  attention_backend,
  sharding,
  use_megatron_fsdp,
  fsdp_double_buffer,
  suggested_communication_unit_size,
  megatron_fsdp_main_grads_dtype,
  overlap_comm,
  reduce_bucket_size,
  stage3_prefetch_bucket_size,
  stage3_max_live_parameters,
  stage3_max_reuse_distance,
  zero_hpz_partition_size,
  fsdp_mixed_precision,
};
inline constexpr std::size_t kKnobCount = static_cast<std::size_t>(KnobId::fsdp_mixed_precision) + 1;

struct Knob {
  KnobId id{};
  std::string_view name = {};  // the one name: Python keyword, run-file column, JSON key under "layout", error field
  KnobType type{};
  std::string_view default_text = {};  // what applies when it is not given, as the reference shows it
  std::string_view unit = {};          // of a count or number ("" for none)
  std::string_view flags = {};  // CLI spellings that set it (a flag: on), comma-separated, the first shown in errors
  std::string_view help = {};   // what it means (the CLI's --help line of `flags`)
  std::string_view off_flags = {};  // a flag's CLI spellings that turn it off
  std::string_view off_help = {};
  std::string_view choices = {};  // choice: the valid names, '|'-separated
  double min = 0, max = 0;        // number: the valid range
  std::string_view log_key = {};  // the Megatron-LM argument (megatron/training/arguments.py) that sets it in a log
  std::string_view aliases = {};  // older names a run file or a keyword may use, comma-separated
  std::string_view json = {};     // where `estimate --json` reports it ("" where another field carries it)
  bool show_default = false;      // --help shows the default ("[1]")
};

// The table, in the order the CLI lists the options (estimator/core/src/knobs.cpp).
[[nodiscard]] const std::array<Knob, kKnobCount>& knobs();
[[nodiscard]] const Knob& knob(KnobId id);
// The knob of a name or an alias; nullptr for none.
[[nodiscard]] const Knob* find_knob(std::string_view name);
// The CLI's metavariable of a knob's value ("INT", "NUMBER", "NAME", "LIST").
[[nodiscard]] std::string_view knob_metavar(const Knob& k);

// Largest integer a knob or flag takes (sizes, batch, sequence): keeps every product of two inside int64.
inline constexpr std::int64_t kMaxInteger = 1'000'000'000'000;  // 10^12
// The one integer grammar of headroom's inputs: an optional '+' and decimal digits (no fraction, no exponent, no
// sign but '+'), from `min` to kMaxInteger. `who` names the value in the Error ("--top", or a field()).
[[nodiscard]] std::int64_t parse_integer(std::string_view who, std::string_view text, std::int64_t min = 1);

// A knob's value, typed: count/whole → int64, number → double, flag → bool, choice/list/text → string.
using KnobValue = std::variant<std::int64_t, double, bool, std::string>;

// The value of `text` for the knob, by its type's one grammar: integers are an optional '+' and digits (no
// fraction, no exponent), at most 10^12; flags are true/false/1/0; numbers finite within [min, max]; choices one
// of the names. Throws Error naming the knob as a field (error.hpp) and what is valid.
[[nodiscard]] KnobValue parse_knob(const Knob& k, std::string_view text);
// A typed value checked as parse_knob checks text (the range of an integer or number, a choice's names, lowered;
// a value of another type is an Error), for front ends whose values come typed (the Python keywords).
[[nodiscard]] KnobValue check_knob(const Knob& k, KnobValue v);
// The value as the knob's text ("8", "true", "0.5", "fp8").
[[nodiscard]] std::string knob_text(const KnobValue& v);

// The knobs a user gave, typed; nullopt = not given.
class KnobSettings {
 public:
  void set(KnobId id, KnobValue v) {
    values_[static_cast<std::size_t>(id)] = std::move(v);
    given_[word(id)] |= bit(id);
  }
  [[nodiscard]] bool given(KnobId id) const { return (given_[word(id)] & bit(id)) != 0; }
  // The knobs given, one bit each (bit i of word w: KnobId 64·w + i), for callers that visit only those.
  [[nodiscard]] const std::array<std::uint64_t, 2>& given_bits() const { return given_; }
  [[nodiscard]] const std::optional<KnobValue>& operator[](KnobId id) const {
    return values_[static_cast<std::size_t>(id)];
  }
  [[nodiscard]] std::int64_t integer(KnobId id, std::int64_t fallback) const {
    return given(id) ? std::get<std::int64_t>(*(*this)[id]) : fallback;
  }
  [[nodiscard]] double number(KnobId id, double fallback) const {
    return given(id) ? std::get<double>(*(*this)[id]) : fallback;
  }
  [[nodiscard]] bool flag(KnobId id, bool fallback) const {
    return given(id) ? std::get<bool>(*(*this)[id]) : fallback;
  }
  [[nodiscard]] std::optional<bool> flag(KnobId id) const {
    return given(id) ? std::optional<bool>(std::get<bool>(*(*this)[id])) : std::nullopt;
  }
  [[nodiscard]] const std::string* text(KnobId id) const {
    return given(id) ? &std::get<std::string>(*(*this)[id]) : nullptr;
  }

 private:
  static_assert(kKnobCount <= 128, "given_ holds a bit per knob");
  static constexpr std::size_t word(KnobId id) { return static_cast<std::size_t>(id) / 64; }
  static constexpr std::uint64_t bit(KnobId id) { return std::uint64_t{1} << (static_cast<unsigned>(id) % 64); }
  std::array<std::optional<KnobValue>, kKnobCount> values_;
  std::array<std::uint64_t, 2> given_{};
};

}  // namespace headroom
