#include "headroom/estimator/memory.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/flops.hpp"
#include "headroom/estimator/residual_fit.hpp"

namespace headroom {
namespace {

Layout layout(std::int64_t t, std::int64_t c, std::int64_t p, std::int64_t b, std::int64_t gpus, std::int64_t s = 8192,
              std::int64_t gbs = 1024) {
  Layout l;
  l.tp = t;
  l.cp = c;
  l.pp = p;
  l.mbs = b;
  l.dp = gpus / (t * c * p);
  l.seq = s;
  l.gbs = gbs;
  return l;
}

class MemoryTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec llama8b = lib.model("llama3.1-8b");
  ModelSpec llama70b = lib.model("llama3.1-70b");
  ClusterSpec a100 = lib.cluster("dgx-a100-40gb");
  ResidualModel none;
};

// Hand counts: Llama 3.1 8B has 8,030,261,248 parameters, 70B 70,553,706,496 (Meta's model cards).
TEST_F(MemoryTest, ParameterCountMatchesPublishedLlamaSizes) {
  EXPECT_DOUBLE_EQ(parameter_count(llama8b), 8'030'261'248.0);
  EXPECT_DOUBLE_EQ(parameter_count(llama70b), 70'553'706'496.0);
  EXPECT_DOUBLE_EQ(parameter_count(lib.model("llama2-7b")), 6'738'415'616.0);
}

TEST_F(MemoryTest, Eq1AttentionAndEq2FfnPerLayer) {
  const double h = 4096;
  EXPECT_DOUBLE_EQ(attention_parameters_per_layer(llama8b), 2 * h * h * (1 + 8.0 / 32));
  EXPECT_DOUBLE_EQ(ffn_parameters_per_layer(llama8b), 3 * h * 14336);
  EXPECT_DOUBLE_EQ(norm_parameters_per_layer(llama8b), 2 * h);
}

// Eq. 12: s·b·h·(12 + 4k/a + 8h_ffn/h) for one layer without parallelism.
TEST_F(MemoryTest, Eq12ActivationPerLayer) {
  const Layout l = layout(1, 1, 1, 1, 1);
  const double sbh = 8192.0 * 4096;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(llama8b, l), sbh * (12 + 4 * 0.25 + 8 * 3.5));
}

// With p = 1 the one stage holds both embedding and LM head (Eq. 6) and the head activations (δ term).
// Dropout on the residual stream (Megatron-LM's --hidden-dropout) keeps a 1-byte mask after attention and after the
// MLP in every layer that keeps its tensors, and one on the embeddings' output: s·b·h/(t·c) bytes each with SP, t
// times that without; none in a fully recomputed layer (its masks are drawn again).
TEST_F(MemoryTest, HiddenDropoutKeepsTwoMasksALayerAndOneAtTheEmbeddings) {
  ModelSpec gpt = llama8b;
  gpt.hidden_dropout = 0.1;
  for (const bool sp : {true, false}) {
    Layout l = layout(4, 1, 1, 1, 8);
    l.sequence_parallel = sp;
    const double unit = 8192.0 * 4096.0 / 4.0 * (sp ? 1.0 : 4.0);
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt, l) - activation_bytes_per_layer(llama8b, l), 2.0 * unit) << sp;
    EXPECT_DOUBLE_EQ(embedding_activation_bytes(gpt, l) - embedding_activation_bytes(llama8b, l), unit) << sp;
    l.recompute = Recompute::full;
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt, l), activation_bytes_per_layer(llama8b, l)) << sp;
  }
}

TEST_F(MemoryTest, SingleStageHoldsEmbeddingAndHead) {
  const Layout l = layout(4, 1, 1, 1, 8);
  const double hv_t = 4096.0 * 128256 / 4;
  const double layers = 32 * (layer_parameters(llama8b) - norm_parameters_per_layer(llama8b)) / 4 +
                        32 * norm_parameters_per_layer(llama8b);
  EXPECT_DOUBLE_EQ(stage_parameters_per_gpu(llama8b, l, 0), 2 * hv_t + 4096 + layers);
  const StageMemory s = stage_memory(llama8b, a100, l, none, 0);
  EXPECT_NEAR(s.total(), paper_total_bytes(llama8b, l), 1.0);
}

