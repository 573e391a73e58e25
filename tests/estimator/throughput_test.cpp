#include "headroom/estimator/throughput.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../test_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/lora.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"

namespace headroom {
namespace {

class ThroughputTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec llama8b = lib.model("llama3.1-8b");
  ClusterSpec a100 = lib.cluster("dgx-a100-40gb");
  PerfCoefficients datasheet;

  [[nodiscard]] Layout layout(std::int64_t t, std::int64_t c, std::int64_t p, std::int64_t b, std::int64_t gpus) const {
    Layout l;
    l.tp = t;
    l.cp = c;
    l.pp = p;
    l.mbs = b;
    l.dp = gpus / (t * c * p);
    l.seq = 8192;
    l.gbs = 1024;
    return l;
  }
  // Four stages of two chunks each, on 64 GPUs, under `s`.
  [[nodiscard]] Layout chunked(Schedule s) const {
    Layout l = layout(2, 1, 4, 1, 64);
    l.vpp = 2;
    l.schedule = s;
    return l;
  }
  // T_W, the forward's weight GEMMs of a stage, the mean over its p = 4 stages: the layers' (L/p of them) and the LM
  // head's on its stage.
  [[nodiscard]] double mean_weight_gradient_s(const Layout& l) const {
    const MicrobatchPasses mb = microbatch_passes(llama8b, PerfContext(datasheet, a100), l);
    return static_cast<double>(llama8b.num_layers) / 4.0 * mb.layer.forward.gemm + mb.ends.head_forward_s / 4.0;
  }
};

TEST_F(ThroughputTest, ReportedNumbersAreConsistent) {
  const Layout l = layout(4, 1, 2, 1, 32);
  const PerfEstimate e = estimate_perf(llama8b, a100, l, datasheet);
  EXPECT_GT(e.step_time_s, 0);
  EXPECT_DOUBLE_EQ(e.step_time_s, e.breakdown.total_s());
  EXPECT_DOUBLE_EQ(e.tokens_per_s, 1024.0 * 8192 / e.step_time_s);
  EXPECT_DOUBLE_EQ(e.tflops_per_gpu, e.model_flops / e.step_time_s / 32 / 1e12);
  EXPECT_DOUBLE_EQ(e.mfu, e.tflops_per_gpu * 1e12 / a100.gpu.bf16_flops);
  EXPECT_DOUBLE_EQ(e.pts_s, e.step_time_s / 1024);
  EXPECT_GT(e.mfu, 0.2);
  EXPECT_LT(e.mfu, 0.9);
}

// 1F1B bubble (p − 1)/m of a stage time; interleaving divides it by v.
// Megatron-LM's DDP switches (layout.hpp overlap_grad_reduce, overlap_param_gather): each off exposes its collective
// whole, the other keeps the framework's share; both on is the coefficients' overlap.
TEST_F(ThroughputTest, DdpOverlapSwitchesExposeTheirCollective) {
  PerfCoefficients k = datasheet;
  k.dp_overlap = 0.8;
  const PerfContext p(k, a100);
  Layout l = layout(2, 1, 1, 1, 64);
  l.sharding = parse_sharding("zero1");
  const auto shares = [&](bool reduce, bool gather) {
    l.overlap_grad_reduce = reduce, l.overlap_param_gather = gather;
    return dp_overlap_shares(p, l);
  };
  EXPECT_EQ(shares(true, true).gathers, 0.8);
  EXPECT_EQ(shares(true, true).reductions, 0.8);
  EXPECT_EQ(shares(false, true).reductions, 0.0);
  EXPECT_EQ(shares(false, true).gathers, 0.8);
  EXPECT_EQ(shares(true, false).gathers, 0.0);
  EXPECT_EQ(shares(true, false).reductions, 0.8);
  (void)shares(true, true);
  const double on = estimate_perf(llama8b, p, l).breakdown.dp_comm_s;
  (void)shares(false, false);
  const double off = estimate_perf(llama8b, p, l).breakdown.dp_comm_s;
  EXPECT_GT(off, on);
  // Exposed whole: the once-per-step reduce-scatter and all-gather of the distributed optimizer, as the model prices
  // them with no overlap at all.
  PerfCoefficients none = k;
  none.dp_overlap = 0.0;
  (void)shares(true, true);
  EXPECT_DOUBLE_EQ(off, estimate_perf(llama8b, PerfContext(none, a100), l).breakdown.dp_comm_s);
}

TEST_F(ThroughputTest, BubbleShrinksWithMicrobatchesAndInterleaving) {
  Layout l = layout(2, 1, 4, 1, 64);  // d = 8, m = 128
  const PerfEstimate base = estimate_perf(llama8b, a100, l, datasheet);
  EXPECT_GT(base.breakdown.bubble_s, 0);
  l.vpp = 2;
  l.schedule = Schedule::interleaved;
  const PerfEstimate inter = estimate_perf(llama8b, a100, l, datasheet);
  EXPECT_NEAR(inter.breakdown.bubble_s, base.breakdown.bubble_s / 2, 0.05 * base.breakdown.bubble_s);
  Layout single = layout(2, 1, 1, 1, 64);
  EXPECT_EQ(estimate_perf(llama8b, a100, single, datasheet).breakdown.bubble_s, 0.0);
}

// The zero-bubble schedule (ZB1P) keeps the interleaved 1F1B's steady state and fills its fill and drain with
// weight-gradient passes: bubble (p − 1)/v · (stage time − 2·T_W), T_W the stage's forward weight GEMMs; memory is
// the interleaved schedule's.
TEST_F(ThroughputTest, ZeroBubbleFillsTheBubbleWithWeightGradientPasses) {
  Layout l = chunked(Schedule::interleaved);
  const PerfEstimate inter = estimate_perf(llama8b, a100, l, datasheet);
  l.schedule = Schedule::zero_bubble;
  const PerfEstimate zb = estimate_perf(llama8b, a100, l, datasheet);
  // An even split: first and last stages differ only at the ends; T_W from the one-micro-batch stage passes.
  ASSERT_GT(zb.breakdown.bubble_s, 0);
  EXPECT_LT(zb.breakdown.bubble_s, inter.breakdown.bubble_s);
  EXPECT_DOUBLE_EQ(zb.step_time_s - zb.breakdown.bubble_s, inter.step_time_s - inter.breakdown.bubble_s);
  const double fill = 3.0 / 2.0, mean_stage = inter.breakdown.bubble_s / fill;
  const double t_w = (zb.breakdown.bubble_s / fill - mean_stage) / -2.0;
  const double expected = mean_weight_gradient_s(l);
  EXPECT_NEAR(t_w, expected, 1e-9 * expected);
  for (std::int64_t stage = 0; stage < l.pp; ++stage) {
    Layout i = l;
    i.schedule = Schedule::interleaved;
    EXPECT_EQ(stage_memory(llama8b, a100, l, ResidualModel{}, stage).total(),
              stage_memory(llama8b, a100, i, ResidualModel{}, stage).total());
  }
}

// The V-shaped schedule (ZB-V): rank 0 holds virtual stages 0 and 2p − 1, so the embedding and the LM head, and every
// rank holds 1F1B's first-stage peak of micro-batches; its bubble is ZB-H2's of half-stage chunks, the stage time
// less 3·T_W over 2.
TEST_F(ThroughputTest, ZbvPutsBothEndsOnTheFirstRank) {
  Layout l = chunked(Schedule::zero_bubble);
  const PerfEstimate looped = estimate_perf(llama8b, a100, l, datasheet);
  l.schedule = Schedule::zbv;
  const PerfEstimate v = estimate_perf(llama8b, a100, l, datasheet);
  EXPECT_EQ(head_stage(l), 0);
  const StageCounts first = stage_counts(llama8b, l, 0), last = stage_counts(llama8b, l, 3);
  const double hv = static_cast<double>(llama8b.hidden_size * llama8b.vocab_size) / 2.0;  // per TP rank
  EXPECT_NEAR(first.params - last.params, 2.0 * hv + static_cast<double>(llama8b.hidden_size), 1.0);
  Layout looped_layout = l;
  looped_layout.schedule = Schedule::zero_bubble;
  for (std::int64_t stage = 0; stage < 4; ++stage)  // every rank: p micro-batches of its 8 layers
    EXPECT_EQ(layers_in_flight(llama8b, l, stage), 32.0);
  EXPECT_GT(layers_in_flight(llama8b, looped_layout, 0), 32.0);  // the interleaved warm-up holds more
  // The bubble from the same stage passes: (p − 1)/2 · max(0, mean − 3·T_W), mean and T_W over the stages.
  const double t_w = mean_weight_gradient_s(l);
  const double fill = 1.5, mean = looped.breakdown.bubble_s / fill + 2.0 * t_w;  // the looped one's mean
  EXPECT_NEAR(v.breakdown.bubble_s, fill * std::max(0.0, mean - 3.0 * t_w), 1e-9 * mean);
  EXPECT_LT(v.breakdown.bubble_s, looped.breakdown.bubble_s);
}

// Megatron-LM overlaps pipeline sends with the interleaved schedule's chunks (arguments.py's
// overlap_p2p_comm), not with 1F1B's: a send shorter than a chunk's pass is hidden, and
// --no-overlap-p2p-communication exposes it again.
TEST_F(ThroughputTest, InterleavedPipelineSendsHideBehindTheNextChunk) {
  Layout l = layout(2, 1, 4, 1, 64);
  const double send = pipeline_send_seconds(llama8b, PerfContext(datasheet, a100), l);
  ASSERT_GT(send, 0);
  const double m = static_cast<double>(l.microbatches());
  EXPECT_NEAR(estimate_perf(llama8b, a100, l, datasheet).breakdown.pp_comm_s, 2 * m * send, 1e-9);  // 1F1B: all
  l.vpp = 2;
  l.schedule = Schedule::interleaved;
  EXPECT_TRUE(pipeline_sends_overlap(l));
  EXPECT_EQ(estimate_perf(llama8b, a100, l, datasheet).breakdown.pp_comm_s, 0.0);
  l.overlap_p2p_comm = false;
  EXPECT_FALSE(pipeline_sends_overlap(l));
  EXPECT_NEAR(estimate_perf(llama8b, a100, l, datasheet).breakdown.pp_comm_s, 2 * 2 * m * send, 1e-9);
}

// --tp-comm-overlap (TransformerEngine userbuffers) pipelines each TP collective with its GEMM in t chunks:
// exposed is one chunk of the shorter and whatever the longer exceeds.
TEST_F(ThroughputTest, TpCommOverlapLeavesOneChunkExposed) {
  EXPECT_DOUBLE_EQ(tp_overlapped_comm_seconds(1.0, 3.0, 4), 0.25);        // comm hidden but its first chunk
  EXPECT_DOUBLE_EQ(tp_overlapped_comm_seconds(3.0, 1.0, 4), 2.0 + 0.25);  // the GEMM's chunk and the excess
  EXPECT_DOUBLE_EQ(tp_overlapped_comm_seconds(1.0, 3.0, 1), 1.0);         // no TP group: nothing to pipeline
  Layout l = layout(4, 1, 1, 1, 8);
  const PerfEstimate held = estimate_perf(llama8b, a100, l, datasheet);
  l.tp_comm_overlap = true;
  const PerfEstimate overlapped = estimate_perf(llama8b, a100, l, datasheet);
  ASSERT_GT(held.breakdown.tp_comm_s, 0.0);
  EXPECT_LT(overlapped.breakdown.tp_comm_s, 0.5 * held.breakdown.tp_comm_s);
  EXPECT_GE(overlapped.breakdown.tp_comm_s, held.breakdown.tp_comm_s / 4 - 1e-12);
  EXPECT_DOUBLE_EQ(overlapped.breakdown.compute_s(), held.breakdown.compute_s());
  // Megatron-LM asserts sequence parallelism with --tp-comm-overlap.
  l.sequence_parallel = false;
  EXPECT_THROW(validate_layout(llama8b, l), Error);
}

// Without sequence parallelism Megatron-LM all-reduces the layer output (the bytes of SP's reduce-scatter and
// all-gather on a ring) and runs the norms and residual adds on the whole sequence on every TP rank (Korthikanti et
// al. 2023 Sec. 4.2.2): the same communication, more elementwise time, a slower step.
TEST_F(ThroughputTest, WithoutSequenceParallelismTheNormsAndResidualsRunOnTheWholeSequence) {
  Layout sp = layout(4, 1, 1, 1, 8);
  Layout no_sp = sp;
  no_sp.sequence_parallel = false;
  EXPECT_EQ(unsplit_norm_residual_bytes(llama8b, sp), 0.0);
  EXPECT_DOUBLE_EQ(
      unsplit_norm_residual_bytes(llama8b, no_sp),
      norm_residual_passes(llama8b) * activation_tensor_bytes(llama8b, sp) * 3.0);  // (t − 1)/t of 4 shares
  EXPECT_DOUBLE_EQ(norm_residual_passes(lib.model("gemma-2-27b")) - norm_residual_passes(llama8b), 4.0);  // two norms
  const PerfEstimate with = estimate_perf(llama8b, a100, sp, datasheet);
  const PerfEstimate without = estimate_perf(llama8b, a100, no_sp, datasheet);
  EXPECT_DOUBLE_EQ(without.breakdown.tp_comm_s, with.breakdown.tp_comm_s);
  EXPECT_DOUBLE_EQ(without.breakdown.gemm_s, with.breakdown.gemm_s);
  EXPECT_GT(without.breakdown.elementwise_s, with.breakdown.elementwise_s);
  EXPECT_GT(without.step_time_s, with.step_time_s);
  // One TP rank holds the whole sequence anyway: SP changes nothing.
  Layout one = layout(1, 1, 1, 1, 8), one_off = one;
  one_off.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(estimate_perf(llama8b, a100, one, datasheet).step_time_s,
                   estimate_perf(llama8b, a100, one_off, datasheet).step_time_s);
}

TEST_F(ThroughputTest, RecomputeAddsComputeTime) {
  Layout l = layout(4, 1, 1, 1, 8);
  const double none = estimate_perf(llama8b, a100, l, datasheet).breakdown.compute_s();
  l.recompute = Recompute::selective;
  const double selective = estimate_perf(llama8b, a100, l, datasheet).breakdown.compute_s();
  l.recompute = Recompute::full;
  const double full = estimate_perf(llama8b, a100, l, datasheet).breakdown.compute_s();
  EXPECT_LT(none, selective);
  EXPECT_LT(selective, full);
  EXPECT_NEAR(full / none, 4.0 / 3.0, 0.1);  // one more forward of three passes
  // torchtitan's per-op checkpointing redoes, in a layer's backward, its share of the GEMMs (by FLOPs) and every
  // elementwise pass, and no attention.
  const PerfContext p(datasheet, a100);
  l.recompute = Recompute::op;
  const LayerPasses op = layer_compute_seconds(llama8b, p, l);
  l.recompute = Recompute::none;
  const LayerPasses base = layer_compute_seconds(llama8b, p, l);
  EXPECT_DOUBLE_EQ(op.backward.attention, base.backward.attention);
  EXPECT_NEAR(op.backward.gemm - base.backward.gemm, op_recomputed_gemm_share(llama8b) * base.forward.gemm,
              0.02 * base.forward.gemm);  // by FLOPs against the GEMMs' time at their own efficiencies
  EXPECT_DOUBLE_EQ(op.backward.elementwise - base.backward.elementwise, base.forward.elementwise);
}

// torch.compile (Layout::compile) prices the block's elementwise passes at compiled_elementwise_passes where the
// coefficients give it, and changes nothing where they do not.
TEST_F(ThroughputTest, CompiledBlocksMakeFewerElementwisePasses) {
  Layout l = layout(1, 1, 1, 1, 8);
  PerfCoefficients c = datasheet;
  c.elementwise_passes = 50;
  const double eager = estimate_perf(llama8b, a100, l, c).breakdown.elementwise_s;
  l.compile = true;
  EXPECT_DOUBLE_EQ(estimate_perf(llama8b, a100, l, c).breakdown.elementwise_s, eager);
  c.compiled_elementwise_passes = 5;
  EXPECT_LT(estimate_perf(llama8b, a100, l, c).breakdown.elementwise_s, eager / 5);
}

// A cluster that caps its GPUs' board power below the TDP runs the tensor cores at (limit/TDP)^(1/3) of their clock:
// GEMMs and attention slow by that, HBM-bound passes do not, and MFU stays against the datasheet peak.
TEST_F(ThroughputTest, APowerLimitSlowsTheTensorCoresOnly) {
  ClusterSpec capped = lib.cluster("grand-teton-h100");
  ClusterSpec full = capped;
  full.gpu_power_limit_watts = 0;
  EXPECT_DOUBLE_EQ(power_limited_clock_fraction(full), 1.0);
  EXPECT_DOUBLE_EQ(power_limited_clock_fraction(capped), std::cbrt(500.0 / 700.0));
  const Layout l = layout(1, 1, 1, 1, 8);
  const PerfEstimate a = estimate_perf(llama8b, full, l, datasheet), b = estimate_perf(llama8b, capped, l, datasheet);
  EXPECT_NEAR(b.breakdown.gemm_s / a.breakdown.gemm_s, 1.0 / std::cbrt(500.0 / 700.0), 1e-9);
  EXPECT_NEAR(b.breakdown.attention_s / a.breakdown.attention_s, 1.0 / std::cbrt(500.0 / 700.0), 1e-9);
  EXPECT_DOUBLE_EQ(b.breakdown.elementwise_s, a.breakdown.elementwise_s);
  EXPECT_NEAR(b.mfu / a.mfu, a.step_time_s / b.step_time_s, 1e-12);
}

// Without FlashAttention (Megatron-LM's unfused softmax) the s² scores go through HBM: slower than FlashAttention,
// about 4× per doubled sequence, attention dropout adds 5 bytes a score each way, and selective recompute repeats it.
TEST_F(ThroughputTest, UnfusedAttentionPaysForTheScoresInHbm) {
  Layout l = layout(8, 1, 1, 1, 8);
  l.seq = 2048;
  const PerfContext p(datasheet, a100);
  const double flash = layer_compute_seconds(llama8b, p, l).forward.attention;
  l.flash_attention = false;
  const AttentionSeconds plain = unfused_attention_seconds(llama8b, p, l);
  EXPECT_GT(plain.forward, flash);
  EXPECT_DOUBLE_EQ(layer_compute_seconds(llama8b, p, l).forward.attention, plain.forward);
  EXPECT_DOUBLE_EQ(layer_compute_seconds(llama8b, p, l).backward.attention, plain.backward);
  ModelSpec dropout = llama8b;
  dropout.attention_dropout = 0.1;
  const double scores = 1.0 * 32 / 8 * 2048.0 * 2048.0;  // b·(a/t)·s²
  const AttentionSeconds with_dropout = unfused_attention_seconds(dropout, p, l);
  EXPECT_NEAR(with_dropout.forward - plain.forward, 5.0 * scores / p.hbm_bytes_per_s, 1e-12);
  EXPECT_NEAR(with_dropout.backward - plain.backward, 5.0 * scores / p.hbm_bytes_per_s, 1e-12);
  l.recompute = Recompute::selective;
  EXPECT_DOUBLE_EQ(layer_compute_seconds(llama8b, p, l).backward.attention, plain.backward + plain.forward);
  Layout longer = l;
  longer.seq = 4096;
  const double ratio = unfused_attention_seconds(llama8b, p, longer).forward / plain.forward;
  EXPECT_GT(ratio, 3.5);
  EXPECT_LE(ratio, 4.0);
}

// TP beyond a node pays the NIC; CP across nodes likewise.
TEST_F(ThroughputTest, CommunicationLevelFollowsRankPlacement) {
  EXPECT_EQ(members_per_node(1, 8, 8), 8);
  EXPECT_EQ(members_per_node(1, 16, 8), 8);
  EXPECT_EQ(members_per_node(4, 4, 8), 2);
  EXPECT_EQ(members_per_node(8, 4, 8), 1);
  const PerfEstimate in_node = estimate_perf(llama8b, a100, layout(8, 1, 1, 1, 16), datasheet);
  ClusterSpec small = a100;
  small.gpus_per_node = 4;
  const PerfEstimate across = estimate_perf(llama8b, small, layout(8, 1, 1, 1, 16), datasheet);
  EXPECT_GT(across.breakdown.tp_comm_s, 3 * in_node.breakdown.tp_comm_s);
}

// One all-to-all of the alltoall dispatcher moves each GPU's k·s·b/(t·c) token copies of h BF16
// values, (ep − 1)/ep of them away: on NVLink when the EP group sits in a node, the off-node share on the NIC
// otherwise; the expert GEMMs carry the active FLOPs of the copies a GPU receives.
TEST_F(ThroughputTest, ExpertAllToAllsFollowWhereTheExpertGroupSits) {
  const ModelSpec mixtral = lib.model("mixtral-8x7b");
  ClusterSpec h100 = lib.cluster("dgx-h100");
  const PerfContext p(datasheet, h100);
  Layout l = layout(1, 1, 1, 1, 64);
  l.seq = 4096;
  l.ep = 8;
  const double bytes = 2.0 * 2 * 4096 * 4096;  // k = 2 copies of 4,096 tokens of h = 4,096, BF16
  EXPECT_DOUBLE_EQ(routed_copies_per_gpu(mixtral, l), 2.0 * 4096);
  EXPECT_DOUBLE_EQ(expert_dispatch_seconds(mixtral, p, l), p.intra.seconds(bytes * 7.0 / 8.0));
  h100.gpus_per_node = 4;  // the 8 experts' GPUs span two nodes: half of the copies leave the node
  const PerfContext q(datasheet, h100);
  EXPECT_DOUBLE_EQ(expert_dispatch_seconds(mixtral, q, l),
                   std::max(q.intra.seconds(bytes * 3.0 / 8.0), q.inter.seconds(bytes * 4.0 / 8.0)));
  EXPECT_GT(expert_dispatch_seconds(mixtral, q, l), 2.0 * expert_dispatch_seconds(mixtral, p, l));
  // The flex dispatcher sends a token across once per remote node holding one of its experts: with 4 of the 8
  // experts on the other node, top 2, that node is hit with probability 1 − C(4, 2)/C(8, 2) = 22/28.
  EXPECT_DOUBLE_EQ(expected_remote_nodes(mixtral, 2.0), 1.0 - (4.0 * 3.0) / (8.0 * 7.0));
  l.dispatcher = ExpertDispatcher::flex;
  EXPECT_DOUBLE_EQ(expert_dispatch_seconds(mixtral, q, l),
                   std::max(q.intra.seconds(bytes * 3.0 / 8.0), q.inter.seconds(bytes / 2.0 * (22.0 / 28.0))));
  l.dispatcher = ExpertDispatcher::alltoall;
  // Active FLOPs: the routed GEMMs of a layer with experts carry k = 2 experts' FFN per token (2·3·h·f_e each),
  // one more than Llama 3.1 8B's dense FFN of the same width under the same attention.
  Layout one = l;
  one.ep = 1;
  const double flops_f = 2.0 * 4096 * 3.0 * 4096 * 14336;
  const double seconds =
      moe_layer_compute_seconds(mixtral, p, one).forward.gemm - layer_compute_seconds(llama8b, p, one).forward.gemm;
  EXPECT_GT(seconds, flops_f / p.peak_flops);
}

// Group-limited routing (moe_utils.py group_limited_topk; DeepSeek-V3's 8 groups of 32 experts, 4 chosen, top 8): a
// token reaches at most the nodes of its 4 groups, which the flex dispatcher sends it to once each.
TEST_F(ThroughputTest, GroupLimitedRoutingBoundsTheNodesAFlexDispatchReaches) {
  const ModelSpec v3 = lib.model("deepseek-v3");
  ASSERT_EQ(v3.moe_router_num_groups, 8);
  ASSERT_EQ(v3.moe_router_group_topk, 4);
  // One group a node: a node is reached when its group is chosen, 4 of 8.
  EXPECT_DOUBLE_EQ(expected_remote_nodes(v3, 8.0), 7.0 * 4.0 / 8.0);
  // Two groups a node: reached unless neither is chosen, 1 − C(6, 4)/C(8, 4).
  EXPECT_DOUBLE_EQ(expected_remote_nodes(v3, 4.0), 3.0 * (1.0 - 15.0 / 70.0));
  // A group over two nodes: its group chosen (4/8) and one of its k/M = 2 experts of the 32 among the node's 16.
  EXPECT_DOUBLE_EQ(expected_remote_nodes(v3, 16.0), 15.0 * 0.5 * (1.0 - (16.0 * 15.0) / (32.0 * 31.0)));
  // Fewer remote nodes than free routing over all 256 experts, the same when every group is chosen or there is one.
  ModelSpec free = v3;
  free.moe_router_num_groups = free.moe_router_group_topk = 0;
  EXPECT_LT(expected_remote_nodes(v3, 8.0), expected_remote_nodes(free, 8.0));
  ModelSpec one_group = v3;
  one_group.moe_router_num_groups = one_group.moe_router_group_topk = 1;
  EXPECT_DOUBLE_EQ(expected_remote_nodes(one_group, 8.0), expected_remote_nodes(free, 8.0));
  ModelSpec every_group = v3;
  every_group.moe_router_group_topk = 8;
  EXPECT_DOUBLE_EQ(expected_remote_nodes(every_group, 8.0), 7.0);
  // 8 groups over 3 nodes neither divide: refused, and the layout with it refused on the cluster.
  EXPECT_FALSE(group_routing_priced(v3, 3.0));
  EXPECT_TRUE(group_routing_priced(v3, 1.0) && group_routing_priced(free, 3.0));
  EXPECT_THROW((void)expected_remote_nodes(v3, 3.0), Error);
  ModelSpec split = v3;  // 48 experts in 8 groups of 6, EP 24 over three 8-GPU nodes
  split.num_experts = 48;
  Layout l = layout(1, 1, 1, 1, 24);
  l.seq = 4096;
  l.ep = 24;
  const ClusterSpec h100 = lib.cluster("dgx-h100");
  EXPECT_NO_THROW(validate_on_cluster(split, l, h100));  // the alltoall dispatcher sends every copy: no groups
  l.dispatcher = ExpertDispatcher::flex;
  EXPECT_NE(test::error_of([&] { validate_on_cluster(split, l, h100); }).find("8 routing groups"), std::string::npos);
}

// --moe-shared-expert-overlap: each all-to-all runs beside one of the shared expert's GEMMs and is exposed only
// past it. DeepSeek-V3's shared expert (2,048 wide) over 4,096 tokens hides part of each dispatch at ep 64 across
// nodes; the compute is the same. Mixtral has no shared expert: nothing changes.
TEST_F(ThroughputTest, SharedExpertOverlapHidesTheDispatchBehindItsGemms) {
  const ModelSpec deepseek = lib.model("deepseek-v3"), mixtral = lib.model("mixtral-8x7b");
  const ClusterSpec h100 = lib.cluster("dgx-h100");
  Layout l = layout(1, 1, 1, 1, 64);
  l.seq = 4096;
  l.ep = 64;
  const PerfContext p(datasheet, h100);
  Layout overlapped = l;
  overlapped.shared_expert_overlap = true;
  const StepBreakdown a = estimate_perf(deepseek, p, l).breakdown, b = estimate_perf(deepseek, p, overlapped).breakdown;
  EXPECT_DOUBLE_EQ(b.compute_s(), a.compute_s());
  EXPECT_LT(b.ep_comm_s, a.ep_comm_s);
  EXPECT_GT(b.ep_comm_s, 0.0);  // the dispatch across nodes outlasts the GEMMs
  l.ep = 8;
  overlapped.ep = 8;
  EXPECT_DOUBLE_EQ(estimate_perf(mixtral, p, overlapped).breakdown.ep_comm_s,
                   estimate_perf(mixtral, p, l).breakdown.ep_comm_s);
}

// CP's K/V traffic as the rings run it (c = 4; K and V take 3 s to pass round, twice the bytes 6 s; attention 2 s
// forward, 5 s backward): Transformer Engine's P2P ring hides it behind all the attention, PyTorch's permute ring sends
// FP32 gradients (3 + 6 s backward), and its all-gather rotater hides K and V behind the first step's attention only
// (1/4 of it), the FP32 gradients behind the other three steps'.
TEST_F(ThroughputTest, CpRotationHidesWhatItsAttentionCovers) {
  Layout l = layout(1, 4, 1, 1, 4);
  const auto exposed = [&](CpExchange r) {
    l.cp_exchange = r;
    return exposed_cp_seconds(l, {3.0, 6.0, 0.5}, 2.0, 1.0);
  };
  const CpExposed p2p = exposed(CpExchange::p2p), ring = exposed(CpExchange::alltoall),
                  gather = exposed(CpExchange::allgather);
  EXPECT_DOUBLE_EQ(p2p.forward, 1.0);
  EXPECT_DOUBLE_EQ(p2p.backward, 1.0);
  EXPECT_DOUBLE_EQ(ring.forward, 1.0);
  EXPECT_DOUBLE_EQ(ring.backward, 4.0);
  EXPECT_DOUBLE_EQ(gather.forward, 2.5);
  EXPECT_DOUBLE_EQ(gather.backward, (3.0 - 1.25) + (6.0 - 3.75));
  // Transformer Engine's all_gather (K, V gathered; backward gathered again and dK, dV reduce-scattered) and a2a (its
  // all-to-alls, 0.5 s a pass) hide nothing.
  const CpExposed te_gather = exposed(CpExchange::all_gather), ulysses = exposed(CpExchange::a2a);
  EXPECT_DOUBLE_EQ(te_gather.forward, 3.0);
  EXPECT_DOUBLE_EQ(te_gather.backward, 6.0);
  EXPECT_DOUBLE_EQ(ulysses.forward, 0.5);
  EXPECT_DOUBLE_EQ(ulysses.backward, 0.5);
  // torchtitan's CP rotates by all-gather unless told; Megatron-LM's is the P2P ring and refuses the knob.
  EXPECT_EQ(default_layout(lib.framework("torchtitan")).cp_exchange, CpExchange::allgather);
  EXPECT_EQ(default_layout(lib.framework("megatron")).cp_exchange, CpExchange::p2p);
}

// Transformer Engine's a2a splits the heads a TP rank holds over CP (Llama 3.1 8B: 32 query, 8 key/value heads), and
// its all_gather holds a layer's K and V gathered, and dK, dV as long, at once: (2c − 1) times a GPU's own.
TEST_F(ThroughputTest, TransformerEngineCpExchangesHaveTheirLimitsAndBuffers) {
  Layout l = layout(2, 4, 1, 1, 8);
  l.cp_exchange = CpExchange::a2a;
  EXPECT_NO_THROW(validate_layout(llama8b, l));  // 16 and 4 heads over c = 4
  l.tp = 4;
  l.dp = 1;
  l.cp = 4;
  l.cp_exchange = CpExchange::a2a;
  EXPECT_THROW(validate_layout(llama8b, l), Error);  // 2 key/value heads a TP rank: not divisible by 4
  Layout ring = layout(1, 4, 1, 1, 4);
  Layout gathered = ring;
  gathered.cp_exchange = CpExchange::all_gather;
  EXPECT_DOUBLE_EQ(stage_activation_bytes(llama8b, gathered, 0) - stage_activation_bytes(llama8b, ring, 0),
                   7.0 * cp_kv_bytes(llama8b, ring));
}

// A TP ring across nodes crosses them through every NIC of a node (NCCL's channels): with instant intra-node
// links it moves (n − 1)/n of the bytes over m NICs, not over one; on one node it is the plain ring.
TEST_F(ThroughputTest, TensorParallelRingAcrossNodesUsesEveryNicOfTheNode) {
  const Link fast{1e30, 0.0}, nic{25e9, 5e-6}, nvlink{450e9, 3e-6};
  const double bytes = 1e9;
  EXPECT_DOUBLE_EQ(ring_gather_across_nodes_seconds(bytes, 8, 4, fast, nic), 7 * 5e-6 + 7.0 / 8.0 * bytes / (4 * 25e9));
  EXPECT_DOUBLE_EQ(ring_gather_across_nodes_seconds(bytes, 8, 4, nvlink, nic),
                   7 * 5e-6 + 7.0 / 8.0 * bytes * (0.75 / 450e9 + 0.25 / 25e9));
  EXPECT_LT(ring_gather_across_nodes_seconds(bytes, 8, 4, nvlink, nic), ring_gather_seconds(bytes, 8, nic));
  EXPECT_EQ(ring_gather_across_nodes_seconds(bytes, 1, 1, nvlink, nic), 0.0);
}

TEST_F(ThroughputTest, FullyShardedDataParallelCostsMoreCommunication) {
  Layout l = layout(1, 1, 1, 1, 64);
  l.seq = 2048;
  l.gbs = 512;
  const double zero1 = estimate_perf(llama8b, a100, l, datasheet).breakdown.dp_comm_s;
  l.sharding = {Shard::global, Shard::global, Shard::global};
  const double zero3 = estimate_perf(llama8b, a100, l, datasheet).breakdown.dp_comm_s;
  EXPECT_GT(zero3, zero1);
}

// LoRA (thesis Sec. 3.1.2): a frozen linear's backward is one GEMM (input gradient), not two.
TEST_F(ThroughputTest, FrozenBaseWeightsHalveTheBackwardGemms) {
  EXPECT_DOUBLE_EQ(gemm_backward_ratio(true), kGemmBackwardRatio);
  EXPECT_DOUBLE_EQ(gemm_backward_ratio(false), 1.0);
  Layout full = layout(2, 1, 1, 1, 8);
  full.gbs = 64;
  Layout lora = full;
  lora.lora.rank = 16;
  const StepBreakdown f = estimate_perf(llama8b, a100, full, datasheet).breakdown;
  const StepBreakdown r = estimate_perf(llama8b, a100, lora, datasheet).breakdown;
  // fwd 1 + bwd 1 instead of 1 + 2, plus the adapter GEMMs (rank 16: thin, at low efficiency): just over 2/3.
  EXPECT_GT(r.gemm_s, 2.0 / 3.0 * f.gemm_s);
  EXPECT_LT(r.gemm_s, 0.75 * f.gemm_s);
  EXPECT_DOUBLE_EQ(r.attention_s, f.attention_s);
}

// 2 FLOPs per token and adapter element on this TP rank.
TEST_F(ThroughputTest, AdapterFlops) {
  Layout l = layout(4, 1, 1, 2, 8);
  EXPECT_DOUBLE_EQ(lora_flops_forward(llama8b, l), 0.0);
  l.lora.rank = 64;
  EXPECT_DOUBLE_EQ(lora_flops_forward(llama8b, l), 2.0 * 8192 * 2 * lora_layer_split(llama8b, l.lora, 4).per_rank());
}

// Gradient traffic covers the adapters only; FSDP's all-gathers still move the frozen base weights.
TEST_F(ThroughputTest, LoraCommunicatesTrainableGradientsButGathersFrozenWeights) {
  Layout l = layout(1, 1, 1, 1, 8);
  l.gbs = 8;
  const DpParameters full = dp_parameters_per_gpu(llama8b, l, 0);
  EXPECT_DOUBLE_EQ(full.gathered, full.trainable);
  l.lora.rank = 16;
  const DpParameters lora = dp_parameters_per_gpu(llama8b, l, 0);
  EXPECT_DOUBLE_EQ(lora.trainable, lora_trainable_parameters(llama8b, l.lora));
  EXPECT_DOUBLE_EQ(lora.gathered, full.gathered + lora.trainable);
  // DDP-like NNG: only gradients move, so LoRA's DP time collapses; GGG keeps the parameter gathers.
  Layout ddp_full = layout(1, 1, 1, 1, 8), ddp_lora = ddp_full, fsdp_lora = ddp_full;
  ddp_full.gbs = ddp_lora.gbs = fsdp_lora.gbs = 8;
  ddp_lora.lora.rank = fsdp_lora.lora.rank = 16;
  fsdp_lora.sharding = {Shard::global, Shard::global, Shard::global};
  const double t_full = estimate_perf(llama8b, a100, ddp_full, datasheet).breakdown.dp_comm_s;
  const double t_lora = estimate_perf(llama8b, a100, ddp_lora, datasheet).breakdown.dp_comm_s;
  const double t_fsdp = estimate_perf(llama8b, a100, fsdp_lora, datasheet).breakdown.dp_comm_s;
  EXPECT_LT(t_lora, 0.05 * t_full);
  EXPECT_GT(t_fsdp, 10 * t_lora);
}

TEST_F(ThroughputTest, CoefficientsRoundTripAndRejectUnknownKeys) {
  PerfCoefficients c;
  c.name = "x";
  c.gemm_efficiency = 0.61;
  c.layer_overhead_s = 25e-6;
  c.gpus.push_back({"a100-40gb", 0.8, 0.4, ""});
  const PerfCoefficients back = perf_coefficients_from_json(perf_coefficients_to_json(c), "test");
  EXPECT_EQ(back.name, "x");
  EXPECT_DOUBLE_EQ(back.gemm_efficiency, 0.61);
  EXPECT_NEAR(back.layer_overhead_s, 25e-6, 1e-15);
  ASSERT_EQ(back.gpus.size(), 1u);
  EXPECT_EQ(PerfContext(back, a100).gemm_efficiency, 0.8);
  EXPECT_THROW((void)perf_coefficients_from_json(nlohmann::json{{"gemm_eficiency", 0.5}}, "test"), Error);
  EXPECT_THROW((void)perf_coefficients_from_json(nlohmann::json{{"dp_overlap", -1}}, "test"), Error);
}

TEST_F(ThroughputTest, ShippedCoefficientsLoad) {
  const PerfCoefficients c = default_perf_coefficients(lib, "megatron");
  EXPECT_GT(c.gemm_efficiency, 0);
  EXPECT_EQ(default_perf_coefficients(lib, "no-such-framework").name, "datasheet");
}

}  // namespace
}  // namespace headroom
