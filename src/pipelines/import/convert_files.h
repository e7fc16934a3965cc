// A conversion's .safetensors file or Hugging Face folder, written by every
// process of the job, local or in an object store.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "pipelines/import/convert_source.h"
#include "reshard/execute/transport.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/pipelines/convert.h"
#include "reshard/storage/location.h"

namespace reshard::pipelines_detail {

// The output's tensors: the source's names and shapes, floats cast to `target`.
std::vector<safetensors::TensorSpec> output_specs(const ConvertSource& source, std::optional<DType> target);
// Their bytes in all.
uint64_t total_bytes(const std::vector<safetensors::TensorSpec>& specs);

// Collective: writes `source` (read from `src`) as the file or folder `dst`
// (options.output: kSafetensorsFile or kHfFolder), as convert_model says.
ConvertResult convert_to_files(const storage::Location& src, const storage::Location& dst,
                               const ConvertOptions& options, const ConvertSource& source, Transport& transport);

}  // namespace reshard::pipelines_detail
