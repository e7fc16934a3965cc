// The three inputs of an export: a checkpoint folder (every process reads the
// chunk byte ranges it needs), sharded arrays in memory (a process reads its
// own shards, or a whole array brought to it first), and a caller's reading
// function (every process reads any box through it).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "pipelines/export/export_input.h"
#include "reshard/execute/host_array.h"
#include "reshard/execute/transport.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/pipelines/export_model.h"
#include "reshard/pipelines/named_array.h"

namespace reshard::pipelines_detail {

class CheckpointInput final : public ExportInput {
 public:
  explicit CheckpointInput(checkpoint::Reader reader);
  const std::vector<safetensors::TensorSpec>& specs() const override { return specs_; }
  bool readable_by(int, size_t, const Box&) const override { return true; }
  // Reads the parts of the chunks the box meets, nothing else (chunk
  // checksums cover whole chunks, so they are not checked here).
  void read(size_t source, const Box& box, std::span<std::byte> out) const override;
  const checkpoint::Reader& reader() const { return reader_; }

 private:
  checkpoint::Reader reader_;
  std::vector<safetensors::TensorSpec> specs_;
};

class ArraysInput final : public ExportInput {
 public:
  ArraysInput(std::span<const NamedArray> arrays, int rank);
  const std::vector<safetensors::TensorSpec>& specs() const override { return specs_; }
  // Inside one shard `process` holds, or an array brought whole to it.
  bool readable_by(int process, size_t source, const Box& box) const override;
  void read(size_t source, const Box& box, std::span<std::byte> out) const override;

  // Collective: brings array `source` whole to process `root` (the others
  // send it what it lacks), until release().
  void bring_whole(size_t source, int root, Transport& transport);
  void release(size_t source);

 private:
  std::span<const NamedArray> arrays_;
  int rank_ = 0;
  std::vector<safetensors::TensorSpec> specs_;
  std::vector<std::vector<std::vector<Box>>> boxes_;  // [source][process]: the shards' boxes
  std::map<size_t, std::pair<int, std::optional<HostArray>>> whole_;  // brought to (root, the array there)
};

class SourceInput final : public ExportInput {
 public:
  explicit SourceInput(const TensorSource& source);
  const std::vector<safetensors::TensorSpec>& specs() const override { return source_.specs; }
  bool readable_by(int, size_t, const Box&) const override { return true; }
  // The caller's read; a failure becomes an Error naming the source tensor
  // and box (kIo for an exception that is not an Error).
  void read(size_t source, const Box& box, std::span<std::byte> out) const override;

 private:
  const TensorSource& source_;
};

}  // namespace reshard::pipelines_detail
