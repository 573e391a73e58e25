// The coefficients of the throughput model that the datasheets do not give (efficiencies, overlaps, fixed costs),
// where they come from (data/perf/<framework>.json, a calibration profile, calibrate --from-runs) and how they are
// resolved against one cluster (PerfContext): every precedence between a GPU's own entry, the device's kernel curves,
// the GPU it computes as, another framework's device entry, a cluster's link entry and the generic values is here,
// once.
#pragma once

#include <array>
#include <cstdint>
#include <numbers>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/estimator/uncertainty.hpp"

namespace headroom {

// Efficiencies of one GPU model (a name of data/gpus), overriding the generic ones.
struct GpuEfficiency {
  std::string gpu;
  double gemm = 0;           // fraction of dense BF16 peak a large GEMM reaches
  double attention = 0;      // fraction of dense BF16 peak FlashAttention reaches at long sequences
  std::string fitted_under;  // the coefficients whose fit gave it, for an entry of device_gpus
};

// Link efficiencies fitted on one cluster (a name of data/clusters), overriding the generic ones there only: what
// a cluster's network stack achieves (LUMI's RCCL over Slingshot in the thesis, the 4D paper's clusters' CP ring) is
// not the framework's to carry. 0: the generic one.
struct ClusterEfficiency {
  std::string cluster;
  double intra = 0;               // fraction of the intra-node link's datasheet bandwidth
  double inter = 0;               // fraction of the inter-node link's
  double cp_inter = 0;            // the CP ring's P2P across nodes, fraction of the inter-node link's
  double cp_overlap = -1;         // share of the CP ring hidden behind the attention it feeds; < 0: the generic one
  double dp_overlap = -1;         // share of a pass hiding DP/FSDP collectives there; < 0: the generic one
  std::string source = "fitted";  // or "measured": a calibration profile's link, at its own bandwidth (1)
};

// What NCCL's ring collectives reach within a node over NVSwitch at 1 GiB and more in nccl-tests: busbw over the
// per-direction datasheet bandwidth (data/reference/published_collectives.csv: 0.77 on A100, 0.81 on H200, 0.75 on
// B200; validation/published.hpp intra_node_busbw_fraction). The shipped frameworks' intra_efficiency wherever no
// `clusters` entry names the cluster.
inline constexpr double kMeasuredIntraNodeEfficiency = 0.78;

// Every coefficient of the model that the datasheets do not give. Defaults are datasheet-level guesses.
struct PerfCoefficients {
  std::string name = "datasheet";
  std::string source = "built-in datasheet defaults (no fit)";
  // compute
  double gemm_efficiency = 0.75;       // large-GEMM fraction of peak, unless a GpuEfficiency names the GPU
  double gemm_half_dim = 64;           // a GEMM dimension d scales efficiency by d/(d + half)
  double gemm_wave_units = 0;          // SMs/CUs a GEMM's output tiles run on in waves (0: no wave term)
  double gemm_tile = 128;              // output tile edge for the wave term
  double attention_efficiency = 0.5;   // FlashAttention-2 fwd+bwd fraction of peak at long sequences
  double attention_half_tokens = 512;  // query tokens per GPU (s/c) at which attention efficiency halves
  // The attention kernels the framework runs (kernel_curves.hpp kAttentionBackends): which of a device's attention
  // curves prices it.
  std::string attention_backend = "flash2";
  // The fraction of a device's isolated GEMM curve (GpuSpec::kernels) that this framework's GEMMs reach inside a
  // training step: the SMs its overlapped TP/DP communication kernels hold while they run, clocks under sustained
  // load. Attention runs at the device's curve (nothing is overlapped with it but the CP ring, on copy engines).
  // Prices only GPUs with kernel curves and no `gpus` entry of their own.
  double stack_gemm_fraction = 1.0;
  double elementwise_passes = 6;  // HBM passes over a layer's s·b·h/(t·c) activations (norms, SwiGLU, RoPE, residual)
  // The same under torch.compile (Layout::compile), Inductor fusing the block's elementwise ops; < 0:
  // elementwise_passes.
  double compiled_elementwise_passes = -1;
  double loss_passes = 3;       // HBM passes over the FP32 logits (softmax, loss, gradient)
  double layer_overhead_s = 0;  // fixed cost per layer and micro-batch pass (launches, synchronisation)
  double step_overhead_s = 0;   // fixed cost per step (optimizer launch, logging)
  // communication: achieved fraction of the link's datasheet bandwidth per level
  double intra_efficiency = 0.7;
  double inter_efficiency = 0.7;
  // CP ring P2P across nodes: what one 400 Gb/s NDR NIC carries in nccl-tests, 46-48 of 50 GB/s (NVIDIA/nccl-tests
  // issues #290 and #319, maintainers' statements), unless a `clusters` entry names the cluster.
  double cp_inter_efficiency = 0.94;
  // overlap: fraction of a collective hidden behind compute
  double tp_overlap = 0;  // TP/SP collectives behind the layer's GEMMs
  // CP ring P2P behind the attention compute it pipelines with: all of it, as Transformer Engine's ring attention
  // waits for step i's K and V, posts step i + 1's send/recv, then runs step i's attention (transformer_engine/pytorch/
  // attention/dot_product_attention/context_parallel.py, AttnFuncWithCPAndKVP2P.forward), unless a `clusters` entry
  // names the cluster
  double cp_overlap = 1;
  double pp_overlap = 0;  // PP send/recv behind compute
  double dp_overlap = 0;  // DP reduce-scatter / all-gather behind one micro-batch's backward / forward
  // offloading: achieved fraction of the host link's (PCIe) datasheet bandwidth (pinned copies), and of the host
  // DRAM bandwidth a CPU Adam step streams at (STREAM-class; the step is memory-bound)
  double host_link_efficiency = 0.8;
  double host_memory_efficiency = 0.7;
  std::vector<GpuEfficiency> gpus;
  // Other coefficients' fitted GPU entries (default_perf_coefficients reads them from the other data/perf files; not
  // part of this file): a GPU's GEMM and attention efficiencies are the device's and its kernel libraries', not the
  // Framework's, used for a GPU that `gpus` does not name, directly or as its kernels_as.
  std::vector<GpuEfficiency> device_gpus;
  std::vector<ClusterEfficiency> clusters;
  // Where the generic GEMM/attention efficiencies come from: "datasheet" (defaults), "fitted" (to measured runs:
  // calibrate --from-runs) or "measured" (a calibration profile's microkernels). A `gpus` entry is fitted.
  std::string generic_source = "datasheet";
  ErrorBand step_time_band;  // held-out band of the step time ("uncertainty"; unknown for the datasheet defaults)
  // What computed it ("uncertainty.origin"): headroom validate for the shipped files, calibrate --from-runs for its
  // own.
  std::string step_time_band_origin = "headroom validate";
  // The same by the GPU counts of the held-out runs ("uncertainty.by_gpus", ascending: the error
  // grows with the GPU count); empty: step_time_band at every count.
  std::vector<GpuCountBand> step_time_bands_by_gpus;
};

// HBM passes over a layer's activations as the layout runs it: compiled_elementwise_passes under torch.compile (when
// the framework's coefficients give it), else elementwise_passes.
[[nodiscard]] inline double elementwise_passes(const PerfCoefficients& c, const Layout& l) {
  return l.compile && c.compiled_elementwise_passes >= 0 ? c.compiled_elementwise_passes : c.elementwise_passes;
}

// The held-out step-time band for a job of `gpus` GPUs: the by-GPU-count entry of the largest count not above it
// (the smallest count's below all of them), else the pooled one.
[[nodiscard]] const ErrorBand& step_time_band_for(const PerfCoefficients& c, std::int64_t gpus);
// Where that band comes from, for the estimate's interval_source.
[[nodiscard]] std::string step_time_band_source(const PerfCoefficients& c, std::int64_t gpus);

// The `clusters` entry of `cluster`, appended with the generic link efficiencies when there is none.
[[nodiscard]] ClusterEfficiency& cluster_links(PerfCoefficients& c, const std::string& cluster);

// Coefficients from JSON (data/perf/*.json); unknown keys are errors naming the key and the valid ones.
[[nodiscard]] PerfCoefficients perf_coefficients_from_json(const nlohmann::json& j, std::string_view where);
[[nodiscard]] nlohmann::json perf_coefficients_to_json(const PerfCoefficients& c);
// data_dir/perf/<framework>.json when present, else the datasheet defaults; with the other data/perf files' GPU
// entries as its device_gpus.
[[nodiscard]] PerfCoefficients default_perf_coefficients(const SpecLibrary& lib, std::string_view framework);
// The same with data/schema/perf.schema.json already read (perf_schema; null: none shipped, nothing checked).
[[nodiscard]] PerfCoefficients default_perf_coefficients(const SpecLibrary& lib, std::string_view framework,
                                                         const nlohmann::json& schema);
[[nodiscard]] nlohmann::json perf_schema(const SpecLibrary& lib);
// A coefficients document read from `path`, checked against the schema (null: not checked) and parsed.
[[nodiscard]] PerfCoefficients perf_coefficients_file(const std::string& path, const nlohmann::json& doc,
                                                      const nlohmann::json& schema);
// Adds `from`'s GPU entries (its own and its device ones) to c.device_gpus where c has none for that GPU.
void add_device_entries(PerfCoefficients& c, const PerfCoefficients& from);

// Alpha-beta link: time(bytes) = latency + bytes / bandwidth.
struct Link {
  double bytes_per_s = 0;
  double latency_s = 0;
  [[nodiscard]] double seconds(double bytes) const { return latency_s + bytes / bytes_per_s; }
};

// The head dimensions a device's attention curves are held at; a model's is priced at the nearest in log2.
inline constexpr std::array<double, 3> kCurveHeadDims = {64, 128, 256};
// The index in kCurveHeadDims nearest head_dim in log2: the boundaries are their geometric means, 64·√2 and 128·√2.
[[nodiscard]] constexpr std::size_t curve_head_dim_index(double head_dim) {
  return head_dim < kCurveHeadDims[0] * std::numbers::sqrt2   ? 0
         : head_dim < kCurveHeadDims[1] * std::numbers::sqrt2 ? 1
                                                              : 2;
}

// Coefficients resolved against one cluster, once: everything per layout is then closed-form and allocation-free.
struct PerfContext {
  PerfContext(const PerfCoefficients& coefficients, const ClusterSpec& cluster);
  PerfCoefficients coef;
  double peak_flops = 0;            // BF16 dense, at the cluster's power limit (power_limited_clock_fraction)
  double fp8_peak_flops = 0;        // FP8 dense, likewise; 0: the GPU has none
  double datasheet_peak_flops = 0;  // BF16 dense as the datasheet gives it: MFU's denominator
  double hbm_bytes_per_s = 0;
  Link host;                           // GPU↔host copies (PCIe) at host_link_efficiency; 0 B/s: not given
  double host_memory_bytes_per_s = 0;  // the node's CPU DRAM at host_memory_efficiency; 0: not given
  double gemm_efficiency = 0;
  double attention_efficiency = 0;
  double attention_half_tokens = 0;
  // Where the device's curves price it, each of its attention curves (efficiency, half tokens) in kAttentionBackends'
  // order (cudnn, flash2) at the head dimensions of kCurveHeadDims (each the curve of the nearest head dimension the
  // device has rows for); efficiency 0: the device has none of that backend. framework_attention_curve: the index of
  // the framework's attention_backend among them, -1 where its attention is the coefficients' own.
  std::array<std::array<std::pair<double, double>, 3>, 2> attention_curves{};
  int framework_attention_curve = -1;
  // The device's kernel curves (GEMMs at the stack's stack_gemm_fraction) price GEMMs and attention when set:
  // the GPU has curves and these coefficients no `gpus` entry of its own (efficiency_source "device curves").
  bool device_curves = false;
  GemmCurve bf16_curve, fp8_curve;
  std::string device_kernels;  // those curves' file, kind and rows, and the stack's fraction, in words; empty: none
  std::int64_t gpus_per_node = 1;
  Link intra, inter, cp_inter;
  // Where this GPU's GEMM and attention efficiencies come from (nothing falls back silently):
  // "fitted" (a `gpus` entry names it, or the GPU its spec says it computes as), "device curves" (its kernel curves),
  // else the coefficients' generic_source; efficiency_gpu is the GPU the entry or the curves name.
  std::string efficiency_source;
  std::string efficiency_gpu;
  std::string efficiency_fitted_under;  // the coefficients whose fit gave the entry (another's: a device_gpus one)
  double gemm_scale = 1.0, attention_scale = 1.0;  // the GPU spec's kernels_scale where it uses another's entry
  // The link efficiencies in force here (a `clusters` entry naming the cluster, else the generic ones) and where
  // they come from: "fitted on <cluster>", "measured on <cluster>" or "generic".
  double intra_efficiency = 0, inter_efficiency = 0, cp_inter_efficiency = 0;
  double cp_overlap = 0;  // the same for the CP ring's overlap with attention
  double dp_overlap = 0;  // and for the DP/FSDP collectives' overlap with the passes
  std::string link_source;
};

}  // namespace headroom
