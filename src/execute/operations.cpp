#include "reshard/execute/operations.h"

#include <fmt/format.h>

#include "host_layout.h"
#include "parallel_copy.h"
#include "reshard/layout/checked.h"
#include "reshard/layout/error.h"
#include "reshard/plan/plan_cache.h"

namespace reshard {
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

// Moves `src` (in `layout`'s topology) to a fresh array laid out by `target`.
ShardedArray move_to(const ShardedArray& src, const NamedSharding& target, Transport& transport,
                     const ExecuteOptions& options) {
  const auto plan = plan_for(src.shape(), src.dtype(), src.sharding(), target, src.topology());
  ShardedArray dst = ShardedArray::allocate(src.shape(), src.dtype(), target, src.topology(), src.process());
  execute(*plan, src, dst, transport, options);
  return dst;
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
  const ShardedArray src = host_source(host, holder, hosts, transport.rank());
  return move_to(src, target, transport, options).in_topology(topology);
}

}  // namespace

ShardedArray reshard_array(const ShardedArray& array, const NamedSharding& target, Transport& transport,
                     const ExecuteOptions& options) {
  if (target == array.sharding()) return array;
  return collective(transport, [&] { return move_to(array, target, transport, options); });
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
  if (array.sharding().memory_kind() == kind) return array;
  ShardedArray moved = ShardedArray::allocate(array.shape(), array.dtype(), array.sharding().with_memory_kind(kind),
                                              array.topology(), array.process());
  std::vector<CopyJob> jobs;
  for (size_t i = 0; i < array.shards().size(); ++i) {
    const Shard& from = array.shards()[i];
    Shard& to = moved.mutable_shards()[i];
    jobs.push_back(CopyJob{BoxCopy(from.box, from.box, to.box, array.element_bytes()), from.buffer.data(),
                           to.buffer.data()});
  }
  run_copies(jobs, options.copy_threads());
  return moved;
}

}  // namespace reshard
