#include "pipelines/import/convert_source.h"

#include <fmt/format.h>

#include "layout/float_convert.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

using layout_detail::convert_floats;

ConvertSource ConvertSource::open(const storage::Location& path) {
  ConvertSource source;
  if (checkpoint::is_checkpoint(path)) {
    source.checkpoint_.emplace(checkpoint::Reader::open(path));
    for (const checkpoint::TensorEntry& tensor : source.checkpoint_->manifest().tensors) {
      source.tensors_.push_back({tensor.name, tensor.dtype, safetensors::dims_of(tensor.shape)});
    }
    return source;
  }
  source.model_.emplace(open_model_files(path));
  if (source.model_->format == ModelFormat::kPeft) {
    throw Error(ErrorCode::kUnsupported, fmt::format("{}: converting PEFT adapter folders is not supported", path.str()));
  }
  for (const TensorCatalog::Entry& entry : source.model_->catalog.tensors()) {
    source.tensors_.push_back({entry.info->name, entry.info->dtype, entry.info->shape});
  }
  return source;
}

std::optional<safetensors::Metadata> ConvertSource::metadata() const {
  return checkpoint_ ? checkpoint_->manifest().metadata : model_->catalog.metadata();
}

size_t ConvertSource::file_count() const {
  return checkpoint_ ? checkpoint_->manifest().files.size() : model_->catalog.files().size();
}

std::vector<Box> ConvertSource::pieces(size_t tensor, int parts) const {
  if (checkpoint_) {
    std::vector<Box> boxes;
    for (const checkpoint::Chunk& chunk : checkpoint_->manifest().tensors[tensor].chunks) boxes.push_back(chunk.box);
    return boxes;
  }
  const SourceTensor& info = tensors_[tensor];
  if (safetensors::element_count(info.dims, info.name) == 0) return {};
  const Shape shape = safetensors::layout_shape(info.dims, info.name);
  if (shape.empty() || shape[0] < parts) return {Box::whole(shape)};
  std::vector<Box> boxes;
  for (int p = 0; p < parts; ++p) {
    std::vector<int64_t> origin(shape.size(), 0);
    Shape extent = shape;
    origin[0] = shape[0] * p / parts;
    extent[0] = shape[0] * (p + 1) / parts - origin[0];
    boxes.emplace_back(std::move(origin), std::move(extent));
  }
  return boxes;
}

void ConvertSource::read_box(size_t tensor, const Box& box, std::span<std::byte> out) const {
  if (checkpoint_) {
    checkpoint_->read_box(checkpoint_->manifest().tensors[tensor], box, out);
    return;
  }
  const TensorCatalog::Entry& entry = model_->catalog.tensors()[tensor];
  model_->catalog.file_of(entry).read_box(*entry.info, box, out);
}

std::vector<std::byte> read_cast(const ConvertSource& source, size_t tensor, const Box& box, DType out_dtype) {
  const DType in_dtype = source.tensors()[tensor].dtype;
  std::vector<std::byte> raw(static_cast<size_t>(safetensors::File::box_bytes(in_dtype, box)));
  source.read_box(tensor, box, raw);
  if (in_dtype == out_dtype) return raw;
  std::vector<std::byte> cast(static_cast<size_t>(safetensors::File::box_bytes(out_dtype, box)));
  convert_floats(in_dtype, raw, out_dtype, cast, static_cast<uint64_t>(box.volume()));
  return cast;
}

}  // namespace reshard::pipelines_detail
