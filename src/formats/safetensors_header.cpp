#include "reshard/formats/safetensors_header.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "formats/json_escape.h"
#include "header_json.h"
#include "layout/checked.h"
#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"
#include "utf8.h"

namespace reshard::safetensors {

using formats_detail::json_quoted;
using layout_detail::checked_add;
using layout_detail::checked_mul;

namespace {

size_t hash_name(std::string_view name) { return std::hash<std::string_view>{}(name); }

std::string_view as_text(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

[[noreturn]] void fail(ErrorKind kind, std::string_view file, std::string_view what) {
  throw Error(kind, fmt::format("{}: {}", file, what));
}

[[noreturn]] void fail_tensor(ErrorKind kind, std::string_view file, const TensorInfo& tensor,
                              std::string_view what) {
  throw Error(kind, fmt::format("{}: tensor {}: {}", file, json_quoted(tensor.name), what));
}

bool before(const TensorInfo& a, const TensorInfo& b) {
  return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
}

// Rule 7: elements and bits, folded in shape order with overflow checks as the
// reference does (so [0, 2^64-1] is zero elements, not an overflow).
uint64_t checked_bits(const TensorInfo& tensor, std::string_view file) {
  uint64_t elements = 1;
  for (uint64_t dim : tensor.shape) {
    if (__builtin_mul_overflow(elements, dim, &elements)) {
      fail_tensor(file_rule::kValidationOverflow, file, tensor,
                  fmt::format("validation overflow: element count of shape [{}] overflows",
                              fmt::join(tensor.shape, ", ")));
    }
  }
  uint64_t bits = 0;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(dtype_bits(tensor.dtype)), &bits)) {
    fail_tensor(file_rule::kValidationOverflow, file, tensor,
                fmt::format("validation overflow: {} elements of {} overflow in bits", elements,
                            dtype_name(tensor.dtype)));
  }
  return bits;
}

// Rules 6-8 for one tensor, in the reference's order; returns its end.
uint64_t check_tensor(const TensorInfo& tensor, uint64_t expected_begin, std::string_view file) {
  if (tensor.begin != expected_begin || tensor.end < tensor.begin) {
    fail_tensor(file_rule::kInvalidOffset, file, tensor,
                fmt::format("invalid offset: data_offsets [{}, {}], expected to begin at {}",
                            tensor.begin, tensor.end, expected_begin));
  }
  const uint64_t bits = checked_bits(tensor, file);
  if (bits % 8 != 0) {
    fail_tensor(file_rule::kMisalignedSlice, file, tensor,
                fmt::format("misaligned slice: {} bits of {} do not fill whole bytes", bits,
                            dtype_name(tensor.dtype)));
  }
  if (tensor.end - tensor.begin != bits / 8) {
    fail_tensor(file_rule::kInvalidTensorInfo, file, tensor,
                fmt::format("invalid tensor info: {} of shape [{}] needs {} bytes, data_offsets "
                            "[{}, {}] hold {}",
                            dtype_name(tensor.dtype), fmt::join(tensor.shape, ", "), bits / 8,
                            tensor.begin, tensor.end, tensor.end - tensor.begin));
  }
  return tensor.end;
}

// The reference reads the header into a map, so of a repeated name only the
// last entry (in JSON order) survives. Returns the names that repeat, first
// repeat first; leaves `tensors` untouched when none does.
std::vector<std::string> keep_last_of_each_name(std::vector<TensorInfo>& tensors) {
  std::unordered_map<std::string_view, size_t> last;
  last.reserve(tensors.size());
  bool repeats = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto [it, inserted] = last.try_emplace(tensors[i].name, i);
    if (!inserted) {
      it->second = i;
      repeats = true;
    }
  }
  if (!repeats) return {};
  // The map's keys view the names: decide everything before moving any.
  std::vector<std::string> repeated;
  std::vector<bool> kept(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    kept[i] = last.at(tensors[i].name) == i;
    if (!kept[i] && std::find(repeated.begin(), repeated.end(), tensors[i].name) == repeated.end()) {
      repeated.push_back(tensors[i].name);
    }
  }
  std::vector<TensorInfo> unique;
  unique.reserve(last.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (kept[i]) unique.push_back(std::move(tensors[i]));
  }
  tensors = std::move(unique);
  return repeated;
}

}  // namespace

uint64_t element_count(const Dims& dims, std::string_view what) {
  uint64_t elements = 1;
  for (uint64_t dim : dims) elements = checked_mul(elements, dim, what);
  return elements;
}

Shape layout_shape(const Dims& dims, std::string_view tensor) {
  Shape shape;
  shape.reserve(dims.size());
  for (uint64_t dim : dims) {
    if (dim > static_cast<uint64_t>(INT64_MAX)) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("tensor {}: dimension {} does not fit a signed 64-bit layout",
                              json_quoted(tensor), dim));
    }
    shape.push_back(static_cast<int64_t>(dim));
  }
  return shape;
}

Dims dims_of(const Shape& shape) {
  Dims dims;
  dims.reserve(shape.size());
  for (int64_t extent : shape) {
    if (extent < 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("negative dimension {}", extent));
    }
    dims.push_back(static_cast<uint64_t>(extent));
  }
  return dims;
}

