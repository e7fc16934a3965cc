// An export's output in an object store: each weight file one parallel upload
// that every process joins, each process filling the parts it owns; rank 0
// completes every upload once all receipts are in, then writes the configs and
// last the index (or the lone weight file's completion is last), so that the
// folder looks complete only once it is. Nothing is staged: a store has no
// rename, and each object appears whole or not at all.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "reshard/formats/safetensors_layout.h"
#include "reshard/storage/part_writer.h"
#include "reshard/storage/store.h"

namespace reshard::pipelines_detail {

using OutputFiles = std::vector<std::pair<std::string, safetensors::FileLayout>>;

class ExportObjects {
 public:
  // Plans each file's parts (of `part_bytes`, or the store's default size).
  // `whole_folder`: the files make up the folder `out`, which must then be
  // empty unless replacing; else they are files in a folder that may hold
  // others (a lone .safetensors output), each refused when there.
  ExportObjects(storage::Location out, const OutputFiles& files, uint64_t part_bytes, bool replace,
                uint32_t parts_in_flight, bool whole_folder = true);
  ExportObjects(const ExportObjects&) = delete;
  ExportObjects& operator=(const ExportObjects&) = delete;
  // Writers first, then the uploads they write to. Unless committed() was
  // called, every upload is aborted, by every process: whichever survives a
  // failure (the creator's too) leaves no part behind.
  ~ExportObjects();

  const std::vector<storage::PartLayout>& part_layouts() const { return layouts_; }
  // How the files are cut into parts in the store of `out` (each process plans the same).
  static std::vector<storage::PartLayout> plan_parts(const storage::Location& out, const OutputFiles& files,
                                                     uint64_t part_bytes);

  // The creator: refuses a folder with objects in it, or (not a whole
  // folder) a file already there (unless replacing),
  // removes uploads a killed writer left for these files, starts every upload.
  // Returns the handles, for the others.
  std::string create();
  // The others: join the uploads from the creator's handles.
  void join(std::string_view handles);
  // Every process: the parts it owns in each file; writes each file's header
  // bytes (they land in part 0, so only its owner keeps them).
  void own(const std::vector<std::vector<uint32_t>>& owned_by_file);

  // Bytes of file `file` at `offset` (the owned parts' share of them is kept).
  void write_at(size_t file, uint64_t offset, std::span<const std::byte> bytes);
  // Waits for this process's uploads; its receipts, as text.
  std::string finish();
  // The creator: completes every upload from every process's receipts text.
  void complete(std::span<const std::string> receipts_by_process);
  // The creator: writes a small object (a config, the index) beside the files.
  void write_small(std::string_view name, std::string_view text);
  // The creator, replacing: removes the objects of the old folder named in
  // `names` that the new one does not have.
  void remove_stale(std::span<const std::string> names);

  uint64_t uploaded_bytes() const;
  // Every process, once all agree that the creator's commit succeeded.
  void committed() { committed_ = true; }

 private:
  bool committed_ = false;
  storage::Location out_;
  std::shared_ptr<storage::Store> store_;
  const OutputFiles& files_;
  bool replace_ = false;
  uint32_t parts_in_flight_ = 4;
  bool whole_folder_ = true;
  std::vector<storage::PartLayout> layouts_;
  std::vector<std::unique_ptr<storage::ParallelUpload>> uploads_;
  std::vector<uint64_t> pending_;  // the uploads' entries in storage's pending uploads
  std::vector<std::unique_ptr<storage::PartWriter>> writers_;  // after uploads_: destroyed first
};

}  // namespace reshard::pipelines_detail
