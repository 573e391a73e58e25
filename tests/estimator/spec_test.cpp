#include "headroom/estimator/spec.hpp"

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../test_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/core/json_schema.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

namespace fs = std::filesystem;

struct Kind {
  const char* folder;
  const char* schema;
};

// Every shipped spec validates against its kind's schema and parses.
TEST(SpecFiles, EveryShippedFileValidates) {
  const SpecLibrary lib = test::library();
  const Kind kinds[] = {{"models", "model"}, {"gpus", "gpu"}, {"clusters", "cluster"}, {"frameworks", "framework"}};
  int files = 0;
  for (const auto& k : kinds) {
    const auto schema = read_json_file(lib.data_dir() / "schema" / (std::string(k.schema) + ".schema.json"));
    for (const auto& name : lib.names(k.folder)) {
      const auto path = lib.data_dir() / k.folder / (name + ".json");
      SCOPED_TRACE(path.string());
      const auto doc = read_json_file(path);
      EXPECT_NO_THROW(validate_against_schema(doc, schema, path.string()));
      EXPECT_EQ(doc.at("name").get<std::string>(), name) << "file name and name field differ";
      ++files;
    }
  }
  EXPECT_GE(files, 12 + 7 + 5 + 1);
  for (const auto& name : lib.names("models")) EXPECT_NO_THROW((void)lib.model(name)) << name;
  for (const auto& name : lib.names("gpus")) EXPECT_NO_THROW((void)lib.gpu(name)) << name;
  for (const auto& name : lib.names("clusters")) EXPECT_NO_THROW((void)lib.cluster(name)) << name;
  for (const auto& name : lib.names("frameworks")) EXPECT_NO_THROW((void)lib.framework(name)) << name;
}

TEST(SpecFiles, RequiredSpecsAreShipped) {
  const SpecLibrary lib = test::library();
  for (const char* m : {"llama-7b", "llama-65b", "llama2-7b", "llama2-70b", "llama3.1-8b", "llama3.1-70b",
                        "llama3.1-405b", "gpt2", "gpt2-large", "gpt2-xl"})
    EXPECT_NO_THROW((void)lib.model(m)) << m;
  for (const char* g : {"a100-40gb", "a100-80gb", "h100-80gb", "h100-94gb", "h200", "mi250x-gcd", "mi300x", "b200"})
    EXPECT_NO_THROW((void)lib.gpu(g)) << g;
  for (const char* c : {"dgx-a100-40gb", "dgx-a100-80gb", "dgx-h100", "dgx-b200", "h100-94gb-x4", "lumi-mi250x"})
    EXPECT_NO_THROW((void)lib.cluster(c)) << c;
  EXPECT_EQ(lib.cluster("h100-94gb-x4").gpus_per_node, 4);
  EXPECT_DOUBLE_EQ(lib.cluster("lumi-mi250x").gpu.memory_bytes, 64 * kGiB);
}

TEST(SpecLibrary, NamesAreCaseInsensitive) { EXPECT_EQ(test::library().model("Llama3.1-8B").hidden_size, 4096); }

TEST(SpecLibrary, UnknownNameListsKnownOnes) {
  try {
    (void)test::library().model("llama9");
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown model 'llama9'"), std::string::npos) << what;
    EXPECT_NE(what.find("llama3.1-8b"), std::string::npos) << what;
  }
}

// A data folder without specs of a kind says so instead of listing nothing ("known: ;").
TEST(SpecLibrary, AnEmptyDataFolderSaysItHasNone) {
  const fs::path dir = fs::temp_directory_path() / ("headroom-empty-data-" + std::to_string(::getpid()));
  fs::create_directories(dir / "models");
  const SpecLibrary empty(dir);
  for (const std::string name : {"llama3.1-8b", ""}) {
    try {
      (void)empty.model(name);
      FAIL() << name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("(known: none in " + (dir / "models").string()), std::string::npos)
          << e.what();
    }
  }
  fs::remove_all(dir);
}

class TempFile {
 public:
  explicit TempFile(const std::string& text, const std::string& name = "spec.json")
      : dir_(fs::temp_directory_path() /
             ("headroom-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())),
        path_(dir_ / name) {
    fs::create_directories(dir_);
    std::ofstream(path_) << text;
  }
  ~TempFile() { fs::remove_all(dir_); }
  [[nodiscard]] std::string path() const { return path_.string(); }

 private:
  fs::path dir_, path_;
};

// compute_capability_major is torch's major version: an integer (gpu.schema.json), named where it is not; absent, 0.
TEST(SpecLibrary, ComputeCapabilityIsAnInteger) {
  const SpecLibrary lib = test::library();
  EXPECT_EQ(lib.gpu("h100-80gb").compute_capability_major, 9);
  EXPECT_EQ(lib.gpu("b200").compute_capability_major, 10);
  nlohmann::json j = read_json_file(lib.data_dir() / "gpus" / "h100-80gb.json");
  j["name"] = "h100-custom";
  j["compute_capability_major"] = "9.0";
  const TempFile text(j.dump(), "text.json");
  try {
    (void)lib.gpu(text.path());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compute_capability_major must be integer (got \"9.0\")"), std::string::npos)
        << e.what();
  }
  j.erase("compute_capability_major");
  const TempFile absent(j.dump(), "absent.json");
  EXPECT_EQ(lib.gpu(absent.path()).compute_capability_major, 0);
}

// kernels_as lends a GPU another's fitted efficiencies: a name that is no GPU of the library is refused at load instead
// of leaving the GPU on datasheet defaults; a known one is found whatever its case.
TEST(SpecLibrary, AKernelsAsThatNamesNoGpuIsRefused) {
  const SpecLibrary lib = test::library();
  nlohmann::json j = read_json_file(lib.data_dir() / "gpus" / "h100-80gb.json");
  j["name"] = "h100-custom";
  j["kernels_as"] = "nosuch";
  const TempFile dangling(j.dump(), "dangling.json");
  try {
    (void)lib.gpu(dangling.path());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(": kernels_as 'nosuch' names no GPU (known: a100-40gb, "), std::string::npos)
        << e.what();
  }
  j["kernels_as"] = "H100-94GB";
  const TempFile known(j.dump(), "known.json");
  EXPECT_EQ(lib.gpu(known.path()).kernels_as, "H100-94GB");
}

// A Hugging Face config.json of Llama 3.1 8B (the keys that matter) gives the shipped spec's numbers.
TEST(SpecLibrary, HuggingFaceConfig) {
  const TempFile f(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "max_position_embeddings": 131072, "hidden_act": "silu", "tie_word_embeddings": false,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "torch_dtype": "bfloat16"})",
                   "config.json");
  const SpecLibrary lib = test::library();
  const ModelSpec hf = lib.model(f.path());
  EXPECT_DOUBLE_EQ(parameter_count(hf), parameter_count(lib.model("llama3.1-8b")));
  EXPECT_EQ(hf.mlp, Mlp::swiglu);
}

