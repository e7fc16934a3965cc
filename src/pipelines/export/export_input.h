// Where an export's source bytes come from: a checkpoint's chunks, or the
// shards of arrays in memory. The block producer sees only this.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/box.h"

namespace reshard::pipelines_detail {

class ExportInput {
 public:
  virtual ~ExportInput() = default;
  // The source tensors, as the map is resolved against them.
  virtual const std::vector<safetensors::TensorSpec>& specs() const = 0;
  // Whether process `process` can read `box` of source `source` here.
  virtual bool readable_by(int process, size_t source, const Box& box) const = 0;
  // Reads `box` (source coordinates) of source `source` into `out`, dense
  // and row-major in the box, in the source's dtype.
  virtual void read(size_t source, const Box& box, std::span<std::byte> out) const = 0;
};

}  // namespace reshard::pipelines_detail
