// The folder an export writes: its files planned identically on every
// process, created (with headers) by one, written at final offsets by any,
// committed by the one that created them together with the index and configs.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "formats/hf_folder_plan.h"
#include "pipelines/export/export_objects.h"
#include "pipelines/export/export_plan.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/storage/location.h"
#include "storage/local/staged_folder.h"

namespace reshard::pipelines_detail {

// The files an export writes: one adapter_model.safetensors, or a Hugging
// Face folder split at `max_shard_size`; metadata {"format": "pt"}.
OutputFiles plan_output_files(const ExportPlan& plan, uint64_t max_shard_size);

class ExportOutput {
 public:
  // Plans the files: a Hugging Face folder split at `max_shard_size`, or for
  // an adapter one adapter_model.safetensors; metadata {"format": "pt"}. An
  // output in an object store is uploaded in parts of `part_bytes` (0: the
  // store's default), `parts_in_flight` at once per process.
  ExportOutput(storage::Location out, const ExportPlan& plan, uint64_t max_shard_size, bool replace,
               uint64_t part_bytes = 0, uint32_t parts_in_flight = 4);

  // The creator: makes the staging folder and every file with its header (an
  // object store: starts every upload). Returns what the participants join:
  // the staging folder's path, or the uploads' handles.
  std::string create();
  // A participant: opens the files the creator made (joins its uploads).
  void join(const std::string& created);

  // Writes `bytes` (dense row-major over `box`) into tensor `name`.
  void write(const std::string& name, const Box& box, std::span<const std::byte> bytes) const;
  // Flushes this process's writes to storage.
  void sync() const;
  // The creator, once every process has synced: commits the files, writes
  // the index and configs, and puts the folder in place.
  void commit();

  size_t files() const { return files_.size(); }
  const OutputFiles& file_layouts() const { return files_; }
  // The file holding tensor `name`.
  size_t file_of(const std::string& name) const { return file_of_tensor_.at(name); }
  // The output's objects, when it is in an object store (nullptr for a local folder).
  ExportObjects* objects() { return objects_.get(); }
  const ExportObjects* objects() const { return objects_.get(); }

 private:
  void commit_objects();

  storage::Location out_;
  const ExportPlan& plan_;
  bool replace_ = false;
  std::optional<formats_detail::HfFolderPlan> folder_plan_;
  OutputFiles files_;
  std::unordered_map<std::string, size_t> file_of_tensor_;
  std::optional<storage_detail::StagedFolder> staged_;
  std::vector<safetensors::PositionalWriter> writers_;
  std::unique_ptr<ExportObjects> objects_;

 public:
  // Objects: every process's receipts (ExportObjects::finish), for commit().
  std::vector<std::string> receipts;
};

}  // namespace reshard::pipelines_detail