TEST(SpecLibrary, Gpt2HuggingFaceConfig) {
  const TempFile f(R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
    "vocab_size": 50257, "activation_function": "gelu_new"})",
                   "config.json");
  const ModelSpec m = test::library().model(f.path());
  EXPECT_EQ(m.mlp, Mlp::gelu);
  EXPECT_TRUE(m.tied_embeddings);
  EXPECT_NEAR(parameter_count(m), 124'439'808.0, 1.0);  // GPT-2 small as released
  EXPECT_EQ(m.attention_dropout, 0.0);                  // absent: none
  const TempFile with_dropout(R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "attn_pdrop": 0.1,
    "vocab_size": 50257})",
                              "config.json");
  EXPECT_EQ(test::library().model(with_dropout.path()).attention_dropout, 0.1);
}

TEST(SpecLibrary, MalformedAndIncompleteModelsAreErrors) {
  const SpecLibrary lib = test::library();
  const TempFile bad(R"({"name": "x", "hidden_size": 4096,)");
  EXPECT_THROW((void)lib.model(bad.path()), Error);
  const TempFile incomplete(R"({"name": "x", "hidden_size": 4096, "num_layers": 2})");
  EXPECT_THROW((void)lib.model(incomplete.path()), Error);
  const TempFile negative(R"({"name": "x", "hidden_size": -4096, "num_layers": 2, "num_attention_heads": 32,
    "num_kv_heads": 8, "ffn_hidden_size": 100, "vocab_size": 10, "max_context_tokens": 10,
    "tie_word_embeddings": false, "norm": "rmsnorm", "activation": "swiglu"})");
  EXPECT_THROW((void)lib.model(negative.path()), Error);
  const TempFile unknown_key(R"({"name": "x", "hidden_size": 4096, "num_layers": 2, "num_attention_heads": 32,
    "num_kv_heads": 8, "ffn_hidden_size": 100, "vocab_size": 10, "max_context_tokens": 10,
    "tie_word_embeddings": false, "norm": "rmsnorm", "activation": "swiglu", "hiden_size": 1})");
  EXPECT_THROW((void)lib.model(unknown_key.path()), Error);
}

// Inputs the spec fuzz targets (tests/fuzz) found or were built to reach: each must be an Error, not an exception
// of another type, a stack overflow or undefined behaviour.
TEST(SpecLibrary, FuzzFoundSpecsAreErrors) {
  const SpecLibrary lib = test::library();
  const auto refused = [](const auto& load, const std::string& fragment) {
    try {
      load();
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  // A number beyond a double: nlohmann throws out_of_range, which is not a parse_error.
  const TempFile overflow(R"({"name": "x", "memory_GiB": -1e400})", "overflow.json");
  refused([&] { (void)lib.gpu(overflow.path()); }, "number overflow parsing '-1e400'");
  refused([&] { (void)lib.cluster(overflow.path()); }, "malformed JSON");
  // Nested deep enough that dump() in the schema checker's message overflowed the stack.
  const TempFile deep(std::string(200000, '[') + std::string(200000, ']'), "deep.json");
  refused([&] { (void)lib.gpu(deep.path()); }, "nested deeper than 64 levels");
  // A GPT-2 config whose default FFN width 4·h overflowed int64.
  const TempFile huge(R"({"model_type": "gpt2", "n_embd": 4611686018427387904, "n_layer": 1, "n_head": 1,
    "vocab_size": 1})",
                      "config.json");
  refused([&] { (void)lib.model(huge.path()); }, "n_embd must be a positive integer up to 10^12");
  const TempFile wide(R"({"name": "x", "hidden_size": 8e18, "num_layers": 1, "num_attention_heads": 1,
    "num_kv_heads": 1, "ffn_hidden_size": 1, "vocab_size": 1, "max_context_tokens": 1,
    "tie_word_embeddings": false, "norm": "rmsnorm", "activation": "gelu"})",
                      "wide.json");
  refused([&] { (void)lib.model(wide.path()); }, "hidden_size 8000000000000000000 is larger than 10^12");
}

// A different die's kernels_scale multiplies the fractions of peak of the GPU it computes as; without kernels_as,
// or out of (0, 2], it is refused.
TEST(SpecLibrary, KernelsScaleNeedsKernelsAsAndABound) {
  const SpecLibrary lib = test::library();
  const GpuSpec mi300x = lib.gpu("mi300x");
  EXPECT_EQ(mi300x.kernels_as, "h100-94gb");
  EXPECT_DOUBLE_EQ(mi300x.kernels_gemm_scale, 0.69);
  EXPECT_DOUBLE_EQ(mi300x.kernels_attention_scale, 0.76);
  EXPECT_DOUBLE_EQ(lib.gpu("h200").kernels_gemm_scale, 1.0);
  nlohmann::json j = nlohmann::json::parse(R"({"name": "x", "vendor": "amd", "memory_GiB": 1, "usable_memory_GiB": 1,
    "bf16_dense_TFLOPs": 1, "fp16_dense_TFLOPs": 1, "fp32_TFLOPs": 1, "hbm_bandwidth_GBps": 1,
    "kernels_scale": {"gemm": 0.5, "attention": 0.5}})");
  EXPECT_THROW((void)gpu_from_json(j, "x.json"), Error);  // no kernels_as
  j["kernels_as"] = "h100-94gb";
  EXPECT_DOUBLE_EQ(gpu_from_json(j, "x.json").kernels_gemm_scale, 0.5);
  j["kernels_scale"]["attention"] = 3.0;
  EXPECT_THROW((void)gpu_from_json(j, "x.json"), Error);
  // The context takes the other GPU's entry at the scales; its own entry would not be scaled.
  PerfCoefficients c;
  c.gpus.push_back({"h100-94gb", 0.6, 0.3, ""});
  ClusterSpec cluster = lib.cluster("dgx-h100");
  cluster.gpu = mi300x;
  const PerfContext p(c, cluster);
  EXPECT_DOUBLE_EQ(p.gemm_efficiency, 0.6 * 0.69);
  EXPECT_DOUBLE_EQ(p.attention_efficiency, 0.3 * 0.76);
  c.gpus.push_back({"mi300x", 0.4, 0.2, ""});
  EXPECT_DOUBLE_EQ(PerfContext(c, cluster).gemm_efficiency, 0.4);
}

TEST(JsonSchema, ReportsPathAndBound) {
  const auto schema = nlohmann::json::parse(R"({"type": "object", "additionalProperties": false,
    "required": ["a"], "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer",
    "minimum": 1}}}}})");
  try {
    validate_against_schema(nlohmann::json::parse(R"({"a": {"b": 0}})"), schema, "where");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "where: a.b must be >= 1 (got 0)");
  }
  EXPECT_THROW(validate_against_schema(nlohmann::json::parse(R"({"a": {"b": 1e300}})"), schema, "w"), Error);
  EXPECT_NO_THROW(validate_against_schema(nlohmann::json::parse(R"({"a": {"b": 7e9}})"), schema, "w"));
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

