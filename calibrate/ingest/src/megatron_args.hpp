// The run a Megatron-LM arguments map describes (megatron/training/arguments.py dest names and printed values): the
// layout and the model, as a log's arguments block or a launch command gives them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/ingest/measured_runs.hpp"

namespace headroom::calibrate {

// GPT-2's BPE vocabulary (gpt2-vocab.json), Megatron-LM's GPT2BPETokenizer: 50,257 tokens, which Megatron-LM prints
// as "padded vocab (size: 50257)" before padding it.
inline constexpr std::int64_t kGpt2BpeVocabulary = 50257;

// Why a Megatron-core setting changes neither the bytes nor the time headroom prices, stated once for the readers of
// Megatron-LM commands and logs, NeMo configs and recipes, and Megatron-Bridge recipes.
inline constexpr std::string_view kWhyFused =
    "a fused kernel or several of the same work (Megatron-LM fuses by default; an unfused one's extra elementwise "
    "passes are not priced)";
// megatron/core/optimizer/optimizer_config.py: "overlap param all-gather of first bucket with optimizer step".
inline constexpr std::string_view kWhyGatherWithStep =
    "the first bucket's parameter all-gather overlapped with the optimizer step: one bucket's gather a step, not "
    "priced";
inline constexpr std::string_view kWhyGroupedGemm =
    "the experts' GEMMs in one grouped launch or one by one: each at its own shape, as priced";
inline constexpr std::string_view kWhyBalancingLoss =
    "the router's balancing loss: elementwise work on its k·E scores a token";
inline constexpr std::string_view kWhyAuxLossWeight = "the balancing loss's weight";
inline constexpr std::string_view kWhyZLossWeight = "the router's z-loss weight";
inline constexpr std::string_view kWhyRouterDtype = "the router's E scores a token in FP32 or not";
// megatron/core/transformer/moe/router.py: how the scores are computed, scaled and biased picks which k experts a
// token goes to, not how many.
inline constexpr std::string_view kWhyRouterScores =
    "how the router scores the experts: which k a token goes to, not how many";
inline constexpr std::string_view kWhyPermuteFusion =
    "the tokens' permutation in one kernel: the same bytes read and written";

// A Hugging Face tokenizer's size by its repository: len(tokenizer), its vocabulary with the special tokens it adds,
// which NeMo's AutoTokenizer.vocab_size (nemo/collections/common/tokenizers/huggingface/auto_tokenizer.py) and
// Megatron-LM's HuggingFaceTokenizer.vocab_size (megatron/core/tokenizers/text/libraries/huggingface_tokenizer.py)
// return when the run adds no special token (sep and cls then default to the tokenizer's own eos and bos). Only
// repositories whose config.json vocab_size the tokenizer fills exactly (Qwen's pads its embedding beyond it);
// nullopt for any other.
[[nodiscard]] std::optional<std::int64_t> hugging_face_vocabulary(std::string_view repository);

// The sliding window of --window-size and --window-attn-skip-freq into m (ModelSpec::sliding_window counts the query,
// Transformer Engine's left side does not); nothing without a window. Throws Error naming `where`.
void megatron_window(const std::map<std::string, std::string>& args, ModelSpec& m, std::string_view where);

// `lines`: the log's lines (its "padded vocab" line), empty for a command. Throws Error naming `where`.
[[nodiscard]] MeasuredRun megatron_run_from_arguments(const std::map<std::string, std::string>& given,
                                                      const std::vector<std::string_view>& lines,
                                                      std::string_view where);

// A Megatron-DeepSpeed run (its arguments.py; `deepspeed` True): its spellings in Megatron-LM's dests
// (--num-key-value-heads is grouped-query attention, --normalization layernorm|rmsnorm,
// --use-rotary-position-embeddings turns the learned positions off, --checkpoint-activations recomputes every layer).
// What it runs that headroom does not price (DeepSpeed-Ulysses, another optimizer, checkpoints of several layers) is an
// Error naming it.
void megatron_deepspeed_arguments(std::map<std::string, std::string>& args, std::string_view where);
// DeepSpeed's ZeRO stage 0-3 as a sharding (zero/config.py: 0 none, 1 optimizer states, 2 and gradients, 3 and
// parameters, over all of DP).
[[nodiscard]] std::string zero_stage_sharding(std::int64_t stage);
// Megatron-FSDP's --data-parallel-sharding-strategy (no_shard, optim, optim_grads, optim_grads_params) as a sharding:
// ZeRO's stages, the states it shards. Throws Error naming `where` for another name.
[[nodiscard]] std::string megatron_fsdp_sharding(const std::string& strategy, std::string_view where);
// Moves `entry` (a flag or key, alone or followed by its value) from what a reader listed as read to what it ignored,
// with why; whether it was read.
bool read_to_ignored(MegatronCommand& out, std::string_view entry, std::string_view why);

}  // namespace headroom::calibrate
