// `reshard convert SRC DST`: between a .safetensors file and a Hugging Face folder,
// tensor by tensor, optionally casting floats, the output appearing only when complete.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/job.h"
#include "cli/progress.h"
#include "reshard/formats/hf_folder_plan.h"
#include "reshard/formats/hf_folder_writer.h"
#include "reshard/formats/hf_split.h"
#include "reshard/formats/model_files.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/layout/checked.h"
#include "reshard/layout/error.h"
#include "reshard/layout/parse.h"

namespace reshard::cli {
namespace {

namespace fs = std::filesystem;

struct ConvertOptions {
  std::string src;
  std::string dst;
  std::string max_shard_size = "5GB";
  std::string dtype;
  bool force = false;
  bool max_shard_size_given = false;
};

// A destination named *.safetensors (and not an existing folder) is one file;
// anything else is a Hugging Face folder.
bool writes_single_file(const fs::path& dst) {
  std::error_code ec;
  return dst.extension() == ".safetensors" && !fs::is_directory(dst, ec);
}

std::optional<DType> parse_target_dtype(const std::string& text) {
  if (text.empty()) return std::nullopt;
  const DType dtype = dtype_from_string(text);
  if (!is_castable_float(dtype)) {
    throw Error(ErrorCode::kParse, fmt::format("--dtype {}: must be f32, f16 or bf16", text));
  }
  return dtype;
}

// The source's metadata, with "format": "pt" put first when it has none:
// transformers refuses a file whose metadata lacks a known format.
safetensors::Metadata output_metadata(const TensorCatalog& catalog) {
  safetensors::Metadata metadata = catalog.metadata().value_or(safetensors::Metadata{});
  const bool has_format = std::any_of(metadata.begin(), metadata.end(),
                                      [](const auto& entry) { return entry.first == "format"; });
  if (!has_format) metadata.insert(metadata.begin(), {"format", "pt"});
  return metadata;
}

// Every tensor in source order (file by file, data order within): the order
// the folder is split in, standing in for transformers' state dict order.
std::vector<safetensors::TensorSpec> output_specs(const TensorCatalog& catalog, std::optional<DType> target) {
  std::vector<safetensors::TensorSpec> specs;
  specs.reserve(catalog.tensors().size());
  for (const TensorCatalog::Entry& entry : catalog.tensors()) {
    specs.push_back({entry.info->name, cast_dtype(entry.info->dtype, target), entry.info->shape});
  }
  return specs;
}

uint64_t output_bytes(const std::vector<safetensors::TensorSpec>& specs) {
  uint64_t total = 0;
  for (const safetensors::TensorSpec& spec : specs) {
    const auto elements = static_cast<uint64_t>(checked_product(spec.shape, spec.name));
    total = checked_add(total, dtype_byte_size(spec.dtype, elements), "output size");
  }
  return total;
}

void refuse_existing_file(const fs::path& dst, bool force) {
  std::error_code ec;
  if (!fs::exists(dst, ec)) return;
  if (!force) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: already exists (use --force to replace it)", dst.string()));
  }
  if (!fs::is_regular_file(dst, ec)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: exists and is not a file", dst.string()));
  }
}

void convert(const ConvertOptions& options) {
  const std::optional<DType> target = parse_target_dtype(options.dtype);
  const uint64_t max_shard_size = parse_byte_size(options.max_shard_size);
  const fs::path dst(options.dst);
  const bool single_file = writes_single_file(dst);
  if (single_file && options.max_shard_size_given) {
    throw Error(ErrorCode::kParse, "--max-shard-size: the destination is a single .safetensors file");
  }

  const ModelFiles model = open_model_files(options.src);
  if (model.format == ModelFormat::kPeft) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("{}: converting PEFT adapter folders is not supported", options.src));
  }
  const TensorCatalog& catalog = model.catalog;
  const std::vector<safetensors::TensorSpec> specs = output_specs(catalog, target);
  const safetensors::Metadata metadata = output_metadata(catalog);

  Progress progress("converting", output_bytes(specs));
  const TensorProducer produce = [&](const safetensors::TensorInfo& out, const ByteSink& sink) {
    const TensorCatalog::Entry* entry = catalog.find(out.name);
    stream_tensor(catalog.file_of(*entry), *entry->info, out.dtype, [&](std::span<const std::byte> bytes) {
      sink(bytes);
      progress.advance(bytes.size());
    });
  };

  size_t files = 1;
  if (single_file) {
    refuse_existing_file(dst, options.force);
    write_produced_file(dst, safetensors::FileLayout::plan(specs, metadata), produce);
  } else {
    const HfFolderPlan plan = HfFolderPlan::plan(specs, max_shard_size, metadata);
    write_hf_folder(dst, plan, produce, options.force);
    files = plan.files().size();
  }
  progress.finish();
  std::cout << fmt::format("wrote {}: {} ({} file{}, {} tensors, {} bytes of tensor data)\n", dst.string(),
                           single_file ? "safetensors file" : "Hugging Face folder", files, files == 1 ? "" : "s",
                           specs.size(), output_bytes(specs));
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "convert",
      "Convert between a .safetensors file and a Hugging Face model folder (either way, or file to file,\n"
      "folder to folder). A DST ending in .safetensors is written as one file; any other DST is a folder\n"
      "split as transformers' save_pretrained splits (files model-0000i-of-0000N.safetensors and\n"
      "model.safetensors.index.json, or one model.safetensors when everything fits). Tensors are split in\n"
      "source order: file by file, and within a file in the order of their bytes. The output appears\n"
      "only when complete; an existing DST is refused unless --force.\n"
      "Examples:\n"
      "  reshard convert model.safetensors llama-hf/ --max-shard-size 2GB\n"
      "  reshard convert llama-hf/ llama-bf16.safetensors --dtype bf16");
  auto options = std::make_shared<ConvertOptions>();
  cmd->add_option("SRC", options->src, "A .safetensors file or a Hugging Face model folder")->required();
  cmd->add_option("DST", options->dst, "A .safetensors file or a folder to create")->required();
  auto* max_shard = cmd->add_option("--max-shard-size", options->max_shard_size,
                                    "Largest file of a folder (5GB, 500MB, 1.5GiB or bytes); a larger tensor "
                                    "gets a file of its own")
                        ->capture_default_str();
  cmd->add_option("--dtype", options->dtype,
                  "Cast F32/F16/BF16 tensors to f32, f16 or bf16 (round to nearest even); integer, bool and "
                  "other tensors are copied unchanged");
  cmd->add_flag("--force", options->force,
                "Replace an existing DST: a file is replaced whole; in a folder, only the weight files "
                "(model*.safetensors and the index) are replaced, other files stay");
  add_timeout_option(*cmd);
  cmd->callback([options, max_shard] {
    options->max_shard_size_given = max_shard->count() > 0;
    convert(*options);
  });
}

}  // namespace reshard::cli