std::string model_error(const std::string& config) {
  const TempFile f(config, "config.json");
  try {
    (void)test::library().model(f.path());
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

const std::string kMixtral = R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000,
  "max_position_embeddings": 32768, "hidden_act": "silu", "num_local_experts": 8, "num_experts_per_tok": 2,
  "sliding_window": null, "tie_word_embeddings": false})";

// A config whose arithmetic headroom does not price is refused naming the key (a Mixtral-8x7B
// config was priced as a dense 7.24B model); a wrong-typed key names key and file instead of a json type_error.
TEST(HuggingFaceConfig, RefusesWhatItCannotPriceNamingTheKey) {
  EXPECT_NE(model_error(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "num_attention_heads": 16,
    "num_hidden_layers": 24, "vocab_size": 151936, "intermediate_size": 5632, "num_experts": 60,
    "num_experts_per_tok": 4, "moe_intermediate_size": 1408, "decoder_sparse_step": 2})")
                .find("decoder_sparse_step = 2: experts on every N-th layer only"),
            std::string::npos);
  EXPECT_NE(model_error(R"({"model_type": "qwen3_moe", "hidden_size": 2048, "num_attention_heads": 32,
    "num_hidden_layers": 48, "vocab_size": 151936, "intermediate_size": 6144, "num_experts": 128,
    "num_experts_per_tok": 8, "moe_intermediate_size": 768, "mlp_only_layers": [0]})")
                .find("mlp_only_layers = [0]: dense layers between expert layers"),
            std::string::npos);
  EXPECT_NE(model_error(R"({"model_type": "mixtral", "hidden_size": 4096, "num_attention_heads": 32,
    "num_hidden_layers": 32, "vocab_size": 32000, "intermediate_size": 14336, "num_local_experts": 8})")
                .find("missing 'num_experts_per_tok'"),
            std::string::npos);
  EXPECT_NE(model_error(R"({"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
    "num_hidden_layers": 61, "vocab_size": 129280, "intermediate_size": 18432, "kv_lora_rank": 512})")
                .find("missing 'qk_nope_head_dim'"),
            std::string::npos);
  EXPECT_NE(model_error(R"({"model_type": "qwen3", "hidden_size": 4096, "num_attention_heads": 32,
    "num_hidden_layers": 36, "vocab_size": 151936, "intermediate_size": 12288, "sliding_window": 4096,
    "use_sliding_window": true, "max_window_layers": 28})")
                .find("max_window_layers 28 (windows on the last layers only) cannot be priced"),
            std::string::npos);
  EXPECT_NE(model_error(R"({"model_type": "mistral", "hidden_size": 64, "num_attention_heads": 4,
    "num_hidden_layers": 3, "vocab_size": 100, "intermediate_size": 128, "sliding_window": 16,
    "max_position_embeddings": 64, "layer_types": ["full_attention", "sliding_attention", "sliding_attention"]})")
                .find("layer_types mixes windowed and full layers in a pattern headroom cannot price"),
            std::string::npos);
  // Layers that are not attention + MLP (Mamba, recurrent, linear attention) are refused, not priced as attention: by
  // model_type (Jamba), by the keys that lay them out (Nemotron-H's pattern) and by layer_types (Qwen3-Next).
  EXPECT_NE(model_error(R"({"model_type": "jamba", "hidden_size": 4096, "num_attention_heads": 32,
    "num_hidden_layers": 32, "vocab_size": 65536, "intermediate_size": 14336})")
                .find("model_type jamba has state-space, recurrent or linear-attention layers"),
            std::string::npos);
  EXPECT_NE(model_error(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    "num_hidden_layers": 4, "vocab_size": 131072, "intermediate_size": 21504, "hybrid_override_pattern": "M-M*"})")
                .find("hybrid_override_pattern describes layers that are not attention + MLP"),
            std::string::npos);
  EXPECT_NE(model_error(R"({"model_type": "custom", "hidden_size": 2048, "num_attention_heads": 16,
    "num_hidden_layers": 2, "vocab_size": 151936, "intermediate_size": 5120,
    "layer_types": ["linear_attention", "full_attention"]})")
                .find("layer_types entry \"linear_attention\" is not sliding_attention or full_attention"),
            std::string::npos);
  for (const char* key : {"tie_word_embeddings", "model_type", "hidden_act", "_name_or_path"}) {
    const std::string type = std::string(key) == "model_type" ? "" : R"("model_type": "llama", )";
    const std::string bad = R"({"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2, )" + type +
                            R"("vocab_size": 100, "intermediate_size": 128, ")" + std::string(key) + R"(": [1]})";
    const auto e = model_error(bad);
    EXPECT_NE(e.find(std::string(key) + " is a array"), std::string::npos) << e;
    EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  }
}

// A config of a model type headroom does not model (BLOOM: ALiBi, embedding LayerNorm) or of none is refused naming
// it, not priced as a Llama decoder; so is top-k routing over fewer than k experts, not priced dense.
TEST(HuggingFaceConfig, AModelTypeItDoesNotModelIsRefusedNamingIt) {
  const std::string opt = model_error(R"({"architectures": ["OPTForCausalLM"], "hidden_size": 768,
    "model_type": "opt", "num_attention_heads": 12, "num_hidden_layers": 12, "ffn_dim": 3072, "vocab_size": 50272})");
  EXPECT_NE(opt.find("config.json: model_type opt is not modelled (headroom prices the Hugging Face model types "
                     "llama, mistral, "),
            std::string::npos)
      << opt;
  const std::string untyped = model_error(R"({"hidden_size": 4096, "num_attention_heads": 32,
    "num_hidden_layers": 32, "vocab_size": 32000, "intermediate_size": 11008})");
  EXPECT_NE(untyped.find("config.json: no model_type (headroom prices the Hugging Face model types llama, "),
            std::string::npos)
      << untyped;
  std::string no_experts = kMixtral;
  no_experts.replace(no_experts.find("\"num_local_experts\": 8"), 22, "\"num_local_experts\": 0");
  EXPECT_NE(model_error(no_experts).find("num_local_experts 0 is fewer than num_experts_per_tok 2"), std::string::npos)
      << model_error(no_experts);
  EXPECT_EQ(test::library().model(TempFile(kMixtral, "config.json").path()).num_experts, 8);
}

// The parameter counts of the shipped Qwen2.5-72B and Mistral-7B specs are those of their
// checkpoints (q, k, v biases included for Qwen2), a Qwen2 config read as it is gives the same model, and
// Llama-family attention or MLP biases, priced nowhere, are refused naming the key.
TEST(HuggingFaceConfig, Qwen2BiasesAndMistralCountAsTheirCheckpoints) {
  const SpecLibrary lib = test::library();
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(lib.model("qwen2.5-72b"))), 72'706'203'648);
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(lib.model("mistral-7b"))), 7'248'023'552);
  const TempFile qwen(R"({"model_type": "qwen2", "hidden_size": 8192, "num_attention_heads": 64,
    "num_key_value_heads": 8, "num_hidden_layers": 80, "vocab_size": 152064, "intermediate_size": 29568,
    "max_position_embeddings": 131072, "sliding_window": 131072, "use_sliding_window": false,
    "tie_word_embeddings": false})",
                      "config.json");
  const ModelSpec q = lib.model(qwen.path());
  EXPECT_TRUE(q.qkv_bias);
  EXPECT_EQ(parameter_count(q), parameter_count(lib.model("qwen2.5-72b")));
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    const auto e = model_error(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, ")" +
                               std::string(key) + R"(": true})");
    EXPECT_NE(e.find(std::string(key) + " = true: biases"), std::string::npos) << e;
  }
}

