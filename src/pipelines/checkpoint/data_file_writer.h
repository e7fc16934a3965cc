// A checkpoint data file written front to back by the one process that owns
// it: the header, then each chunk in file order (as SavePlan orders them),
// every write checked to come in that order. The bytes go to a sink: a
// temporary file in the staging folder, or the process's upload of the data
// file's object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "formats/atomic_file.h"
#include "reshard/formats/safetensors_layout.h"

namespace reshard::pipelines_detail {

// Where a data file's bytes go, in order.
class DataFileSink {
 public:
  virtual ~DataFileSink() = default;
  // The file's path or URL, for messages.
  virtual std::string name() const = 0;
  virtual void append(std::span<const std::byte> bytes) = 0;
  // Every byte is appended: makes them durable (a file: fsync and rename
  // into the staging folder; an object: waits for its parts' uploads).
  virtual void finish() = 0;
};

// A data file in the staging folder: a temporary sibling, removed on
// destruction unless finish() renamed it into place.
class LocalDataFile final : public DataFileSink {
 public:
  explicit LocalDataFile(const std::filesystem::path& path) : file_(formats_detail::AtomicFile::create(path)) {}
  std::string name() const override { return file_.final_path().string(); }
  void append(std::span<const std::byte> bytes) override { file_.write(bytes); }
  void finish() override { file_.commit(); }

 private:
  formats_detail::AtomicFile file_;
};

class DataFileWriter {
 public:
  // Writes the header of `layout` into `sink` at once. Both must outlive this writer.
  DataFileWriter(DataFileSink& sink, const safetensors::FileLayout& layout);

  // The next `bytes` of chunk `key`; `last` says they end it.
  void write_part(const std::string& key, std::span<const std::byte> bytes, bool last);

  // Checks every byte is there, then finishes the sink.
  void commit();

 private:
  DataFileSink& sink_;
  const safetensors::FileLayout& layout_;
  uint64_t position_ = 0;
  std::string current_;  // the chunk being written
};

}  // namespace reshard::pipelines_detail