// The per-stage model reduces to Eq. 18 on the first stage under the paper's setup.
TEST_F(MemoryTest, FirstStageEqualsEq18) {
  for (std::int64_t p : {2, 4, 8}) {
    const Layout l = layout(2, 2, p, 1, 64);
    EXPECT_NEAR(stage_memory(llama8b, a100, l, none, 0).total(), paper_total_bytes(llama8b, l), 1.0) << p;
  }
}

// Table 2, (4,1,2,1) at 8 GPUs = 27.2 GiB; worked by hand in the validation note.
TEST_F(MemoryTest, Table2FirstCell) {
  EXPECT_NEAR(paper_total_bytes(llama8b, layout(4, 1, 2, 1, 8)) / kGiB, 27.2, 0.01);
}

TEST_F(MemoryTest, OneFOneBFirstStageHoldsPMicrobatches) {
  const Layout l = layout(1, 1, 4, 1, 4);
  EXPECT_EQ(microbatches_in_flight(l, 0), 4);
  EXPECT_EQ(microbatches_in_flight(l, 3), 1);
  EXPECT_DOUBLE_EQ(layers_in_flight(llama8b, l, 0), 32);  // L whatever p
  EXPECT_DOUBLE_EQ(layers_in_flight(llama8b, l, 3), 8);
  Layout few = l;
  few.gbs = 2;  // only 2 micro-batches: the first stage cannot hold 4
  few.dp = 1;
  EXPECT_EQ(microbatches_in_flight(few, 0), 2);
}

TEST_F(MemoryTest, InterleavedFirstStageFactor) {
  Layout l = layout(1, 1, 4, 1, 4);
  l.vpp = 2;
  l.schedule = Schedule::interleaved;
  // L·(1 + (p − 1)/(p·v)) = 32·(1 + 3/8) = 44 (Korthikanti et al. 2023, Sec. 4.2.3).
  EXPECT_DOUBLE_EQ(layers_in_flight(llama8b, l, 0), 44);
}

// torch's ScheduleLoopedBFS runs all m forwards of every chunk before the first backward: every stage holds its L/p
// layers for all m micro-batches, as GPipe; with fewer micro-batches than stages it is not priced.
TEST_F(MemoryTest, LoopedBreadthFirstHoldsEveryMicrobatchOfEveryChunk) {
  Layout l = layout(1, 1, 4, 1, 4);
  l.gbs = 16;  // 16 micro-batches a pipeline
  l.vpp = 2;
  l.schedule = Schedule::looped_bfs;
  EXPECT_EQ(microbatches_in_flight(l, 3), 16);
  EXPECT_DOUBLE_EQ(layers_in_flight(llama8b, l, 0), 8.0 * 16);
  EXPECT_DOUBLE_EQ(layers_in_flight(llama8b, l, 3), 8.0 * 16);
  Layout gpipe = l;
  gpipe.vpp = 1;
  gpipe.schedule = Schedule::gpipe;
  EXPECT_DOUBLE_EQ(stage_activation_bytes(llama8b, l, 0), stage_activation_bytes(llama8b, gpipe, 0));
  // The last stage computes all 16 micro-batches' losses before its first backward: 16 LM heads, 1 under 1F1B.
  EXPECT_NEAR(stage_activation_bytes(llama8b, l, 3) - stage_activation_bytes(llama8b, l, 2),
              16 * lm_head_activation_bytes(llama8b, l), 1.0);
  Layout one_f_one_b = gpipe;
  one_f_one_b.schedule = Schedule::one_f_one_b;
  EXPECT_NEAR(stage_activation_bytes(llama8b, one_f_one_b, 3) - 8.0 * 1 * activation_bytes_per_layer(llama8b, l),
              lm_head_activation_bytes(llama8b, l), 1.0);
  Layout few = l;
  few.gbs = 2;  // 2 micro-batches for 4 stages
  EXPECT_FALSE(interleaving_runs(few));
  EXPECT_THROW(validate_layout(llama8b, few), Error);
}

