#include "headroom/simulator/topology.hpp"

#include <algorithm>
#include <string>

#include "headroom/core/error.hpp"

namespace headroom::sim {
namespace {

using Vertex = boost::graph_traits<TopologyGraph>::vertex_descriptor;
using Edge = boost::graph_traits<TopologyGraph>::edge_descriptor;

}  // namespace

Topology::Topology(const ClusterSpec& c, const TopologyOptions& o) : gpus_per_node_(c.gpus_per_node), nodes_(o.nodes) {
  if (o.nodes < 1) throw Error("topology: --nodes must be at least 1 (got " + std::to_string(o.nodes) + ")");
  if (c.gpus_per_node < 1) throw Error("cluster " + c.name + ": gpus_per_node must be positive");
  if (c.intra_node.bytes_per_s <= 0 || c.inter_node.bytes_per_s <= 0)
    throw Error("cluster " + c.name + " names no intra_node/inter_node links; the simulator needs both");
  if (o.intra_scale <= 0 || o.inter_scale <= 0) throw Error("topology: link efficiencies must be positive");
  nics_per_node_ = o.nics_per_node > 0 ? o.nics_per_node : c.gpus_per_node;
  if (c.gpus_per_node % nics_per_node_ != 0)
    throw Error("topology: nics_per_node " + std::to_string(nics_per_node_) + " must divide gpus_per_node " +
                std::to_string(c.gpus_per_node));
  gpus_ = nodes_ * gpus_per_node_;

  const double intra_bw = c.intra_node.bytes_per_s * o.intra_scale;
  // The cluster files give the node's NIC bandwidth divided by its GPUs; a NIC carries its share of GPUs.
  const std::int64_t gpus_per_nic = gpus_per_node_ / nics_per_node_;  // exact: checked above
  const double nic_bw = c.inter_node.bytes_per_s * o.inter_scale * static_cast<double>(gpus_per_nic);
  const bool switched = c.topology == "nvswitch" || c.topology == "pcie";
  const LinkKind intra_kind = c.topology == "xgmi-mesh" ? LinkKind::xgmi
                              : c.topology == "pcie"    ? LinkKind::pcie
                                                        : LinkKind::nvlink;
  auto add = [&](Vertex a, Vertex b, LinkKind k, double bw, double lat) {
    const auto id = static_cast<std::int32_t>(link_bytes_per_s_.size());
    boost::add_edge(a, b, EdgeProps{k, bw, lat, id}, graph_);
    link_bytes_per_s_.push_back(bw);
    link_latency_s_.push_back(lat);
  };

  const Vertex net = boost::add_vertex(VertexProps{VertexKind::network_switch, -1, 0}, graph_);
  for (std::int64_t n = 0; n < nodes_; ++n) {
    const std::size_t first = gpu_vertex_.size();
    for (std::int64_t g = 0; g < gpus_per_node_; ++g)
      gpu_vertex_.push_back(boost::add_vertex(VertexProps{VertexKind::gpu, n, n * gpus_per_node_ + g}, graph_));
    // Intra-node fabric. A switch: each GPU's port carries the per-GPU bandwidth each way; the latency sits
    // on the way in so a GPU-to-GPU route adds it once. A mesh: every pair has its own link.
    if (switched) {
      const Vertex sw = boost::add_vertex(VertexProps{VertexKind::node_switch, n, 0}, graph_);
      for (std::int64_t g = 0; g < gpus_per_node_; ++g) {
        const Vertex v = gpu_vertex_[first + static_cast<std::size_t>(g)];
        add(v, sw, intra_kind, intra_bw, c.intra_node.latency_s);
        add(sw, v, intra_kind, intra_bw, 0.0);
      }
    } else {
      for (std::int64_t a = 0; a < gpus_per_node_; ++a)
        for (std::int64_t b = 0; b < gpus_per_node_; ++b)
          if (a != b)
            add(gpu_vertex_[first + static_cast<std::size_t>(a)], gpu_vertex_[first + static_cast<std::size_t>(b)],
                intra_kind, intra_bw, c.intra_node.latency_s);
    }
    if (nodes_ == 1) continue;
    // NICs: GPU g uses NIC g / (GPUs per NIC) over PCIe (not a bottleneck here: the NIC is), and the NIC a
    // port of the network switch (a non-blocking fat tree seen as one switch).
    const std::int64_t per_nic = gpus_per_node_ / nics_per_node_;
    for (std::int64_t k = 0; k < nics_per_node_; ++k) {
      const Vertex nic = boost::add_vertex(VertexProps{VertexKind::nic, n, k}, graph_);
      for (std::int64_t g = k * per_nic; g < (k + 1) * per_nic; ++g) {
        const Vertex v = gpu_vertex_[first + static_cast<std::size_t>(g)];
        add(v, nic, LinkKind::pcie, nic_bw, 0.0);
        add(nic, v, LinkKind::pcie, nic_bw, 0.0);
      }
      add(nic, net, LinkKind::network, nic_bw, c.inter_node.latency_s);
      add(net, nic, LinkKind::network, nic_bw, 0.0);
    }
  }
}

Route Topology::route(std::int64_t src, std::int64_t dst) const {
  if (src < 0 || dst < 0 || src >= gpus_ || dst >= gpus_)
    throw Error("topology: GPU " + std::to_string(src < 0 || src >= gpus_ ? src : dst) + " is outside 0.." +
                std::to_string(gpus_ - 1));
  Route r;
  if (src == dst) return r;
  const Vertex s = gpu_vertex_[static_cast<std::size_t>(src)], t = gpu_vertex_[static_cast<std::size_t>(dst)];
  // GPUs never forward traffic: search over switches and NICs only, with the destination GPU as the goal.
  std::vector<Edge> pred(boost::num_vertices(graph_));
  std::vector<char> seen(boost::num_vertices(graph_), 0);
  std::vector<Vertex> queue{s};
  seen[s] = 1;
  for (std::size_t head = 0; head < queue.size() && !seen[t]; ++head) {
    const Vertex u = queue[head];
    if (u != s && graph_[u].kind == VertexKind::gpu) continue;
    for (auto [e, end] = boost::out_edges(u, graph_); e != end; ++e) {
      const Vertex v = boost::target(*e, graph_);
      if (seen[v]) continue;
      seen[v] = 1;
      pred[v] = *e;
      queue.push_back(v);
    }
  }
  if (!seen[t]) throw Error("topology: no route from GPU " + std::to_string(src) + " to GPU " + std::to_string(dst));
  for (Vertex v = t; v != s; v = boost::source(pred[v], graph_)) {
    const EdgeProps& e = graph_[pred[v]];
    r.links.push_back(e.id);
    r.latency_s += e.latency_s;
  }
  std::reverse(r.links.begin(), r.links.end());
  return r;
}

}  // namespace headroom::sim
