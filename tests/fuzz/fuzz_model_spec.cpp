// `--model FILE`: a headroom model spec or a Hugging Face config.json, read as SpecLibrary::model reads it
// (JSON, then the HF key names or the model schema, then the shape checks).
#include <cstdint>

#include "fuzz_support.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom;
  static const SpecLibrary lib(fuzz::data_dir());
  const auto path = fuzz::write_input("config.json", data, size);
  fuzz::value_or_error([&] {
    const ModelSpec m = lib.model(path.string());
    fuzz::require(!m.name.empty(), "a model has a name");
    fuzz::require(m.hidden_size > 0 && m.num_layers > 0 && m.num_heads > 0 && m.num_kv_heads > 0 &&
                      m.ffn_hidden_size > 0 && m.vocab_size > 0 && m.max_context > 0,
                  "every dimension is positive");
    for (const std::int64_t dim :
         {m.hidden_size, m.num_layers, m.num_heads, m.num_kv_heads, m.ffn_hidden_size, m.vocab_size, m.max_context})
      fuzz::require(dim <= 1'000'000'000'000, "every dimension is at most 10^12");
    // Heads of their own width (head_dim, latent attention) need not divide the hidden size.
    fuzz::require((m.hidden_size % m.num_heads == 0 || m.head_dim > 0 || latent_attention(m)) &&
                      m.num_heads % m.num_kv_heads == 0,
                  "heads divide the hidden size (or have their own width) and KV heads divide the heads");
    fuzz::require(m.num_experts == 0 || (m.moe_router_topk >= 1 && m.moe_router_topk <= m.num_experts &&
                                         moe_layers(m) >= 1 && moe_layers(m) <= m.num_layers),
                  "a model with experts routes to 1..E of them on at least one layer");
    const double params = parameter_count(m), active = active_parameter_count(m);
    fuzz::require(fuzz::positive(params), "a finite, positive parameter count");
    fuzz::require(fuzz::positive(active) && active <= params, "active parameters are positive and at most all");
  });
  return 0;
}