// What changes the arithmetic but not the cost (RoPE's base and scaling, the norms' epsilon, Gemma's GeGLU, norms,
// embedding scale, soft caps and query scale) is read from a config as the shipped specs give it, for the launch
// arguments; a gated MLP's activation that is neither SiLU nor GELU is refused, naming it.
TEST(HuggingFaceConfig, ArithmeticPropertiesAreReadAsTheShippedSpecsGiveThem) {
  const SpecLibrary lib = test::library();
  const TempFile llama(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 128256, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "hidden_act": "silu", "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})",
                       "config.json");
  const ModelSpec l = lib.model(llama.path()), shipped_llama = lib.model("llama3.1-8b");
  for (const ModelSpec* m : {&l, &shipped_llama}) {
    EXPECT_EQ(m->rope_theta, 500000);
    EXPECT_EQ(m->rope_scaling, "llama3");
    EXPECT_EQ(m->rope_scaling_factor, 8);
    EXPECT_EQ(m->norm_eps, 1e-5);
    EXPECT_EQ(m->mlp, Mlp::swiglu);
    EXPECT_FALSE(m->norm_plus_one || m->scaled_embeddings);
  }
  const TempFile gemma2(R"({"model_type": "gemma2", "hidden_size": 4608, "num_attention_heads": 32,
    "num_key_value_heads": 16, "head_dim": 128, "num_hidden_layers": 46, "vocab_size": 256000,
    "intermediate_size": 36864, "max_position_embeddings": 8192, "hidden_activation": "gelu_pytorch_tanh",
    "hidden_act": "gelu_pytorch_tanh", "sliding_window": 4096, "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 144, "rms_norm_eps": 1e-06, "rope_theta": 10000.0})",
                        "config.json");
  const ModelSpec g = lib.model(gemma2.path()), shipped_gemma = lib.model("gemma-2-27b");
  for (const ModelSpec* m : {&g, &shipped_gemma}) {
    EXPECT_EQ(m->mlp, Mlp::geglu);
    EXPECT_TRUE(m->norm_plus_one && m->scaled_embeddings);
    EXPECT_EQ(m->attention_softcap, 50);
    EXPECT_EQ(m->final_softcap, 30);
    EXPECT_EQ(m->query_pre_attn_scalar, 144);
    EXPECT_EQ(m->norm_eps, 1e-6);
    EXPECT_EQ(m->rope_theta, 10000);
    EXPECT_TRUE(m->rope_scaling.empty());
  }
  EXPECT_EQ(parameter_count(g), parameter_count(shipped_gemma));  // GeGLU prices as SwiGLU
  // transformers' newer rope_parameters carry the base and the scaling type.
  const TempFile qwen3(R"({"model_type": "qwen3", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 36, "vocab_size": 151936,
    "intermediate_size": 12288, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}})",
                       "config.json");
  const ModelSpec q = lib.model(qwen3.path());
  EXPECT_EQ(q.rope_theta, 1e6);
  EXPECT_TRUE(q.rope_scaling.empty());
  EXPECT_EQ(q.norm_eps, 0);  // not given
  const auto e = model_error(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "hidden_act": "relu"})");
  EXPECT_NE(e.find("hidden_act = \"relu\" is not an activation headroom prices in a gated MLP"), std::string::npos)
      << e;
}

// Heads wider or narrower than h/a (Gemma, Qwen3), Gemma 2's four norms per layer, q/k norms and
// sliding windows, as transformers builds them. Parameter counts are the checkpoints' (Gemma-7B 8,537,680,896 and
// Gemma-2-27B 27,227,128,320, their model cards' 8.54B and 27.2B; Qwen3-8B 8,190,735,360, "8.2B").
TEST(HuggingFaceConfig, GemmaAndQwen3HeadsNormsAndWindowsCountAsTheirCheckpoints) {
  const SpecLibrary lib = test::library();
  const ModelSpec shipped = lib.model("gemma-2-27b");
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(shipped)), 27'227'128'320);
  EXPECT_EQ(window_layers(shipped), 23);
  const TempFile gemma2(R"({"model_type": "gemma2", "hidden_size": 4608, "num_attention_heads": 32,
    "num_key_value_heads": 16, "head_dim": 128, "num_hidden_layers": 46, "vocab_size": 256000,
    "intermediate_size": 36864, "max_position_embeddings": 8192, "hidden_activation": "gelu_pytorch_tanh",
    "hidden_act": "gelu_pytorch_tanh", "sliding_window": 4096, "attn_logit_softcapping": 50.0,
    "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 144})",
                        "config.json");
  const ModelSpec g2 = lib.model(gemma2.path());
  EXPECT_EQ(parameter_count(g2), parameter_count(shipped));
  EXPECT_TRUE(g2.sandwich_norms && g2.tied_embeddings && g2.mlp == Mlp::geglu);
  EXPECT_EQ(g2.sliding_window, 4096);
  EXPECT_EQ(g2.window_skip_freq, 2);
  const TempFile gemma(R"({"model_type": "gemma", "hidden_size": 3072, "num_attention_heads": 16,
    "num_key_value_heads": 16, "head_dim": 256, "num_hidden_layers": 28, "vocab_size": 256000,
    "intermediate_size": 24576, "hidden_act": "gelu"})",
                       "config.json");
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(lib.model(gemma.path()))), 8'537'680'896);
  const TempFile qwen3(R"({"model_type": "qwen3", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 36, "vocab_size": 151936,
    "intermediate_size": 12288, "max_position_embeddings": 40960, "sliding_window": null,
    "use_sliding_window": false, "max_window_layers": 36, "tie_word_embeddings": false})",
                       "config.json");
  const ModelSpec q3 = lib.model(qwen3.path());
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_EQ(q3.head_dim, 0);  // 128 = h/a: the same model as without the key
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(q3)), 8'190'735'360);
  // Mistral-7B v0.1 windows every layer; an explicit layer_types list of Gemma 2's form reads as its default.
  const TempFile mistral(R"({"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": 32000, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "sliding_window": 4096})",
                         "config.json");
  const ModelSpec m1 = lib.model(mistral.path());
  EXPECT_EQ(window_layers(m1), 32);
  std::string types;
  for (int i = 0; i < 46; ++i)
    types += std::string(types.empty() ? "" : ", ") + (i % 2 == 0 ? "\"sliding_attention\"" : "\"full_attention\"");
  const TempFile listed(R"({"model_type": "gemma2", "hidden_size": 4608, "num_attention_heads": 32,
    "num_key_value_heads": 16, "head_dim": 128, "num_hidden_layers": 46, "vocab_size": 256000,
    "intermediate_size": 36864, "max_position_embeddings": 8192, "sliding_window": 4096, "layer_types": [)" +
                            types + "]}",
                        "config.json");
  EXPECT_EQ(lib.model(listed.path()).window_skip_freq, 2);
}

