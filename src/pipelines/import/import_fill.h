// Building one process's slices of an imported tensor straight from the
// mapped Hugging Face bytes (objects: each piece's byte ranges, read into a
// buffer of its own): each distinct slice once, by strided copies that apply
// the map's transforms (and the cast) as they read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "pipelines/import/import_plan.h"
#include "pipelines/import/import_source.h"
#include "reshard/execute/sharded_array.h"
#include "reshard/layout/topology.h"

namespace reshard::pipelines_detail {

struct FillStats {
  uint64_t bytes_read = 0;  // source bytes the copies read: each distinct slice's elements, in the source dtype
  uint64_t bytes_made = 0;  // bytes of the distinct slices built (a slice copied to another device counts once)
};

// Output `output` of `plan` as `process`'s part of it: its devices' shards
// allocated, a slice held by several of them built once and copied to the
// others. `progress` (if set) gets each distinct slice's bytes. Errors name
// the tensor and the slice.
ShardedArray fill_import_tensor(const ImportPlan& plan, size_t output, const ImportSource& source,
                                const Topology& topology, int process, FillStats& stats,
                                const std::function<void(uint64_t)>& progress);

// Every output of `plan`, in order, as fill_import_tensor builds each. Mapped
// files are copied from one tensor after another (memory bandwidth is the
// bound); objects are fetched for `tensors_in_flight` tensors at once, since
// each slice's ranged reads wait on the store more than on the copy. After a
// failure no new tensor starts, and the first error is thrown once every fill
// in flight has ended; `progress` is called from one thread at a time.
std::vector<ShardedArray> fill_import_tensors(const ImportPlan& plan, const ImportSource& source,
                                              const Topology& topology, int process, size_t tensors_in_flight,
                                              FillStats& stats, const std::function<void(uint64_t)>& progress);

}  // namespace reshard::pipelines_detail