TEST_F(MemoryTest, RecomputeAndSequenceParallelOrdering) {
  Layout l = layout(4, 1, 1, 1, 8);
  const double base = stage_activation_bytes(llama8b, l, 0);
  l.recompute = Recompute::full;
  EXPECT_LT(stage_activation_bytes(llama8b, l, 0), base / 4);
  l.recompute = Recompute::selective;  // FlashAttention already drops the s² term
  EXPECT_DOUBLE_EQ(stage_activation_bytes(llama8b, l, 0), base);
  l.recompute = Recompute::none;
  l.sequence_parallel = false;
  EXPECT_GT(stage_activation_bytes(llama8b, l, 0), base);
  l.sequence_parallel = true;
  l.flash_attention = false;
  const double no_fa = stage_activation_bytes(llama8b, l, 0);
  EXPECT_NEAR(no_fa - base, 32 * 2.0 * 32 * 8192.0 * 8192 / 4, 1.0);
  l.recompute = Recompute::selective;
  EXPECT_DOUBLE_EQ(stage_activation_bytes(llama8b, l, 0), base);
  // With attention dropout (GPT) the mask and the dropped-out copy are stored too: 5·a·s²·b (Korthikanti Eq. 1).
  l.recompute = Recompute::none;
  ModelSpec dropout = llama8b;
  dropout.attention_dropout = 0.1;
  EXPECT_NEAR(stage_activation_bytes(dropout, l, 0) - base, 32 * 5.0 * 32 * 8192.0 * 8192 / 4, 1.0);
}

// torchtitan's per-op checkpointing keeps, per token of a Llama 3.1 8B block on one GPU: the block input (h), wq's
// output (h), wv's (kv), SDPA's output (h) and log-sum-exp (a FP32 values), w1's (f) and w2's (h), 2 bytes each but
// the log-sum-exp; under TP 2 with SP the input is sharded, the per-head ones split, w2's output is its full-sequence
// partial sum on every rank (h) and the two reduce-scatters' outputs (h/t each) are kept as well.
TEST_F(MemoryTest, PerOpCheckpointingKeepsTheSavedOutputs) {
  const double h = 4096, kv = 1024, f = 14336, a = 32, tokens = 8192;
  Layout l = layout(1, 1, 1, 1, 8);
  l.recompute = Recompute::op;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(llama8b, l), tokens * (2 * (h + h + kv + h + f + h) + 4 * a));
  l = layout(2, 1, 1, 1, 8);
  l.recompute = Recompute::op;
  const double per_rank = 2 * (h / 2 + h / 2 + kv / 2 + h / 2 + f / 2 + h + h / 2 + h / 2) + 4 * a / 2;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(llama8b, l), tokens * per_rank);
  // Less than every activation, more than full recompute's input; the backward re-materialises the rest.
  Layout none = l, full = l;
  none.recompute = Recompute::none;
  full.recompute = Recompute::full;
  EXPECT_LT(activation_bytes_per_layer(llama8b, l), activation_bytes_per_layer(llama8b, none));
  EXPECT_GT(activation_bytes_per_layer(llama8b, l), activation_bytes_per_layer(llama8b, full));
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(llama8b, l) + rematerialised_layer_bytes(llama8b, l, false),
                   activation_bytes_per_layer(llama8b, none));
}

TEST_F(MemoryTest, PeakWithoutAllocationEqualsWorstStage) {
  ResidualModel r;
  r.fixed_bytes = 1e9;
  r.logits_bytes_per_element = 6;
  r.optimizer_shard_bytes_per_param = 4;
  r.cp_communicator_bytes = 1e9;
  for (std::int64_t p : {1, 2, 4, 8, 16, 32}) {
    for (std::int64_t b : {1, 4}) {
      const Layout l = layout(2, 1, p, b, 256, 4096);
      const MemoryEstimate e = estimate_memory(llama8b, a100, l, r);
      EXPECT_DOUBLE_EQ(peak_memory_bytes(llama8b, a100, l, r), e.peak_bytes) << p << " " << b;
    }
  }
}

TEST_F(MemoryTest, MemoryMonotoneInSequenceBatchAndInverseTp) {
  double previous = 0;
  for (std::int64_t s : {1024, 2048, 4096, 8192, 16384}) {
    const double peak = peak_memory_bytes(llama8b, a100, layout(2, 1, 1, 1, 8, s), none);
    EXPECT_GT(peak, previous);
    previous = peak;
  }
  EXPECT_GT(peak_memory_bytes(llama8b, a100, layout(2, 1, 1, 2, 8), none),
            peak_memory_bytes(llama8b, a100, layout(2, 1, 1, 1, 8), none));
  EXPECT_GT(peak_memory_bytes(llama8b, a100, layout(2, 1, 1, 1, 8), none),
            peak_memory_bytes(llama8b, a100, layout(4, 1, 1, 1, 8), none));
}