uint64_t TensorInfo::elements() const { return element_count(shape, "tensor element count"); }

Header::Header(uint64_t json_bytes, std::optional<Metadata> metadata,
               std::vector<TensorInfo> tensors)
    : json_bytes_(json_bytes), metadata_(std::move(metadata)), tensors_(std::move(tensors)) {
  build_index();
}

void Header::build_index() {
  if (tensors_.size() >= UINT32_MAX / 2) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{} tensors are too many", tensors_.size()));
  }
  slots_.assign(std::bit_ceil(tensors_.size() * 2 + 1), 0);
  const size_t mask = slots_.size() - 1;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const std::string& name = tensors_[i].name;
    size_t slot = hash_name(name) & mask;
    while (slots_[slot] != 0) {
      if (tensors_[slots_[slot] - 1].name == name) {
        throw Error(ErrorCode::kDuplicateTensor,
                    fmt::format("tensor {} appears more than once", json_quoted(name)));
      }
      slot = (slot + 1) & mask;
    }
    slots_[slot] = static_cast<uint32_t>(i + 1);
  }
}

uint64_t Header::data_bytes() const { return tensors_.empty() ? 0 : tensors_.back().end; }

const TensorInfo* Header::find(std::string_view name) const {
  if (slots_.empty()) return nullptr;
  const size_t mask = slots_.size() - 1;
  for (size_t slot = hash_name(name) & mask; slots_[slot] != 0; slot = (slot + 1) & mask) {
    const TensorInfo& tensor = tensors_[slots_[slot] - 1];
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

const TensorInfo& Header::at(std::string_view name) const {
  if (const TensorInfo* tensor = find(name)) return *tensor;
  throw Error(ErrorCode::kMissingTensor, fmt::format("no tensor {}", json_quoted(name)));
}

uint64_t Header::file_offset(const TensorInfo& tensor) const {
  return checked_add(data_start(), tensor.begin, "tensor file offset");
}

uint64_t parse_length_prefix(std::span<const std::byte> first_bytes, uint64_t file_size,
                             std::string_view file) {
  if (file_size < kLengthPrefixBytes || first_bytes.size() < kLengthPrefixBytes) {
    fail(file_rule::kHeaderTooSmall, file,
         fmt::format("header too small: the file has {} bytes, fewer than the {} of the length",
                     file_size, kLengthPrefixBytes));
  }
  uint64_t length = 0;
  for (size_t i = kLengthPrefixBytes; i-- > 0;) {
    length = (length << 8) | std::to_integer<uint64_t>(first_bytes[i]);
  }
  if (length > kMaxHeaderBytes) {
    fail(file_rule::kHeaderTooLarge, file,
         fmt::format("header too large: {} bytes, the limit is {}", length, kMaxHeaderBytes));
  }
  if (length > file_size - kLengthPrefixBytes) {
    fail(file_rule::kInvalidHeaderLength, file,
         fmt::format("invalid header length: 8 + {} bytes of header pass the end of a {}-byte file",
                     length, file_size));
  }
  return length;
}

Header parse_header_json(std::span<const std::byte> json, uint64_t file_size,
                         std::string_view file) {
  const std::string_view text = as_text(json);
  if (const auto bad = formats_detail::first_invalid_utf8(text)) {
    fail(file_rule::kInvalidHeaderUtf8, file,
         fmt::format("invalid header (UTF-8): bad byte 0x{:02x} at header byte {}",
                     static_cast<unsigned char>(text[*bad]), *bad));
  }
  formats_detail::ParsedEntries entries = formats_detail::parse_header_entries(text, file);
  std::vector<std::string> repeated = keep_last_of_each_name(entries.tensors);
  if (!std::is_sorted(entries.tensors.begin(), entries.tensors.end(), before)) {
    std::stable_sort(entries.tensors.begin(), entries.tensors.end(), before);
  }
  std::optional<Header> header;
  try {
    header.emplace(json.size(), std::move(entries.metadata), std::move(entries.tensors));
    header->set_repeated_names(std::move(repeated));
  } catch (const Error& e) {
    throw e.with_context(file);
  }
  uint64_t end = 0;
  for (const TensorInfo& tensor : header->tensors()) end = check_tensor(tensor, end, file);
  uint64_t expected_size = 0;
  if (__builtin_add_overflow(header->data_start(), end, &expected_size) ||
      expected_size != file_size) {
    fail(file_rule::kIncompleteBuffer, file,
         fmt::format("incomplete buffer: the header describes {} data bytes after byte {}, the "
                     "file has {} bytes",
                     end, header->data_start(), file_size));
  }
  return std::move(*header);
}

Header parse_header(std::span<const std::byte> leading, uint64_t file_size, std::string_view file) {
  const uint64_t length = parse_length_prefix(leading, file_size, file);
  if (leading.size() - kLengthPrefixBytes < length) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: {} leading bytes given, the header needs {}", file, leading.size(),
                            kLengthPrefixBytes + length));
  }
  return parse_header_json(leading.subspan(kLengthPrefixBytes, length), file_size, file);
}

}  // namespace reshard::safetensors
