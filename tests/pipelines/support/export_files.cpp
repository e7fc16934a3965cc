#include "pipelines/support/export_files.h"

#include <fstream>
#include <sstream>

#include "execute/support/rank_threads.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/pipelines/checkpoint_save.h"

namespace reshard::testing {

LoraConfig levanter_lora_config() {
  LoraConfig config;
  config.r = 2;
  config.lora_alpha = 4;
  config.base_model_name_or_path = "test/llama";
  return config;
}

namespace fs = std::filesystem;

void save_levanter_checkpoint(const std::vector<FrameworkTensor>& model, const fs::path& path,
                              std::optional<safetensors::Metadata> metadata) {
  run_ranks(2, [&](Transport& transport) {
    const std::vector<NamedArray> arrays = levanter_arrays(model, transport.rank());
    SaveOptions options;
    options.metadata = metadata;
    options.replace = true;  // a test may save its fixture's checkpoint again, with other tensors
    save_checkpoint(arrays, path, transport, options);
  });
}

std::map<std::string, WrittenTensor> read_folder_tensors(const fs::path& folder) {
  const HfFolder hf = HfFolder::open(folder);
  std::map<std::string, WrittenTensor> out;
  for (const TensorCatalog::Entry& entry : hf.catalog.tensors()) {
    WrittenTensor& t = out[entry.info->name];
    t.dtype = entry.info->dtype;
    for (const uint64_t d : entry.info->shape) t.shape.push_back(static_cast<int64_t>(d));
    t.bytes.resize(static_cast<size_t>(entry.info->byte_size()));
    hf.catalog.file_of(entry).read(*entry.info, t.bytes);
  }
  return out;
}

std::map<std::string, std::string> read_folder_files(const fs::path& folder) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::directory_iterator(folder)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    out[entry.path().filename().string()] = text.str();
  }
  return out;
}

}  // namespace reshard::testing
