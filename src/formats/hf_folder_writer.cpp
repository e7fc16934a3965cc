#include "formats/hf_folder_writer.h"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>

#include "formats/atomic_file.h"
#include "formats/staged_folder.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/layout/error.h"

namespace reshard {

namespace fs = std::filesystem;

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

void write_produced_file(const fs::path& path, const safetensors::FileLayout& layout,
                         const TensorProducer& produce) {
  safetensors::StreamWriter writer(path, layout);
  const ByteSink sink = [&writer](std::span<const std::byte> bytes) { writer.write(bytes); };
  for (const safetensors::TensorInfo& tensor : layout.header().tensors()) {
    try {
      produce(tensor, sink);
    } catch (const Error& e) {
      throw e.with_context(fmt::format("writing {}: tensor '{}'", path.string(), tensor.name));
    }
  }
  writer.commit();  // checks every byte arrived
}

void write_hf_folder_files(const fs::path& folder, const HfFolderPlan& plan,
                           const TensorProducer& produce) {
  for (const HfFolderPlan::File& file : plan.files()) {
    write_produced_file(folder / file.name, file.layout, produce);
  }
  if (plan.index()) write_file_atomically(folder / kHfIndexFileName, hf_index_json(*plan.index()));
}

std::vector<std::string> hf_weight_files_in(const fs::path& folder) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const std::string_view fixed : {kHfIndexFileName, kHfSingleFileName}) {
    if (fs::exists(folder / fixed, ec)) found.emplace_back(fixed);
  }
  std::vector<std::string> shards;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_shard_file_name(name)) shards.push_back(name);
  }
  if (ec) throw Error(ErrorCode::kIo, fmt::format("{}: cannot list: {}", folder.string(), ec.message()));
  std::sort(shards.begin(), shards.end());
  found.insert(found.end(), shards.begin(), shards.end());
  return found;
}

void write_hf_folder(const fs::path& folder, const HfFolderPlan& plan, const TensorProducer& produce,
                     bool replace) {
  StagedFolder staged(folder, replace);
  write_hf_folder_files(staged.staging_path(), plan, produce);
  std::vector<std::string> order;
  for (const HfFolderPlan::File& file : plan.files()) order.push_back(file.name);
  if (plan.index()) order.emplace_back(kHfIndexFileName);  // last: it makes the folder look complete
  std::vector<std::string> stale;
  if (fs::is_directory(staged.final_path())) stale = hf_weight_files_in(staged.final_path());
  staged.commit(stale, order);
}

}  // namespace reshard