// Mixture-of-experts configs as they are. Total and active parameters are the published
// oracle for Mixtral-8x7B (46,702,792,704 / 12,879,925,248) and the model cards' for Mixtral-8x22B (141B / 39B) and
// Qwen3-30B-A3B / 235B-A22B (30.5B / 3.3B, 235B / 22B); a config read as it is gives the shipped spec's counts.
TEST(HuggingFaceConfig, ExpertModelsCountTotalAndActiveParameters) {
  const SpecLibrary lib = test::library();
  struct Count {
    const char* name;
    std::int64_t total, active;
  };
  for (const Count& c :
       {Count{"mixtral-8x7b", 46'702'792'704, 12'879'925'248}, Count{"mixtral-8x22b", 140'630'071'296, 39'161'468'928},
        Count{"qwen3-30b-a3b", 30'532'122'624, 3'353'032'704},
        Count{"qwen3-235b-a22b", 235'093'634'560, 22'190'763'520}}) {
    const ModelSpec m = lib.model(c.name);
    EXPECT_EQ(static_cast<std::int64_t>(parameter_count(m)), c.total) << c.name;
    EXPECT_EQ(static_cast<std::int64_t>(active_parameter_count(m)), c.active) << c.name;
  }
  // DeepSeek-V3: 671.0B and 37.5B without its multi-token-prediction layer (technical report Sec. 4.2; Megatron-LM's
  // theoretical_memory_usage.py prints 671.03 and 37.55), read from its config.json as it is.
  const ModelSpec v3 = lib.model("deepseek-v3");
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(v3)), 671'026'404'352);
  EXPECT_EQ(static_cast<std::int64_t>(active_parameter_count(v3)), 37'552'282'624);
  EXPECT_GT(mtp_parameters(v3), 11e9);
  // DeepSeek-V2: 236B parameters, 21B activated (its report, Sec. 1); V2-Lite 15.7B (its model card).
  const ModelSpec v2 = lib.model("deepseek-v2"), lite = lib.model("deepseek-v2-lite");
  EXPECT_NEAR(parameter_count(v2) / 1e9, 236.0, 0.5);
  EXPECT_NEAR(active_parameter_count(v2) / 1e9, 21.0, 0.5);
  EXPECT_NEAR(parameter_count(lite) / 1e9, 15.7, 0.05);
  // GLM-4.5: 355B parameters, 32B active; GLM-4.5-Air 106B, 12B active (their model cards, rounded; active without
  // the input and output embeddings).
  for (const auto& [name, total, active] :
       {std::tuple{"glm-4.5", 355.0, 32.0}, std::tuple{"glm-4.5-air", 106.0, 12.0}}) {
    const ModelSpec glm = lib.model(name);
    const double embeddings = 2.0 * static_cast<double>(glm.vocab_size) * static_cast<double>(glm.hidden_size);
    EXPECT_NEAR(parameter_count(glm) / 1e9, total, 0.01 * total) << name;
    EXPECT_NEAR((active_parameter_count(glm) - embeddings) / 1e9, active, 0.02 * active) << name;
    EXPECT_EQ(glm.mtp_layers, 1) << name;
  }
  const TempFile deepseek(R"({"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
    "num_key_value_heads": 128, "num_hidden_layers": 61, "vocab_size": 129280, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "moe_layer_freq": 1, "q_lora_rank": 1536, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "num_nextn_predict_layers": 1,
    "max_position_embeddings": 163840, "hidden_act": "silu", "tie_word_embeddings": false, "n_group": 8,
    "topk_group": 4, "scoring_func": "sigmoid", "rope_scaling": {"type": "yarn", "factor": 40}})",
                          "config.json");
  const ModelSpec read = lib.model(deepseek.path());
  EXPECT_EQ(parameter_count(read), parameter_count(v3));
  EXPECT_EQ(active_parameter_count(read), active_parameter_count(v3));
  EXPECT_EQ(read.mtp_layers, 1);
  EXPECT_EQ(read.moe_router_num_groups, v3.moe_router_num_groups);  // n_group 8, topk_group 4: the shipped model's
  EXPECT_EQ(read.moe_router_group_topk, v3.moe_router_group_topk);
  const TempFile mixtral(kMixtral, "config.json");
  const ModelSpec m = lib.model(mixtral.path());
  EXPECT_EQ(m.num_experts, 8);
  EXPECT_EQ(m.moe_router_topk, 2);
  EXPECT_EQ(parameter_count(m), parameter_count(lib.model("mixtral-8x7b")));
  const TempFile qwen3(R"({"model_type": "qwen3_moe", "hidden_size": 2048, "num_attention_heads": 32,
    "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 48, "vocab_size": 151936,
    "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "max_position_embeddings": 40960, "sliding_window": null,
    "use_sliding_window": false, "tie_word_embeddings": false, "norm_topk_prob": true})",
                       "config.json");
  EXPECT_EQ(parameter_count(lib.model(qwen3.path())), parameter_count(lib.model("qwen3-30b-a3b")));
  // Qwen1.5-MoE-A2.7B: 60 experts of 1,408, top 4, a gated shared expert of 5,632 (14.3B total, 2.7B active).
  const TempFile qwen2(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "num_attention_heads": 16,
    "num_key_value_heads": 16, "num_hidden_layers": 24, "vocab_size": 151936, "intermediate_size": 5632,
    "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_experts": 60,
    "num_experts_per_tok": 4, "decoder_sparse_step": 1, "max_position_embeddings": 8192,
    "tie_word_embeddings": false})",
                       "config.json");
  const ModelSpec q2 = lib.model(qwen2.path());
  EXPECT_TRUE(q2.qkv_bias && q2.shared_expert_gate);
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(q2)), 14'315'784'192);
  EXPECT_EQ(static_cast<std::int64_t>(active_parameter_count(q2)), 2'689'173'504);
}