TEST_F(MemoryTest, HugeSizesStayFinite) {
  ModelSpec huge = llama8b;
  huge.hidden_size = 131072;
  huge.num_layers = 512;
  huge.num_heads = 1024;
  huge.num_kv_heads = 8;
  huge.ffn_hidden_size = 4 * huge.hidden_size;
  EXPECT_GT(parameter_count(huge), 1e13);
  const Layout l = layout(8, 1, 8, 1, 1'000'000, 10'000'000, 1'000'000);  // d = 15,625, 64 micro-batches
  const double peak = peak_memory_bytes(huge, a100, l, none);
  EXPECT_TRUE(std::isfinite(peak));
  EXPECT_GT(peak, 0);
}

// Every output reports a stage's bytes as a 64-bit integer: a layout whose stage holds more than kMaxByteCount is
// refused naming the sequence length and micro-batch size, not reported as a wrapped-around count.
TEST_F(MemoryTest, BytesPastWhatAnOutputCanCountAreRefused) {
  const ModelSpec llama405b = lib.model("llama3.1-405b");
  const Layout l = layout(8, 1, 1, 1, 8, 1'000'000'000'000, 1);
  ASSERT_GT(stage_memory(llama405b, a100, l, none, 0).total(), kMaxByteCount);
  try {
    (void)estimate_memory(llama405b, a100, l, none);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message(FieldNames::keywords).find("llama3.1-405b at seq 1000000000000, mbs 1: a GPU of stage 0"),
              std::string::npos)
        << e.what();
  }
  // Below the bound every stage is reported as it is.
  const MemoryEstimate e = estimate_memory(llama405b, a100, layout(8, 1, 1, 1, 8, 1'000'000, 1), none);
  EXPECT_LT(e.peak_bytes, kMaxByteCount);
}

