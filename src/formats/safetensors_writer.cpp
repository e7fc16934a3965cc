#include "reshard/formats/safetensors_writer.h"

#include <algorithm>
#include <filesystem>
#include <unordered_map>

#include <fmt/format.h>

#include "box_bytes.h"
#include "formats/atomic_file.h"
#include "formats/json_escape.h"
#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard::safetensors {

using formats_detail::AtomicFile;
using formats_detail::json_quoted;
using layout_detail::checked_add;

namespace {

std::span<const std::byte> as_bytes(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

const TensorInfo& tensor_named(const FileLayout& layout, std::string_view name,
                               const std::filesystem::path& path) {
  try {
    return layout.header().at(name);
  } catch (const Error& e) {
    throw e.with_context(path.string());
  }
}

}  // namespace

// ---- StreamWriter ----

StreamWriter::StreamWriter(const storage::Location& where, FileLayout layout, size_t buffer_bytes,
                           const storage::UploadOptions& upload)
    : layout_(std::move(layout)),
      path_(where.str()),
      file_(std::make_unique<storage::ObjectWriter>(where, layout_.file_size(), upload)),
      buffer_bytes_(std::max<size_t>(buffer_bytes, 4096)) {
  buffer_.reserve(buffer_bytes_);
  buffer_ = layout_.header_bytes();
}

StreamWriter::StreamWriter(StreamWriter&&) noexcept = default;
StreamWriter& StreamWriter::operator=(StreamWriter&&) noexcept = default;
StreamWriter::~StreamWriter() = default;

const storage::Location& StreamWriter::location() const { return file_->destination(); }

void StreamWriter::write(std::span<const std::byte> bytes) {
  const uint64_t left = layout_.header().data_bytes() - data_written_;
  if (bytes.size() > left) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} more bytes given, but only {} of the data buffer are left",
                            path().string(), bytes.size(), left));
  }
  if (buffer_.size() + bytes.size() <= buffer_bytes_) {
    buffer_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  } else {
    // Large pieces go straight from the caller's memory: no copy.
    flush();
    if (bytes.size() < buffer_bytes_) {
      buffer_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    } else {
      file_->write(bytes);
    }
  }
  data_written_ += bytes.size();
}

void StreamWriter::write_tensor(std::string_view name, std::span<const std::byte> bytes) {
  const TensorInfo& tensor = tensor_named(layout_, name, path());
  if (tensor.begin != data_written_) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: tensor {} starts at data byte {}, but the writer is at byte {}: "
                            "tensors go in layout order",
                            path().string(), json_quoted(name), tensor.begin, data_written_));
  }
  if (bytes.size() != tensor.byte_size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: tensor {} has {} bytes, {} given", path().string(), json_quoted(name),
                            tensor.byte_size(), bytes.size()));
  }
  write(bytes);
}

const TensorInfo* StreamWriter::next_tensor() const {
  const auto tensors = layout_.header().tensors();
  const auto it = std::upper_bound(tensors.begin(), tensors.end(), data_written_,
                                   [](uint64_t at, const TensorInfo& t) { return at < t.end; });
  return it == tensors.end() ? nullptr : &*it;
}

void StreamWriter::flush() {
  file_->write(as_bytes(buffer_));
  buffer_.clear();
}

void StreamWriter::commit() {
  const uint64_t expected = layout_.header().data_bytes();
  if (data_written_ != expected) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: cannot commit after {} of {} data bytes", path().string(),
                            data_written_, expected));
  }
  flush();
  file_->commit();
}

// ---- PositionalWriter ----

PositionalWriter::PositionalWriter(FileLayout layout, AtomicFile file)
    : layout_(std::move(layout)), file_(std::make_unique<AtomicFile>(std::move(file))) {}

PositionalWriter::PositionalWriter(PositionalWriter&&) noexcept = default;
PositionalWriter& PositionalWriter::operator=(PositionalWriter&&) noexcept = default;
PositionalWriter::~PositionalWriter() = default;

const std::filesystem::path& PositionalWriter::path() const { return file_->final_path(); }

PositionalWriter PositionalWriter::create(const std::filesystem::path& path, FileLayout layout) {
  AtomicFile file = AtomicFile::create(path);
  file.reserve(layout.file_size());
  file.write_at(0, as_bytes(layout.header_bytes()));
  return PositionalWriter(std::move(layout), std::move(file));
}

PositionalWriter PositionalWriter::join(const std::filesystem::path& path, FileLayout layout) {
  AtomicFile file = AtomicFile::join(path);
  std::error_code error;
  const uint64_t size = std::filesystem::file_size(file.temporary_path(), error);
  if (!error && size != layout.file_size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the temporary file has {} bytes but this layout has {}: the "
                            "writers planned different files",
                            path.string(), size, layout.file_size()));
  }
  return PositionalWriter(std::move(layout), std::move(file));
}

void PositionalWriter::write(std::string_view name, uint64_t offset,
                             std::span<const std::byte> bytes) const {
  const TensorInfo& tensor = tensor_named(layout_, name, path());
  const uint64_t end = checked_add(offset, static_cast<uint64_t>(bytes.size()), "write range end");
  if (end > tensor.byte_size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: tensor {}: bytes [{}, {}) pass its end at {}", path().string(),
                            json_quoted(name), offset, end, tensor.byte_size()));
  }
  file_->write_at(layout_.header().file_offset(tensor) + offset, bytes);
}

void PositionalWriter::write_box(std::string_view name, const Box& box,
                                 std::span<const std::byte> bytes) const {
  const TensorInfo& tensor = tensor_named(layout_, name, path());
  try {
    const uint64_t expected = formats_detail::box_byte_size(tensor.dtype, box);
    if (bytes.size() != expected) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("tensor {}: box {} has {} bytes, {} given", json_quoted(name),
                              box.to_string(), expected, bytes.size()));
    }
    const uint64_t base = layout_.header().file_offset(tensor);
    formats_detail::for_each_byte_run(tensor, box, [&](const formats_detail::ByteRun& run) {
      file_->write_at(base + run.tensor_offset, bytes.subspan(run.box_offset, run.length));
    });
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kIo) throw;
    throw e.with_context(path().string());
  }
}

void PositionalWriter::sync() const { file_->sync(); }

void PositionalWriter::commit() { file_->commit(); }

void PositionalWriter::abandon() noexcept {
  if (file_) file_->abandon();  // a moved-from writer owns nothing
}

// ---- write_file ----

void write_file(const storage::Location& where, std::span<const TensorData> tensors,
                std::optional<Metadata> metadata) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const TensorData& tensor : tensors) specs.push_back(tensor.spec);
  StreamWriter writer(where, FileLayout::plan(std::move(specs), std::move(metadata)));
  // Data goes in layout order, whatever order the caller listed it in.
  std::unordered_map<std::string_view, std::span<const std::byte>> bytes_of;
  for (const TensorData& tensor : tensors) bytes_of.emplace(tensor.spec.name, tensor.bytes);
  for (const TensorInfo& info : writer.layout().header().tensors()) {
    writer.write_tensor(info.name, bytes_of.at(info.name));
  }
  writer.commit();
}

}  // namespace reshard::safetensors
