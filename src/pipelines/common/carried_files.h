// The non-weight files of a Hugging Face model folder that travel with its
// weights when reshard writes a folder from it (config.json,
// generation_config.json, the tokenizer's files, chat templates, ...), as a
// folder saved with save_pretrained beside its tokenizer holds them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/layout/dtype.h"
#include "reshard/storage/location.h"

namespace reshard::pipelines_detail {

inline constexpr std::string_view kConfigFileName = "config.json";
inline constexpr std::string_view kGenerationConfigFileName = "generation_config.json";

// Files larger than this are not carried: they are weights in another format
// or data, not the small files a model's users load beside its weights.
inline constexpr uint64_t kMaxCarriedFileBytes = uint64_t{64} << 20;

// Whether `name`, a file in a model folder, is carried: not hidden, not a
// weight or index file (*.safetensors, *.bin, *.pt, *.pth, *.ckpt, *.h5,
// *.msgpack, *.gguf, *.onnx, *.index.json), not a PEFT adapter's file.
bool is_carried_file_name(const std::string& name);

// Copies the carried files at the top of `folder` (a local folder or a
// prefix of objects; none when it is neither) into the folder `into` (local
// or objects), each appearing whole, config.json with its dtype keys set to
// `dtype` when given; returns their names, sorted. Error(kIo) naming a file
// that cannot be read or written, Error(kInvalidConfig) for a config.json
// that is not JSON when a cast must rewrite it.
std::vector<std::string> carry_model_files(const storage::Location& folder, const storage::Location& into,
                                           std::optional<DType> dtype);

}  // namespace reshard::pipelines_detail