// Sliding windows are priced with FlashAttention, and with context parallelism only under Transformer Engine's a2a or
// all_gather exchanges (context_parallel.py refuses a window under p2p): each GPU then takes 1/c of the windowed
// attention, the same share as without context parallelism.
TEST_F(MemoryTest, SlidingWindowsRefuseContextParallelismAndUnfusedAttention) {
  const ModelSpec gemma = lib.model("gemma-2-27b");
  Layout l = layout(2, 2, 1, 1, 8, 8192, 8);
  EXPECT_THROW(
      {
        try {
          validate_model_split(gemma, l);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("--cp 2: context parallelism over the sliding-window"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  for (const CpExchange x : {CpExchange::a2a, CpExchange::all_gather}) {
    Layout priced = l;
    priced.cp_exchange = x;
    EXPECT_NO_THROW(validate_model_split(gemma, priced));
    Layout whole = priced;
    whole.cp = 1, whole.dp = 2;
    EXPECT_DOUBLE_EQ(attention_flops_forward(gemma, priced), attention_flops_forward(gemma, whole) / 2.0);
  }
  l.cp = 1;
  l.flash_attention = false;
  EXPECT_THROW(validate_model_split(gemma, l), Error);
}

// A parallel residual (GPT-NeoX) feeds both norms the layer's input, which autograd saves once: 2 units of s·b·h
// less than two norms of two tensors, and nothing else changes.
TEST_F(MemoryTest, ParallelResidualSavesOneNormInput) {
  ModelSpec parallel = llama8b;
  parallel.parallel_residual = true;
  const Layout l = layout(1, 1, 1, 1, 8, 8192, 1);
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(llama8b, l) - activation_bytes_per_layer(parallel, l),
                   2.0 * 8192.0 * 4096.0);
  EXPECT_EQ(parameter_count(parallel), parameter_count(llama8b));
}

TEST_F(MemoryTest, LayoutValidationNamesTheConstraint) {
  Layout l = layout(3, 1, 1, 1, 3);
  EXPECT_THROW(validate_layout(llama8b, l), Error);
  l = layout(2, 1, 3, 1, 6);
  try {
    validate_layout(llama8b, l);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--pp 3"), std::string::npos) << e.what();
  }
  l = layout(16, 1, 1, 1, 16);  // 16 divides 32 heads but not 8 KV heads
  EXPECT_THROW(validate_layout(llama8b, l), Error);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

TEST(Residual, TermsFollowTheirCarriers) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-8b");
  Layout l;
  l.tp = 2;
  l.cp = 1;
  l.pp = 4;
  l.dp = 2;
  l.seq = 4096;
  l.mbs = 2;
  l.gbs = 64;
  EXPECT_EQ(logits_elements(m, l, 0), 0.0);
  EXPECT_DOUBLE_EQ(logits_elements(m, l, 3), 4096.0 * 2 * 128256 / 2);
  EXPECT_EQ(cp_extra_communicators(l), 0.0);
  l.cp = 2;
  EXPECT_EQ(cp_extra_communicators(l), 1.0);
  l.cp = 4;
  EXPECT_EQ(cp_extra_communicators(l), 3.0);
  ResidualModel r;
  r.fixed_bytes = 1.5 * kGiB;
  r.optimizer_shard_bytes_per_param = 2;
  EXPECT_DOUBLE_EQ(residual_bytes(m, l, r, 1, 1e9, 80.0 * kGiB), 1.5 * kGiB + 2e9);
  // --tp-comm-overlap: TransformerEngine's 12 userbuffers of (s·b/c)·h, the 8 all-gather ones in FP8 under FP8.
  EXPECT_EQ(tp_comm_buffer_bytes(m, l), 0.0);
  l.tp_comm_overlap = true;
  const double elements = 4096.0 * 2 / 4 * 4096;
  EXPECT_DOUBLE_EQ(tp_comm_buffer_bytes(m, l), 12 * 2 * elements);
  EXPECT_DOUBLE_EQ(residual_bytes(m, l, r, 1, 1e9, 80.0 * kGiB), 1.5 * kGiB + 2e9 + 24 * elements);
  l.fp8 = Fp8Recipe::delayed;
  EXPECT_DOUBLE_EQ(tp_comm_buffer_bytes(m, l), (8 * 1 + 4 * 2) * elements);
  // torch's micro-pipelined TP: one symmetric workspace per TP group, two BF16 chunks of a reduce-scatter's output.
  l.tp_comm_buffers = TpCommBuffers::symmetric_memory;
  EXPECT_DOUBLE_EQ(tp_comm_buffer_bytes(m, l), 2 * 2 * elements / l.tp);
  l.fp8 = Fp8Recipe::none;
  EXPECT_DOUBLE_EQ(tp_comm_buffer_bytes(m, l), 2 * 2 * elements / l.tp);
  l.tp_comm_overlap = false;
  EXPECT_EQ(tp_comm_buffer_bytes(m, l), 0.0);
}

// The one-parameter form: the smallest share that keeps every OOM run out, raised to the largest that loses no
// trained run; a share that lets an OOM run in is infeasible.
TEST(CapacityShare, FitsBetweenTheOutOfMemoryRunsAndTheTrainedOnes) {
  const double cap = 80.0 * kGiB, margin = 0.1 * kGiB;
  const std::vector<PeakOutcome> runs{{70 * kGiB, cap, false}, {74 * kGiB, cap, true}, {60 * kGiB, cap, false}};
  const ShareFit f = fit_capacity_share(runs, margin);
  ASSERT_TRUE(f.feasible);
  EXPECT_EQ(f.training_misses, 0);
  EXPECT_NEAR(f.share, (cap - margin - 70 * kGiB) / cap, 1e-12);  // just under the largest trained peak
  EXPECT_EQ(score_capacity_share(runs, f.share).right, 3);
  // An OOM run below a trained one: the trained one is lost, never the OOM one.
  const std::vector<PeakOutcome> crossed{{70 * kGiB, cap, false}, {65 * kGiB, cap, true}};
  const ShareFit g = fit_capacity_share(crossed, margin);
  ASSERT_TRUE(g.feasible);
  EXPECT_EQ(g.training_misses, 1);
  EXPECT_EQ(score_capacity_share(crossed, g.share).false_fits, 0);
  // An OOM run so small that no share up to one half keeps it out.
  EXPECT_FALSE(fit_capacity_share(std::vector<PeakOutcome>{{10 * kGiB, cap, true}}, margin).feasible);
}

// A capacity share is residual memory in proportion to the GPU's usable memory.
TEST(CapacityShare, IsPartOfTheResidual) {
  const ModelSpec m = test::library().model("llama3.1-8b");
  Layout l;
  ResidualModel r;
  r.capacity_share = 0.125;
  EXPECT_DOUBLE_EQ(residual_bytes(m, l, r, 0, 1e9, 80.0 * kGiB), 10.0 * kGiB);
}

// Heads of a width d_h other than h/a (Qwen3-32B: 64 heads of 128 for h = 5,120). Weights,
// gradients and optimizer states of the first stage equal Megatron-LM's compute_weight_and_optimizer_memory
// (theoretical_memory_usage.py at d98e8a6, run in Python with --kv-channels 128, GQA 8, SwiGLU 25,600, 64 layers,
// vocabulary 151,936, untied, distributed optimizer) but for one difference, explained: Megatron counts the final
// norm's h weights as 1/p on every stage, headroom on the last stage only. Qwen3's q/k norms are left out of both.
TEST_F(MemoryTest, WideHeadsMatchMegatronTheoreticalWeightAndOptimizerMemory) {
  ModelSpec m = llama8b;
  m.hidden_size = 5120;
  m.num_heads = 64;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.ffn_hidden_size = 25600;
  m.num_layers = 64;
  m.vocab_size = 151936;
  struct Case {
    std::int64_t t, p, d;
    double megatron_bytes;
  };
  ClusterSpec c = a100;
  c.gpu.usable_memory_bytes = 1e15;
  for (const Case& k : {Case{8, 2, 4, 18431285760.0}, Case{4, 4, 2, 25739934720.0}, Case{2, 1, 16, 110574339840.0}}) {
    Layout l = layout(k.t, 1, k.p, 1, k.t * k.p * k.d);
    const StageMemory s = stage_memory(m, c, l, none, 0);
    const double bytes_per_param = 6.0 + 12.0 / static_cast<double>(k.d);
    const double final_norm_share = k.p > 1 ? 5120.0 / static_cast<double>(k.p) * bytes_per_param : 0.0;
    EXPECT_DOUBLE_EQ(s.params + s.grads + s.optimizer, k.megatron_bytes - final_norm_share) << k.t << "," << k.p;
  }
  // The attention's activations: input 2, Q and output 2·(a·d_h)/h each, K and V 2·(k·d_h)/h each (s·b·h units).
  ModelSpec narrow = m;
  narrow.head_dim = 0;  // 80 = h/a
  Layout l = layout(1, 1, 1, 1, 1);
  const double sbh = 8192.0 * 5120.0;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(m, l) - activation_bytes_per_layer(narrow, l),
                   sbh * 4.0 * ((8192.0 + 1024.0) - (5120.0 + 640.0)) / 5120.0);
}

// Weights, gradients and optimizer states of the first stage of a model with experts equal
// Megatron-LM's compute_weight_and_optimizer_memory (theoretical_memory_usage.py at d98e8a6, run in Python with
// --num-experts, --moe-router-topk, --moe-ffn-hidden-size, --expert-model-parallel-size,
// --expert-tensor-parallel-size, distributed optimizer, the vocabulary unpadded) for Mixtral-8x7B and Qwen3-30B-A3B
// (without its q/k norms, which Megatron's formula does not count), but for the final norm's 1/p share that Megatron
// puts on every stage and headroom on the last (as for dense models above). Routed experts' optimizer states are
// sharded over the expert data-parallel group t·c·d/(etp·ep).
TEST_F(MemoryTest, ExpertModelsMatchMegatronTheoreticalWeightAndOptimizerMemory) {
  ModelSpec qwen3 = lib.model("qwen3-30b-a3b");
  qwen3.qk_norm = false;
  const ModelSpec mixtral = lib.model("mixtral-8x7b");
  struct Case {
    const ModelSpec* m;
    std::int64_t t, p, d, ep, etp;
    double megatron_bytes;
  };
  ClusterSpec c = a100;
  c.gpu.usable_memory_bytes = 1e15;
  for (const Case& k : {Case{&mixtral, 1, 1, 8, 8, 1, 113510873088.0}, Case{&mixtral, 2, 1, 4, 4, 2, 108699881472.0},
                        Case{&mixtral, 4, 2, 8, 8, 1, 26876132352.0}, Case{&mixtral, 2, 4, 8, 4, 1, 27119427072.0},
                        Case{&qwen3, 1, 1, 16, 16, 1, 43017205248.0}, Case{&qwen3, 2, 2, 8, 8, 1, 24656764416.0},
                        Case{&qwen3, 4, 1, 8, 32, 1, 19268877312.0}}) {
    Layout l = layout(k.t, 1, k.p, 1, k.t * k.p * k.d);
    l.ep = k.ep;
    l.etp = k.etp;
    validate_layout(*k.m, l);
    const StageMemory s = stage_memory(*k.m, c, l, none, 0);
    const double final_norm_share = k.p > 1 ? static_cast<double>(k.m->hidden_size) / static_cast<double>(k.p) *
                                                  (6.0 + 12.0 / static_cast<double>(k.d))
                                            : 0.0;
    EXPECT_NEAR(s.params + s.grads + s.optimizer, k.megatron_bytes - final_norm_share, 1e-12 * k.megatron_bytes)
        << k.m->name << " t" << k.t << " p" << k.p << " ep" << k.ep << " etp" << k.etp;
  }
}

// DeepSeek-V3's leading dense layers sit on the first stages in Megatron-LM's layer order (virtual stage j·p + i
// holds the layers after those of every virtual stage before it).
TEST_F(MemoryTest, LeadingDenseLayersAreCountedOnTheirStages) {
  ModelSpec m = lib.model("mixtral-8x7b");
  m.first_dense_layers = 5;
  Layout l = layout(1, 1, 4, 1, 8);  // 8 layers a stage
  EXPECT_EQ(stage_moe_layers(m, l, 0), 3);
  EXPECT_EQ(stage_moe_layers(m, l, 1), 8);
  l.vpp = 2;  // chunks of 4: stage 0 holds layers 0-3 and 16-19, stage 1 holds 4-7 and 20-23
  EXPECT_EQ(stage_moe_layers(m, l, 0), 4);
  EXPECT_EQ(stage_moe_layers(m, l, 1), 7);
  EXPECT_EQ(stage_moe_layers(lib.model("llama3.1-8b"), l, 0), 0);
}

// DeepSeek-V3 (latent attention, 256 experts, a shared expert, 3 leading dense layers) against
// Megatron-LM's compute_weight_and_optimizer_memory (d98e8a6, --multi-latent-attention --q-lora-rank 1536
// --kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128, --moe-layer-freq [0]*3+[1]*58,
// ETP 1). Equal at t = 1; at t = 2 headroom holds the down projections of q and kv and their norms whole on every TP
// rank, as multi_latent_attention.py builds them (parallel_mode 'duplicated'), where the formula splits them.
TEST_F(MemoryTest, LatentAttentionMatchesMegatronTheoreticalWeightAndOptimizerMemory) {
  const ModelSpec m = lib.model("deepseek-v3");
  ClusterSpec c = a100;
  c.gpu.usable_memory_bytes = 1e15;
  struct Case {
    std::int64_t t, d, ep;
    double megatron_bytes;
  };
  const double down = 1536.0 * (7168 + 1) + 7168.0 * (512 + 64) + 512;  // per layer
  for (const Case& k :
       {Case{1, 64, 64, 289827199296.0}, Case{1, 256, 32, 256768058448.0}, Case{2, 128, 64, 144438177216.0}}) {
    Layout l = layout(k.t, 1, 1, 1, k.t * k.d);
    l.ep = k.ep;
    l.etp = 1;
    validate_layout(m, l);
    const StageMemory s = stage_memory(m, c, l, none, 0);
    const double duplicated =
        down * 61 * (1.0 - 1.0 / static_cast<double>(k.t)) * (6.0 + 12.0 / static_cast<double>(k.d));
    EXPECT_NEAR(s.params + s.grads + s.optimizer, k.megatron_bytes + duplicated, 1e-12 * k.megatron_bytes) << k.t;
  }
}

}  // namespace
}  // namespace headroom
