// The public operations: reshard (one array or many), to and from host, change of memory kind.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "reshard/execute/executor.h"
#include "reshard/execute/host_array.h"
#include "reshard/execute/sharded_array.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/sharding.h"

namespace reshard {

// Every operation taking a transport is collective: each process of the job
// calls it with the same arguments (its own array), and a failure on one
// process makes the others fail too rather than wait. Plans come from
// default_plan_cache(), so repeated moves between the same layouts plan once.

// The same array laid out by `target` (any mesh, device order, device set or
// memory kind within the array's topology). When `target` equals the array's
// sharding nothing moves: the result shares the array's buffers, read-only
// (ShardedArray::read_only_alias), so writing into it cannot reach the array.
ShardedArray reshard_array(const ShardedArray& array, const NamedSharding& target, Transport& transport,
                     const ExecuteOptions& options = {});

// Many arrays in one operation (a whole model): result i is arrays[i] laid out
// by targets[i], as reshard_array would give it, but the pieces of all arrays
// travel together between each pair of processes, in the same bounded
// messages, and the processes check agreement once for the batch. Throws
// Error(kInvalidArgument) unless there are as many targets as arrays.
std::vector<ShardedArray> reshard_arrays(std::span<const ShardedArray> arrays, std::span<const NamedSharding> targets,
                                         Transport& transport, const ExecuteOptions& options = {});

// Like reshard_array, into `target`'s already allocated shards (reusing buffers).
ExecuteStats reshard_into(const ShardedArray& array, ShardedArray& target, Transport& transport,
                          const ExecuteOptions& options = {});

// The whole array on every process's host. Each process receives only the
// elements its own devices do not hold, each once.
HostArray to_host(const ShardedArray& array, Transport& transport, const ExecuteOptions& options = {});

// Every array whole on every process's host, in one operation.
std::vector<HostArray> to_host(std::span<const ShardedArray> arrays, Transport& transport,
                               const ExecuteOptions& options = {});

// The whole array on process `root`'s host only; nullopt on the others, which
// send root just the elements it lacks and receive nothing.
std::optional<HostArray> to_host(const ShardedArray& array, Transport& transport, int root,
                                 const ExecuteOptions& options = {});

// `host` (the whole array, present on every process) placed with `target`:
// each process copies out only its own shards; nothing is sent.
ShardedArray from_host(const HostView& host, const NamedSharding& target, const Topology& topology,
                       Transport& transport, const ExecuteOptions& options = {});

// `host` present on process `root` only (the others pass the same shape and
// dtype with no bytes): root sends each process just its shards' elements.
ShardedArray from_host(const HostView& host, int root, const NamedSharding& target, const Topology& topology,
                       Transport& transport, const ExecuteOptions& options = {});

// The array with each shard copied into `kind` memory of the same device:
// same mesh, same spec, no communication. Returns `array` when already there.
ShardedArray change_memory_kind(const ShardedArray& array, MemoryKind kind, const ExecuteOptions& options = {});

}  // namespace reshard