// gpt-oss (OpenAI's model card, Table 1: 20.91B and 116.83B parameters, 3.61B and 5.13B active without the input
// embedding): biases on every linear layer, experts and router included, a sink logit per head, a 128-token window on
// every other layer from the first; its Hugging Face config reads as the shipped model.
TEST(HuggingFaceConfig, GptOssReadsAsTheShippedModelWithItsBiasesAndSinks) {
  const SpecLibrary lib = test::library();
  for (const auto& [name, total, active] :
       {std::tuple{"gpt-oss-20b", 20.91, 3.61}, std::tuple{"gpt-oss-120b", 116.83, 5.13}}) {
    const ModelSpec m = lib.model(name);
    const double input_embedding = static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size);
    EXPECT_NEAR(parameter_count(m) / 1e9, total, 0.005) << name;
    EXPECT_NEAR((active_parameter_count(m) - input_embedding) / 1e9, active, 0.005) << name;
  }
  std::string layer_types;
  for (int i = 0; i < 24; ++i)
    layer_types += std::string(i ? ", " : "") + (i % 2 ? "\"full_attention\"" : "\"sliding_attention\"");
  const std::string config = R"({"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "hidden_size": 2880,
    "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
    "intermediate_size": 2880, "num_local_experts": 32, "num_experts_per_tok": 4, "experts_per_token": 4,
    "vocab_size": 201088, "max_position_embeddings": 131072, "initial_context_length": 4096, "sliding_window": 128,
    "hidden_act": "silu", "swiglu_limit": 7.0, "rms_norm_eps": 1e-05, "rope_theta": 150000, "router_aux_loss_coef": 0.9,
    "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
    "original_max_position_embeddings": 4096, "truncate": false}, "tie_word_embeddings": false,
    "layer_types": [)" + layer_types +
                             "], ";
  const TempFile hf(config + R"("attention_bias": true})", "config.json");
  const ModelSpec read = lib.model(hf.path()), shipped = lib.model("gpt-oss-20b");
  EXPECT_EQ(parameter_count(read), parameter_count(shipped));
  EXPECT_EQ(active_parameter_count(read), active_parameter_count(shipped));
  EXPECT_TRUE(read.linear_biases && read.attention_sinks);
  EXPECT_EQ(read.sliding_window, 128);
  EXPECT_EQ(read.window_skip_freq, 2);
  EXPECT_NE(model_error(config + R"("attention_bias": false})").find("attention_bias = false"), std::string::npos);
  std::string other = config + R"("attention_bias": true})";
  other.replace(other.find("\"experts_per_token\": 4"), 22, "\"experts_per_token\": 2");
  EXPECT_NE(model_error(other).find("experts_per_token 2 differs"), std::string::npos);
}

// GPT-NeoX (EleutherAI's Pythia-6.9B config.json): LayerNorm, biases on every linear layer, a plain GELU MLP of 4h,
// RoPE on a quarter of each head, attention and MLP in parallel; 6,857,302,016 parameters, as the Pythia suite counts.
TEST(HuggingFaceConfig, GptNeoxReadsWithItsParallelResidual) {
  const std::string config = R"({"architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0,
    "hidden_act": "gelu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 16384,
    "layer_norm_eps": 1e-05, "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 32,
    "num_hidden_layers": 32, "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": false,
    "torch_dtype": "float16", "transformers_version": "4.24.0", "use_cache": true, )";
  const TempFile f(config + R"("use_parallel_residual": true, "vocab_size": 50432})", "config.json");
  const ModelSpec m = test::library().model(f.path());
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(m)), 6'857'302'016);
  EXPECT_TRUE(m.parallel_residual && m.linear_biases && m.norm == Norm::layernorm && m.mlp == Mlp::gelu);
  EXPECT_DOUBLE_EQ(m.rotary_fraction, 0.25);
  const TempFile sequential(config + R"("use_parallel_residual": false, "vocab_size": 50432})", "config.json");
  EXPECT_FALSE(test::library().model(sequential.path()).parallel_residual);
  EXPECT_NE(model_error(config + R"("attention_bias": false, "vocab_size": 50432})").find("attention_bias = false"),
            std::string::npos);
}

// Falcon (tiiuae/falcon-7b and falcon-40b config.json, as transformers reads them: modeling_falcon.py): Falcon-7B's
// one multi-query KV head and one norm shared by its parallel attention and MLP, 6,921,720,704 parameters (its tied
// LM head counted once); Falcon-40B's new decoder architecture, 8 KV heads and two norms a layer; ALiBi (Falcon-RW's)
// read. A post-norm residual, and Falcon's keys in another type's config, are refused, naming the key.
TEST(HuggingFaceConfig, FalconReadsItsAttentionAndNorms) {
  const std::string common = R"({"alibi": false, "apply_residual_connection_post_layernorm": false,
    "architectures": ["FalconForCausalLM"], "attention_dropout": 0.0, "bias": false, "bos_token_id": 11,
    "eos_token_id": 11, "hidden_dropout": 0.0, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
    "model_type": "falcon", "parallel_attn": true, "torch_dtype": "bfloat16", "transformers_version": "4.27.4",
    "use_cache": true, "vocab_size": 65024, )";
  const std::string seven = common + R"("hidden_size": 4544, "multi_query": true, "new_decoder_architecture": false,
    "num_attention_heads": 71, "num_hidden_layers": 32})";
  const TempFile f7(seven, "config.json");
  const ModelSpec m7 = test::library().model(f7.path());
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(m7)), 6'921'720'704);
  EXPECT_EQ(m7.num_kv_heads, 1);
  EXPECT_TRUE(m7.parallel_residual && m7.shared_norm && m7.tied_embeddings && !m7.linear_biases);
  EXPECT_EQ(m7.ffn_hidden_size, 4 * 4544);
  const TempFile f40(common + R"("hidden_size": 8192, "new_decoder_architecture": true, "num_attention_heads": 128,
    "num_hidden_layers": 60, "num_kv_heads": 8})",
                     "config.json");
  const ModelSpec m40 = test::library().model(f40.path());
  EXPECT_EQ(m40.num_kv_heads, 8);
  EXPECT_TRUE(m40.parallel_residual && !m40.shared_norm);
  // QKV 8192 x (128 + 2·8)·64, dense 8192², MLP 2 x 8192 x 32768, two LayerNorms a layer; the tied embedding; ln_f.
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(m40)),
            60LL * (8192LL * 9216 + 8192LL * 8192 + 2LL * 8192 * 32768 + 4LL * 8192) + 65024LL * 8192 + 2LL * 8192);
  EXPECT_FALSE(m7.alibi);
  std::string alibi = seven;
  alibi.replace(alibi.find("\"alibi\": false"), 14, "\"alibi\": true");
  const TempFile rw(alibi, "config.json");
  EXPECT_TRUE(test::library().model(rw.path()).alibi);
  std::string post = seven;
  const std::string off = "post_layernorm\": false";
  post.replace(post.find(off), off.size(), "post_layernorm\": true");
  EXPECT_NE(model_error(post).find("apply_residual_connection_post_layernorm = true"), std::string::npos);
  EXPECT_NE(model_error(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100, "multi_query": true})")
                .find("multi_query is a falcon config's key, and model_type is llama"),
            std::string::npos);
}

