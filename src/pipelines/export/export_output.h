// The folder an export writes: its files planned identically on every
// process, created (with headers) by one, written at final offsets by any,
// committed by the one that created them together with the index and configs.
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "formats/hf_folder_plan.h"
#include "formats/staged_folder.h"
#include "pipelines/export/export_plan.h"
#include "reshard/formats/safetensors_writer.h"

namespace reshard::pipelines_detail {

class ExportOutput {
 public:
  // Plans the files: a Hugging Face folder split at `max_shard_size`, or for
  // an adapter one adapter_model.safetensors; metadata {"format": "pt"}.
  ExportOutput(std::filesystem::path out, const ExportPlan& plan, uint64_t max_shard_size, bool replace);

  // The creator: makes the staging folder and every file with its header.
  // Returns the staging folder's path, for the participants.
  std::filesystem::path create();
  // A participant: opens the files the creator made in `staging`.
  void join(const std::filesystem::path& staging);

  // Writes `bytes` (dense row-major over `box`) into tensor `name`.
  void write(const std::string& name, const Box& box, std::span<const std::byte> bytes) const;
  // Flushes this process's writes to storage.
  void sync() const;
  // The creator, once every process has synced: commits the files, writes
  // the index and configs, and puts the folder in place.
  void commit();

  size_t files() const { return files_.size(); }

 private:
  std::filesystem::path out_;
  const ExportPlan& plan_;
  bool replace_ = false;
  std::optional<HfFolderPlan> folder_plan_;
  std::vector<std::pair<std::string, safetensors::FileLayout>> files_;
  std::unordered_map<std::string, size_t> file_of_tensor_;
  std::optional<StagedFolder> staged_;
  std::vector<safetensors::PositionalWriter> writers_;
};

}  // namespace reshard::pipelines_detail
