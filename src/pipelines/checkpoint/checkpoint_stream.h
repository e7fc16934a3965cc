// Saving a checkpoint whose chunk bytes are produced piece by piece (read from
// files, say) rather than held in arrays: staged under a memory budget while a
// background thread writes what is staged.
#pragma once

#include <functional>
#include <span>

#include "pipelines/checkpoint/save_plan.h"
#include "reshard/execute/transport.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "reshard/storage/location.h"

namespace reshard::pipelines_detail {

// Fills `out` with the bytes of `piece` (a box inside `chunk.box`, dense and
// row-major) of a chunk this process writes. Called in file order.
using ChunkFill = std::function<void(const PlannedChunk& chunk, const Box& piece, std::span<std::byte> out)>;

// Collective, like save_checkpoint, for `tensors` (the same on every
// process). At most `options.staging_bytes` of filled pieces exist at once
// (a single element larger than that is a piece of its own); a piece is
// written while the next ones are filled. A failure of `fill` fails the save
// on every process. Returns when the save is committed or failed.
SaveResult save_checkpoint_streamed(const storage::Location& path, std::span<const SaveTensor> tensors,
                                   Transport& transport, const SaveOptions& options, const ChunkFill& fill);

}  // namespace reshard::pipelines_detail
