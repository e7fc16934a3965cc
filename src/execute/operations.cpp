#include "reshard/execute/operations.h"

#include <fmt/format.h>

#include "execute_moves.h"
#include "host_layout.h"
#include "layout/checked.h"
#include "parallel_copy.h"
#include "reshard/layout/error.h"
#include "reshard/plan/plan_cache.h"

namespace reshard {

using execute_detail::ArrayMove;
using execute_detail::CopyJob;
using execute_detail::execute_moves;
using execute_detail::HostLayout;
using execute_detail::run_copies;
using layout_detail::BoxCopy;
using layout_detail::checked_mul;
using layout_detail::checked_product;

namespace {

// Runs one process's part of a collective operation; on failure, tells the
// others (so they stop instead of waiting) and rethrows.
template <typename Body>
auto collective(Transport& transport, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    transport.abort(e.what());
    throw;
  }
}

std::shared_ptr<const Plan> plan_for(const Shape& shape, DType dtype, const NamedSharding& src,
                                     const NamedSharding& dst, const Topology& topology) {
  return default_plan_cache().get(PlanKey{shape, dtype, src, dst, topology});
}

// Moves every src[i] to a fresh array laid out by targets[i], as one operation.
std::vector<ShardedArray> move_all_to(std::span<const ShardedArray> src, std::span<const NamedSharding> targets,
                                      Transport& transport, const ExecuteOptions& options) {
  std::vector<PlanKey> keys;
  std::vector<ShardedArray> dst;
  keys.reserve(src.size());
  dst.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    keys.push_back(PlanKey{src[i].shape(), src[i].dtype(), src[i].sharding(), targets[i], src[i].topology()});
    dst.push_back(ShardedArray::allocate(src[i].shape(), src[i].dtype(), targets[i], src[i].topology(),
                                         src[i].process()));
  }
  // One batch: the senders' load is balanced over all its arrays.
  const auto plans = default_plan_cache().get_batch(keys);
  std::vector<ArrayMove> moves;
  moves.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) moves.push_back(ArrayMove{&(*plans)[i], &src[i], &dst[i]});
  execute_moves(moves, transport, options);
  return dst;
}

// Moves `src` to a fresh array laid out by `target`.
ShardedArray move_to(const ShardedArray& src, const NamedSharding& target, Transport& transport,
                     const ExecuteOptions& options) {
  return std::move(move_all_to(std::span<const ShardedArray>(&src, 1), std::span<const NamedSharding>(&target, 1),
                               transport, options)
                       .front());
}

void check_batch(size_t arrays, size_t targets) {
  if (arrays != targets) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("reshard_arrays was given {} arrays but {} target layouts", arrays, targets));
  }
}

void check_root(int root, const Topology& topology) {
  if (root < 0 || root >= topology.num_processes()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("root process {} is not one of the job's {} processes", root, topology.num_processes()));
  }
}

void check_host_bytes(const HostView& host) {
  const uint64_t expected = checked_mul(static_cast<uint64_t>(checked_product(host.shape, "host array elements")),
                                        whole_element_bytes(host.dtype), "host array bytes");
  if (host.bytes.size() != expected) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("the host array has {} bytes but its shape and dtype {} need {}", host.bytes.size(),
                            dtype_name(host.dtype), expected));
  }
}

HostArray host_array_of(const ShardedArray& on_host) {
  return HostArray{on_host.shape(), on_host.dtype(), on_host.shards().front().buffer};
}

// `host`, held by `holder`'s host device (the one of this process, if any).
ShardedArray host_source(const HostView& host, const NamedSharding& holder, const HostLayout& hosts,
                         int process) {
  std::vector<Shard> shards;
  for (DeviceId device : holder.mesh().devices()) {
    if (device != hosts.host_device(process)) continue;
    check_host_bytes(host);
    shards.push_back(Shard{device, Box::whole(host.shape), Buffer::borrow(host.bytes)});
  }
  return ShardedArray(host.shape, host.dtype, holder, hosts.topology(), process, std::move(shards));
}

ShardedArray place_from_host(const HostView& host, const NamedSharding& holder, const HostLayout& hosts,
                             const NamedSharding& target, const Topology& topology, Transport& transport,
                             const ExecuteOptions& options) {
  // Checked against the caller's topology: the move runs in one with a host device added per process.
  topology.check_contains(target.mesh().devices(), "the mesh");
  const ShardedArray src = host_source(host, holder, hosts, transport.rank());
  return move_to(src, target, transport, options).in_topology(topology);
}

}  // namespace

