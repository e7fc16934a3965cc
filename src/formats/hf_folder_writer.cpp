#include "formats/hf_folder_writer.h"

#include <algorithm>

#include <fmt/format.h>

#include "reshard/formats/hf_index.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/layout/error.h"

namespace reshard::formats_detail {

namespace {

bool is_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "model-NNNNN-of-NNNNN.safetensors" (five digits or more each), as transformers names shards.
bool is_shard_file_name(std::string_view name) {
  constexpr std::string_view kPrefix = "model-", kMiddle = "-of-", kSuffix = ".safetensors";
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return false;
  name = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  const size_t middle = name.find(kMiddle);
  if (middle == std::string_view::npos) return false;
  const std::string_view index = name.substr(0, middle), count = name.substr(middle + kMiddle.size());
  return index.size() >= 5 && count.size() >= 5 && is_digits(index) && is_digits(count);
}

}  // namespace

void write_produced_file(const storage::Location& where, const safetensors::FileLayout& layout,
                         const TensorProducer& produce, const storage::UploadOptions& upload) {
  safetensors::StreamWriter writer(where, layout, safetensors::StreamWriter::kDefaultBufferBytes, upload);
  const ByteSink sink = [&writer](std::span<const std::byte> bytes) { writer.write(bytes); };
  for (const safetensors::TensorInfo& tensor : layout.header().tensors()) {
    try {
      produce(tensor, sink);
    } catch (const Error& e) {
      throw e.with_context(fmt::format("writing {}: tensor '{}'", where.str(), tensor.name));
    }
  }
  writer.commit();  // checks every byte arrived
}

void write_hf_weight_files(const OutputFolder& out, const HfFolderPlan& plan, const TensorProducer& produce,
                           const storage::UploadOptions& upload) {
  for (const HfFolderPlan::File& file : plan.files()) write_produced_file(out.file(file.name), file.layout, produce, upload);
}

void write_hf_index(const OutputFolder& out, const HfFolderPlan& plan) {
  if (plan.index()) out.write_small(kHfIndexFileName, hf_index_json(*plan.index()));
}

std::vector<std::string> hf_folder_file_names(const HfFolderPlan& plan) {
  std::vector<std::string> names;
  for (const HfFolderPlan::File& file : plan.files()) names.push_back(file.name);
  if (plan.index()) names.emplace_back(kHfIndexFileName);  // last: it makes the folder look complete
  return names;
}

std::vector<std::string> hf_weight_files_among(std::span<const std::string> names) {
  std::vector<std::string> found;
  for (const std::string_view fixed : {kHfIndexFileName, kHfSingleFileName}) {
    if (std::find(names.begin(), names.end(), fixed) != names.end()) found.emplace_back(fixed);
  }
  std::vector<std::string> shards;
  for (const std::string& name : names) {
    if (is_shard_file_name(name)) shards.push_back(name);
  }
  std::sort(shards.begin(), shards.end());
  found.insert(found.end(), shards.begin(), shards.end());
  return found;
}

std::vector<std::string> hf_weight_files_in(const storage::Location& folder) {
  return hf_weight_files_among(top_level_files(folder));
}

void write_hf_folder(const storage::Location& folder, const HfFolderPlan& plan, const TensorProducer& produce,
                     bool replace, const storage::UploadOptions& upload) {
  OutputFolder out(folder, replace);
  const std::vector<std::string> stale = hf_weight_files_among(out.files_before());
  write_hf_weight_files(out, plan, produce, upload);
  write_hf_index(out, plan);
  out.commit(stale, hf_folder_file_names(plan));
}

}  // namespace reshard::formats_detail
