#include "sender_balance.h"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>

#include "layout/checked.h"

namespace reshard::plan_detail {

using layout_detail::checked_add;

namespace {

constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();

// Dinic's max-flow on a small graph.
class MaxFlow {
 public:
  explicit MaxFlow(size_t nodes) : edges_of_(nodes), level_(nodes), next_(nodes) {}

  // Returns the edge's index, for reading its flow afterwards.
  size_t add_edge(size_t from, size_t to, uint64_t capacity) {
    edges_of_[from].push_back(edges_.size());
    edges_.push_back({to, capacity});
    edges_of_[to].push_back(edges_.size());
    edges_.push_back({from, 0});
    return edges_.size() - 2;
  }

  void set_capacity(size_t edge, uint64_t capacity) {
    edges_[edge].capacity = capacity;
    edges_[edge ^ 1].capacity = 0;
  }
  uint64_t flow(size_t edge) const { return edges_[edge ^ 1].capacity; }

  uint64_t run(size_t source, size_t sink) {
    uint64_t total = 0;
    while (levels_from(source, sink)) {
      std::fill(next_.begin(), next_.end(), size_t{0});
      while (const uint64_t pushed = push(source, sink, kUnbounded)) total += pushed;
    }
    return total;
  }

 private:
  struct Edge {
    size_t to;
    uint64_t capacity;  // residual
  };

  bool levels_from(size_t source, size_t sink) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<size_t> queue;
    level_[source] = 0;
    queue.push(source);
    while (!queue.empty()) {
      const size_t node = queue.front();
      queue.pop();
      for (size_t e : edges_of_[node]) {
        if (edges_[e].capacity > 0 && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[node] + 1;
          queue.push(edges_[e].to);
        }
      }
    }
    return level_[sink] >= 0;
  }

  // Depth at most 3 here (source, group, holder, sink): recursion is shallow.
  uint64_t push(size_t node, size_t sink, uint64_t limit) {
    if (node == sink) return limit;
    for (size_t& i = next_[node]; i < edges_of_[node].size(); ++i) {
      Edge& edge = edges_[edges_of_[node][i]];
      if (edge.capacity == 0 || level_[edge.to] != level_[node] + 1) continue;
      if (const uint64_t pushed = push(edge.to, sink, std::min(limit, edge.capacity))) {
        edge.capacity -= pushed;
        edges_[edges_of_[node][i] ^ 1].capacity += pushed;
        return pushed;
      }
    }
    return 0;
  }

  std::vector<Edge> edges_;
  std::vector<std::vector<size_t>> edges_of_;
  std::vector<int> level_;
  std::vector<size_t> next_;
};

// The flow network of the groups, with the holders' capacities set per bound.
class BalanceNetwork {
 public:
  BalanceNetwork(std::span<const uint64_t> fixed, std::span<const SendGroup> groups)
      : fixed_(fixed), groups_(groups), flow_(2 + groups.size() + fixed.size()) {
    for (size_t g = 0; g < groups.size(); ++g) {
      source_edges_.push_back(flow_.add_edge(kSource, group_node(g), groups[g].bytes));
      total_ = checked_add(total_, groups[g].bytes, "bytes shared by holder processes");
      std::vector<size_t>& edges = share_edges_.emplace_back();
      for (int holder : groups[g].holders) {
        edges.push_back(flow_.add_edge(group_node(g), holder_node(holder), kUnbounded));
        if (sink_edges_.emplace(holder, 0).second) involved_.push_back(holder);
      }
    }
    for (auto& [holder, edge] : sink_edges_) edge = flow_.add_edge(holder_node(holder), kSink, 0);
  }

  // The smallest largest load over the involved holders that can carry everything.
  uint64_t smallest_bound() {
    uint64_t most_fixed = 0;
    uint64_t involved_load = total_;
    for (int holder : involved_) {
      most_fixed = std::max(most_fixed, fixed_[static_cast<size_t>(holder)]);
      involved_load = checked_add(involved_load, fixed_[static_cast<size_t>(holder)], "bytes sent");
    }
    const uint64_t average = involved_load / involved_.size() + (involved_load % involved_.size() != 0);
    uint64_t low = std::max(most_fixed, average);         // no bound below this can work
    uint64_t high = checked_add(most_fixed, total_, "bytes sent");  // this one always does
    while (low < high) {
      const uint64_t mid = low + (high - low) / 2;
      if (carries_all(mid)) {
        high = mid;
      } else {
        low = mid + 1;
      }
    }
    return low;
  }

  std::vector<std::vector<uint64_t>> shares_under(uint64_t bound) {
    carries_all(bound);
    std::vector<std::vector<uint64_t>> shares(groups_.size());
    for (size_t g = 0; g < groups_.size(); ++g) {
      for (size_t edge : share_edges_[g]) shares[g].push_back(flow_.flow(edge));
    }
    return shares;
  }

 private:
  static constexpr size_t kSource = 0;
  static constexpr size_t kSink = 1;
  size_t group_node(size_t g) const { return 2 + g; }
  size_t holder_node(int holder) const { return 2 + groups_.size() + static_cast<size_t>(holder); }

  bool carries_all(uint64_t bound) {
    // Reset every edge: a fresh flow for each bound.
    for (size_t g = 0; g < groups_.size(); ++g) {
      flow_.set_capacity(source_edges_[g], groups_[g].bytes);
      for (size_t edge : share_edges_[g]) flow_.set_capacity(edge, kUnbounded);
    }
    for (const auto& [holder, edge] : sink_edges_) flow_.set_capacity(edge, bound - fixed_[static_cast<size_t>(holder)]);
    return flow_.run(kSource, kSink) == total_;
  }

  std::span<const uint64_t> fixed_;
  std::span<const SendGroup> groups_;
  MaxFlow flow_;
  uint64_t total_ = 0;
  std::vector<size_t> source_edges_;               // by group
  std::vector<std::vector<size_t>> share_edges_;  // by group, then holder
  std::map<int, size_t> sink_edges_;  // holder -> its edge to the sink
  std::vector<int> involved_;
};

}  // namespace

std::vector<std::vector<uint64_t>> balance_sends(std::span<const uint64_t> fixed, std::span<const SendGroup> groups) {
  if (groups.empty()) return {};
  BalanceNetwork network(fixed, groups);
  return network.shares_under(network.smallest_bound());
}

}  // namespace reshard::plan_detail
