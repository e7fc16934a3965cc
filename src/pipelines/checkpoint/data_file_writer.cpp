#include "pipelines/checkpoint/data_file_writer.h"

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

DataFileWriter::DataFileWriter(DataFileSink& sink, const safetensors::FileLayout& layout)
    : sink_(sink), layout_(layout) {
  sink_.append(std::as_bytes(std::span(layout_.header_bytes())));
  position_ = layout_.header_bytes().size();
}

void DataFileWriter::write_part(const std::string& key, std::span<const std::byte> bytes, bool last) {
  const safetensors::TensorInfo& info = layout_.header().at(key);
  const uint64_t begin = layout_.header().file_offset(info);
  const uint64_t written = position_ - begin;  // of this chunk, before these bytes
  const bool in_order = position_ >= begin && written + bytes.size() <= info.byte_size() &&
                        (!last || written + bytes.size() == info.byte_size()) && (written == 0 || key == current_);
  if (!in_order) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: chunk {} written out of order", sink_.name(), key));
  }
  current_ = key;
  sink_.append(bytes);
  position_ += bytes.size();
}

void DataFileWriter::commit() {
  if (position_ != layout_.file_size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} of {} bytes written", sink_.name(), position_, layout_.file_size()));
  }
  sink_.finish();
}

}  // namespace reshard::pipelines_detail