// BLOOM (bigscience/bloom config.json; modeling_bloom.py): LayerNorm, biases on every linear layer, a 4h GELU MLP,
// ALiBi instead of a position table, a LayerNorm on the embeddings and a tied LM head: 176,247,271,424 parameters, the
// count bigscience/bloom's model card gives. The Megatron-DeepSpeed export's fusion switches are inert; a post-norm
// residual is refused as for Falcon.
TEST(HuggingFaceConfig, BloomReadsAlibiAndItsEmbeddingNorm) {
  const std::string config = R"({"apply_residual_connection_post_layernorm": false, "attention_dropout": 0.0,
    "architectures": ["BloomForCausalLM"], "attention_softmax_in_fp32": true, "pad_token_id": 3, "bos_token_id": 1,
    "eos_token_id": 2, "hidden_dropout": 0.0, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
    "masked_softmax_fusion": true, "model_type": "bloom", "n_embed": 14336, "n_layer": 70, "num_attention_heads": 112,
    "pretraining_tp": 4, "slow_but_exact": false, "transformers_version": "4.21.0", "use_cache": true,
    "vocab_size": 250880, "bias_dropout_fusion": true, "offset_alibi": 100, "skip_bias_add": true,
    "skip_bias_add_qkv": false, "unk_token_id": 0, "seq_length": 2048})";
  const TempFile f(config, "config.json");
  const ModelSpec m = test::library().model(f.path());
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(m)), 176'247'271'424);
  EXPECT_TRUE(m.alibi && m.embedding_norm && m.linear_biases && m.tied_embeddings && !m.learned_positions);
  EXPECT_TRUE(m.norm == Norm::layernorm && m.mlp == Mlp::gelu);
  EXPECT_EQ(m.ffn_hidden_size, 4 * 14336);
  EXPECT_EQ(m.max_context, 2048);
  EXPECT_NE(model_error(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100, "n_embed": 64})")
                .find("n_embed is a bloom config's key"),
            std::string::npos);
}

// MPT (mosaicml/mpt-7b config.json, as llm-foundry's configuration_mpt.py and modeling_mpt.py read it): no biases,
// LayerNorm, a 4·d_model GELU MLP, ALiBi (which turns the learned position table off), tied embeddings. The checkpoint
// has 6,649,286,656 parameters; no_bias drops the norms' biases too, which headroom prices (65 norms of 4,096). Keys of
// its attention and FFN blocks that change the work, or that headroom does not know, are refused, naming them.
TEST(HuggingFaceConfig, MptReadsItsBlocks) {
  const std::string head = R"({"architectures": ["MPTForCausalLM"], "d_model": 4096, "emb_pdrop": 0,
    "embedding_fraction": 1.0, "expansion_ratio": 4, "init_config": {"emb_init_std": null, "fan_mode": "fan_in",
    "init_div_is_residual": true, "init_gain": 0, "init_nonlinearity": "relu", "init_std": 0.02,
    "name": "kaiming_normal_", "verbose": 0}, "init_device": "cpu", "learned_pos_emb": true, "logit_scale": null,
    "max_seq_len": 2048, "model_type": "mpt", "n_heads": 32, "n_layers": 32, "no_bias": true,
    "norm_type": "low_precision_layernorm", "resid_pdrop": 0, "tokenizer_name": "EleutherAI/gpt-neox-20b",
    "torch_dtype": "bfloat16", "transformers_version": "4.28.1", "use_cache": false, "verbose": 0,
    "vocab_size": 50432, "attn_config": {"alibi_bias_max": 8, "attn_impl": "torch", "attn_pdrop": 0,
    "clip_qkv": null, "prefix_lm": false, "qk_ln": false, "softmax_scale": null, )";
  const auto config = [&](const std::string& attn) { return head + attn + "}}"; };
  const TempFile f(config(R"("alibi": true, "attn_type": "multihead_attention", "attn_uses_sequence_id": false)"),
                   "config.json");
  const ModelSpec m = test::library().model(f.path());
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(m)), 6'649'286'656 + 65LL * 4096);
  EXPECT_TRUE(m.alibi && m.tied_embeddings && !m.learned_positions && !m.linear_biases && !m.embedding_norm);
  EXPECT_TRUE(m.norm == Norm::layernorm && m.mlp == Mlp::gelu);
  EXPECT_EQ(m.ffn_hidden_size, 4 * 4096);
  EXPECT_EQ(m.num_kv_heads, 32);
  EXPECT_EQ(m.max_context, 2048);
  // Without ALiBi or RoPE, llm-foundry learns a position table; grouped-query attention has kv_n_heads.
  const TempFile learned(config(R"("alibi": false, "attn_type": "grouped_query_attention", "kv_n_heads": 8)"),
                         "config.json");
  const ModelSpec t = test::library().model(learned.path());
  EXPECT_TRUE(t.learned_positions && !t.alibi);
  EXPECT_EQ(t.num_kv_heads, 8);
  EXPECT_NE(
      model_error(config(R"("alibi": true, "attn_uses_sequence_id": true)")).find("attn_config.attn_uses_sequence_id"),
      std::string::npos);
  EXPECT_NE(model_error(config(R"("alibi": true, "flex_attn_mod_list": [])")).find("attn_config.flex_attn_mod_list"),
            std::string::npos);
  std::string moe = config(R"("alibi": true)");
  moe.insert(moe.size() - 1, R"(, "ffn_config": {"ffn_type": "mb_dmoe"})");
  EXPECT_NE(model_error(moe).find("ffn_config.ffn_type 'mb_dmoe'"), std::string::npos);
}

// Phi (microsoft/phi-1_5 config.json; modeling_phi.py): LayerNorm, biases on every linear layer and on the LM head,
// attention and MLP in parallel off one norm, RoPE on half of each head: 1,418,270,720 parameters, as the model counts.
TEST(HuggingFaceConfig, PhiReadsItsSharedNormAndHeadBias) {
  const std::string config = R"({"_name_or_path": "microsoft/phi-1_5", "architectures": ["PhiForCausalLM"],
    "attention_dropout": 0.0, "bos_token_id": null, "embd_pdrop": 0.0, "eos_token_id": null, "hidden_act": "gelu_new",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192, "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048, "model_type": "phi", "num_attention_heads": 32, "num_hidden_layers": 24,
    "num_key_value_heads": null, "partial_rotary_factor": 0.5, "qk_layernorm": false, "rope_scaling": null,
    "rope_theta": 10000.0, "tie_word_embeddings": false, "torch_dtype": "float16", "transformers_version": "4.37.0",
    "use_cache": true, "vocab_size": 51200, )";
  const TempFile f(config + R"("resid_pdrop": 0.0})", "config.json");
  const ModelSpec m = test::library().model(f.path());
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(m)), 1'418'270'720);
  EXPECT_TRUE(m.parallel_residual && m.shared_norm && m.lm_head_bias && m.linear_biases && !m.qk_norm);
  EXPECT_DOUBLE_EQ(m.rotary_fraction, 0.5);
  // Phi-2's residual dropout (resid_pdrop 0.1) without the embeddings' (embd_pdrop 0.0): the masks are priced as
  // Megatron-LM's --hidden-dropout covers both, so one without the other is refused, naming both.
  const std::string phi2 = model_error(config + R"("resid_pdrop": 0.1})");
  EXPECT_NE(phi2.find("embd_pdrop = 0.0 with resid_pdrop = 0.1"), std::string::npos) << phi2;
}

