#include "pipelines/export/base_input.h"

#include <fmt/format.h>

#include "pipelines/common/small_file.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

BaseModelInput::BaseModelInput(const ExportInput& source, const storage::Location& base)
    : source_(source), own_(source.specs().size()), base_(base),
      files_(open_model_files(base, safetensors::ReadMode::kPread)) {
  if (files_.format == ModelFormat::kPeft) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} is a PEFT adapter folder: a merge's base is a Hugging Face model folder", base.str()));
  }
  merge_base_.label = fmt::format("the base model {}", base.str());
  specs_ = source.specs();
  for (const TensorCatalog::Entry& entry : files_.catalog.tensors()) {
    const safetensors::TensorSpec spec{entry.info->name, entry.info->dtype, entry.info->shape};
    merge_base_.specs.push_back(spec);
    specs_.push_back(spec);
  }
}

bool BaseModelInput::readable_by(int process, size_t source, const Box& box) const {
  return source < own_ ? source_.readable_by(process, source, box) : true;
}

void BaseModelInput::read(size_t source, const Box& box, std::span<std::byte> out) const {
  if (source < own_) {
    source_.read(source, box, out);
    return;
  }
  const TensorCatalog::Entry& entry = files_.catalog.tensors()[source - own_];
  try {
    files_.catalog.file_of(entry).read_box(*entry.info, box, out);
  } catch (const Error& e) {
    throw e.with_context(fmt::format("reading tensor '{}' {} of {}", entry.info->name, box.to_string(), base_.str()));
  }
}

std::optional<std::string> BaseModelInput::base_file(std::string_view name) const {
  if (files_.format != ModelFormat::kHf) return std::nullopt;  // a lone file has nothing beside it
  const storage::Location where = base_.child(name);
  if (!file_exists(where)) return std::nullopt;
  return read_small_file(where);
}

}  // namespace reshard::pipelines_detail
