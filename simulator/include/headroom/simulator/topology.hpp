// The hardware as a graph (Boost.Graph): GPUs, the node's fabric (an NVSwitch or PCIe switch, or direct
// NVLink / xGMI links in a mesh), NICs, and one network switch joining the nodes. Every edge is one
// direction of a link with its own bandwidth and latency; flows that share an edge share its bandwidth
// (engine.hpp). Built once from a ClusterSpec and a node count; immutable afterwards.
#pragma once

#include <cstdint>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

#include "headroom/estimator/spec.hpp"

namespace headroom::sim {

enum class VertexKind { gpu, node_switch, nic, network_switch };
enum class LinkKind { nvlink, xgmi, pcie, network };

struct VertexProps {
  VertexKind kind = VertexKind::gpu;
  std::int64_t node = 0;   // -1 for the network switch
  std::int64_t index = 0;  // GPU rank (global) or NIC index inside its node
};

struct EdgeProps {
  LinkKind kind = LinkKind::nvlink;
  double bytes_per_s = 0;
  double latency_s = 0;
  std::int32_t id = 0;  // dense edge index, for per-link state in the engine
};

using TopologyGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, VertexProps, EdgeProps>;

struct TopologyOptions {
  std::int64_t nodes = 1;
  std::int64_t nics_per_node = 0;  // 0: one NIC per GPU (the cluster files' inter_node is per GPU)
  double intra_scale = 1.0;        // achieved fraction of the datasheet bandwidth (1 = datasheet)
  double inter_scale = 1.0;
};

// A route: the edges (by id) a flow crosses and the sum of their latencies.
struct Route {
  std::vector<std::int32_t> links;
  double latency_s = 0;
};

class Topology {
 public:
  // Throws Error for a cluster without links, nodes < 1, or nics_per_node not dividing gpus_per_node.
  Topology(const ClusterSpec& cluster, const TopologyOptions& options);

  [[nodiscard]] const TopologyGraph& graph() const { return graph_; }
  [[nodiscard]] std::int64_t gpus() const { return gpus_; }
  [[nodiscard]] std::int64_t gpus_per_node() const { return gpus_per_node_; }
  [[nodiscard]] std::int64_t nodes() const { return nodes_; }
  [[nodiscard]] std::int64_t nics_per_node() const { return nics_per_node_; }
  [[nodiscard]] std::int64_t node_of(std::int64_t gpu) const { return gpu / gpus_per_node_; }
  // The NIC a GPU reaches other nodes through (global index: node × nics_per_node + local NIC).
  [[nodiscard]] std::int64_t nic_of(std::int64_t gpu) const {
    return node_of(gpu) * nics_per_node_ + gpu % gpus_per_node_ / (gpus_per_node_ / nics_per_node_);
  }
  [[nodiscard]] std::size_t link_count() const { return link_bytes_per_s_.size(); }
  [[nodiscard]] double link_bytes_per_s(std::int32_t id) const {
    return link_bytes_per_s_[static_cast<std::size_t>(id)];
  }
  // Fewest-hop path between two GPUs (breadth-first search, ties broken by vertex order: deterministic).
  [[nodiscard]] Route route(std::int64_t src_gpu, std::int64_t dst_gpu) const;

 private:
  TopologyGraph graph_;
  std::int64_t gpus_ = 0, gpus_per_node_ = 0, nodes_ = 0, nics_per_node_ = 0;
  std::vector<double> link_bytes_per_s_;
  std::vector<double> link_latency_s_;
  std::vector<std::size_t> gpu_vertex_;
};

}  // namespace headroom::sim