// The router's groups are read: DeepSeek-V2's group_limited_greedy and V3's noaux_tc route within topk_group of
// n_group groups, greedy over every expert; another topk_method, or groups that do not split the experts, is refused.
TEST(HuggingFaceConfig, RoutingGroupsAreReadAsTheRouterUsesThem) {
  const std::string moe = R"({"model_type": "deepseek_v2", "hidden_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "moe_intermediate_size": 32,
    "n_routed_experts": 16, "num_experts_per_tok": 4, "n_group": 4)";
  const auto read = [&](const std::string& more) {
    const TempFile f(moe + more + "}", "config.json");
    return test::library().model(f.path());
  };
  const ModelSpec grouped = read(R"(, "topk_group": 2, "topk_method": "group_limited_greedy")");
  EXPECT_EQ(grouped.moe_router_num_groups, 4);
  EXPECT_EQ(grouped.moe_router_group_topk, 2);
  EXPECT_TRUE(group_limited_routing(read(R"(, "topk_group": 2)")));
  EXPECT_FALSE(group_limited_routing(read(R"(, "topk_group": 2, "topk_method": "greedy")")));
  EXPECT_NE(model_error(moe + R"(, "topk_group": 2, "topk_method": "sinkhorn"})").find("topk_method 'sinkhorn'"),
            std::string::npos);
  EXPECT_NE(model_error(moe + "}").find("missing 'topk_group'"), std::string::npos);
  EXPECT_NE(model_error(moe + R"(, "topk_group": 5})").find("moe_router_group_topk 5 of moe_router_num_groups 4"),
            std::string::npos);
}

TEST(HuggingFaceConfig, DropoutOutsideZeroToOneIsRefusedNamingTheKey) {
  EXPECT_NE(model_error(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100, "attention_dropout": 2})")
                .find("attention_dropout must be a number in [0, 1] (got 2)"),
            std::string::npos);
}

TEST(HuggingFaceConfig, GatedGeluAndPerFamilyDefaults) {
  // Qwen2 ships a window it does not use (use_sliding_window false): full attention, accepted.
  const TempFile qwen(R"({"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28,
    "num_key_value_heads": 4, "num_hidden_layers": 28, "vocab_size": 152064, "intermediate_size": 18944,
    "sliding_window": 131072, "use_sliding_window": false, "tie_word_embeddings": false})",
                      "config.json");
  EXPECT_EQ(test::library().model(qwen.path()).mlp, Mlp::swiglu);
  // Gemma's GeGLU (priced with SwiGLU's three projections), and Gemma ties its embeddings unless told otherwise.
  const TempFile gemma(R"({"model_type": "gemma2", "hidden_size": 2304, "num_attention_heads": 8,
    "num_key_value_heads": 4, "num_hidden_layers": 26, "vocab_size": 256000, "intermediate_size": 9216,
    "head_dim": 288, "hidden_activation": "gelu_pytorch_tanh", "hidden_act": "gelu_pytorch_tanh"})",
                       "config.json");
  const ModelSpec g = test::library().model(gemma.path());
  EXPECT_EQ(g.mlp, Mlp::geglu);
  EXPECT_TRUE(g.tied_embeddings);
}

// Nemotron-4 340B's config (tests/data/models): a plain MLP of up and down projections with a squared ReLU, LayerNorm
// with a bias (LayerNorm1P), untied embeddings. Its parameters, derived from the dimensions: both embeddings, then per
// layer q and o (h·h each), k and v (h·k·d_h each), up and down (h·h_ffn each) and two norms of weight and bias, then
// the final norm. About 341B (NVIDIA's "340B"), not the 471.5B of a gated MLP.
TEST(HuggingFaceConfig, NemotronIsPricedWithItsPlainMlp) {
  const ModelSpec m =
      test::library().model(std::string(HEADROOM_TEST_SOURCE_DIR) + "/data/models/nemotron-4-340b/config.json");
  EXPECT_EQ(m.mlp, Mlp::relu2);
  EXPECT_EQ(m.norm, Norm::layernorm);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_DOUBLE_EQ(m.rotary_fraction, 0.5);
  const std::int64_t h = 18432, a = 96, k = 8, f = 73728, v = 256000, layers = 96, d_h = h / a;
  const std::int64_t attention = 2 * h * h + 2 * h * k * d_h, mlp = 2 * h * f,
                     norms = h * 4;  // two norms of h weights and h biases
  const std::int64_t expected = 2 * v * h + layers * (attention + mlp + norms) + 2 * h;
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(m)), expected);
  ModelSpec gated = m;
  gated.mlp = Mlp::swiglu;
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(gated) - parameter_count(m)), layers * h * f);
}

// A key headroom does not know, an activation it does not price and a model type it does not model are refused with
// one line naming them, not priced as the nearest model.
TEST(HuggingFaceConfig, UnknownKeysAndActivationsAreRefusedNamingThem) {
  const std::string base = R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
    "num_hidden_layers": 2, "vocab_size": 100, "intermediate_size": 128, )";
  const std::string unknown = model_error(base + R"("frobnicate_experts": 3})");
  EXPECT_NE(unknown.find("config.json: frobnicate_experts = 3 is a key headroom does not know"), std::string::npos)
      << unknown;
  EXPECT_EQ(unknown.find('\n'), std::string::npos) << unknown;
  const std::string act = model_error(base + R"("hidden_act": "relu2"})");
  EXPECT_NE(act.find("hidden_act = \"relu2\" is not an activation headroom prices in a gated MLP"), std::string::npos)
      << act;
  const std::string plain = model_error(R"({"model_type": "nemotron", "hidden_size": 64, "num_attention_heads": 4,
    "num_hidden_layers": 2, "vocab_size": 100, "intermediate_size": 128, "hidden_act": "silu"})");
  EXPECT_NE(plain.find("hidden_act = \"silu\" is not an activation headroom prices in this MLP of up and down"),
            std::string::npos)
      << plain;
  // Dropout on the residual stream is read (its masks priced, memory.cpp dropout_mask_units).
  EXPECT_EQ(model_error(base + R"("resid_pdrop": 0.1})"), "(accepted)");
  EXPECT_EQ(model_error(base + R"("resid_pdrop": 0.0, "torch_dtype": "bfloat16", "use_cache": true})"), "(accepted)");
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

TEST(SpecLibrary, DuplicateKeysAreRefusedNotResolvedByTheLastOne) {
  const TempFile dup(R"({"name": "x", "hidden_size": 4096, "num_layers": 2, "num_attention_heads": 32,
    "num_kv_heads": 8, "ffn_hidden_size": 100, "vocab_size": 10, "max_context_tokens": 10,
    "tie_word_embeddings": false, "norm": "rmsnorm", "activation": "swiglu", "hidden_size": 8192})");
  try {
    (void)test::library().model(dup.path());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the key \"hidden_size\" appears twice"), std::string::npos) << e.what();
  }
  // The same key in two different objects is fine.
  const TempFile nested(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
    "vocab_size": 100, "intermediate_size": 128, "rope_scaling": {"factor": 8.0, "type": "llama3"},
    "quantization_config": {"factor": 1}})",
                        "config.json");
  EXPECT_EQ(test::library().model(nested.path()).hidden_size, 64);
}

}  // namespace
}  // namespace headroom
