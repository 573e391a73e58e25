// `--cluster FILE`: a cluster spec, read as SpecLibrary::cluster reads it (JSON, schema, its GPU by name from
// data/gpus or by path, links converted to SI units).
#include <cstdint>

#include "fuzz_support.hpp"
#include "headroom/estimator/spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom;
  static const SpecLibrary lib(fuzz::data_dir());
  const auto path = fuzz::write_input("cluster.json", data, size);
  fuzz::value_or_error([&] {
    const ClusterSpec c = lib.cluster(path.string());
    fuzz::require(!c.name.empty() && !c.gpu.name.empty() && !c.topology.empty(), "names are set");
    fuzz::require(c.gpus_per_node > 0, "at least one GPU per node");
    fuzz::require(fuzz::positive(c.intra_node.bytes_per_s) && fuzz::positive(c.inter_node.bytes_per_s),
                  "finite positive link bandwidths");
    fuzz::require(fuzz::non_negative(c.intra_node.latency_s) && fuzz::non_negative(c.inter_node.latency_s),
                  "finite non-negative link latencies");
    fuzz::require(fuzz::positive(c.gpu.bf16_flops) && fuzz::positive(c.gpu.usable_memory_bytes), "a usable GPU");
    fuzz::require(fuzz::non_negative(c.host_link.bytes_per_s) && fuzz::non_negative(c.host_memory_bytes_per_s) &&
                      fuzz::non_negative(c.host_link.latency_s),
                  "host link and DRAM bandwidth finite, 0 when not given");
    fuzz::require((c.host_link.bytes_per_s > 0) == (c.host_memory_bytes_per_s > 0), "a host spec is whole or absent");
  });
  return 0;
}