ShardedArray reshard_array(const ShardedArray& array, const NamedSharding& target, Transport& transport,
                     const ExecuteOptions& options) {
  if (target == array.sharding()) return array.read_only_alias();
  return collective(transport, [&] { return move_to(array, target, transport, options); });
}

std::vector<ShardedArray> reshard_arrays(std::span<const ShardedArray> arrays, std::span<const NamedSharding> targets,
                                         Transport& transport, const ExecuteOptions& options) {
  return collective(transport, [&] {
    check_batch(arrays.size(), targets.size());
    // Arrays already in their target layout are returned as they are; the
    // rest move together.
    std::vector<ShardedArray> moving;
    std::vector<NamedSharding> moving_targets;
    for (size_t i = 0; i < arrays.size(); ++i) {
      if (targets[i] == arrays[i].sharding()) continue;
      moving.push_back(arrays[i]);
      moving_targets.push_back(targets[i]);
    }
    std::vector<ShardedArray> moved = move_all_to(moving, moving_targets, transport, options);
    std::vector<ShardedArray> out;
    out.reserve(arrays.size());
    size_t next = 0;
    for (size_t i = 0; i < arrays.size(); ++i) {
      out.push_back(targets[i] == arrays[i].sharding() ? arrays[i].read_only_alias() : std::move(moved[next++]));
    }
    return out;
  });
}

ExecuteStats reshard_into(const ShardedArray& array, ShardedArray& target, Transport& transport,
                          const ExecuteOptions& options) {
  return collective(transport, [&] {
    const auto plan = plan_for(array.shape(), array.dtype(), array.sharding(), target.sharding(), array.topology());
    return execute(*plan, array, target, transport, options);
  });
}

HostArray to_host(const ShardedArray& array, Transport& transport, const ExecuteOptions& options) {
  return collective(transport, [&] {
    const HostLayout hosts(array.topology());
    return host_array_of(move_to(array.in_topology(hosts.topology()), hosts.on_every_host(), transport, options));
  });
}

std::vector<HostArray> to_host(std::span<const ShardedArray> arrays, Transport& transport,
                               const ExecuteOptions& options) {
  return collective(transport, [&] {
    std::vector<ShardedArray> on_hosts;
    std::vector<NamedSharding> targets;
    for (const ShardedArray& array : arrays) {
      const HostLayout hosts(array.topology());
      on_hosts.push_back(array.in_topology(hosts.topology()));
      targets.push_back(hosts.on_every_host());
    }
    std::vector<HostArray> out;
    for (const ShardedArray& moved : move_all_to(on_hosts, targets, transport, options)) {
      out.push_back(host_array_of(moved));
    }
    return out;
  });
}

std::optional<HostArray> to_host(const ShardedArray& array, Transport& transport, int root,
                                 const ExecuteOptions& options) {
  check_root(root, array.topology());
  return collective(transport, [&]() -> std::optional<HostArray> {
    const HostLayout hosts(array.topology());
    const ShardedArray on_host = move_to(array.in_topology(hosts.topology()), hosts.on_host(root), transport, options);
    if (on_host.shards().empty()) return std::nullopt;
    return host_array_of(on_host);
  });
}

ShardedArray from_host(const HostView& host, const NamedSharding& target, const Topology& topology,
                       Transport& transport, const ExecuteOptions& options) {
  return collective(transport, [&] {
    const HostLayout hosts(topology);
    return place_from_host(host, hosts.on_every_host(), hosts, target, topology, transport, options);
  });
}

ShardedArray from_host(const HostView& host, int root, const NamedSharding& target, const Topology& topology,
                       Transport& transport, const ExecuteOptions& options) {
  check_root(root, topology);
  return collective(transport, [&] {
    const HostLayout hosts(topology);
    return place_from_host(host, hosts.on_host(root), hosts, target, topology, transport, options);
  });
}

ShardedArray change_memory_kind(const ShardedArray& array, MemoryKind kind, const ExecuteOptions& options) {
  if (array.sharding().memory_kind() == kind) return array.read_only_alias();
  ShardedArray moved = ShardedArray::allocate(array.shape(), array.dtype(), array.sharding().with_memory_kind(kind),
                                              array.topology(), array.process());
  std::vector<CopyJob> jobs;
  for (size_t i = 0; i < array.shards().size(); ++i) {
    const Shard& from = array.shards()[i];
    jobs.push_back(CopyJob{BoxCopy(from.box, from.box, moved.shards()[i].box, array.element_bytes()),
                           from.buffer.data(), moved.writable_bytes(i).data()});
  }
  run_copies(jobs, options.copy_threads());
  return moved;
}

}  // namespace reshard
