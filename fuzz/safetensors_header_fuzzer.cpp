// Fuzzes safetensors header validation with whole files: any input must end in
// a typed error or a header that keeps every promise the reader makes.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_check.h"
#include "reshard/formats/safetensors_header.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/error.h"

namespace reshard::safetensors {
namespace {

using fuzz::check;

// Offsets walk the data buffer contiguously; sizes match shapes; lookups agree.
void check_accepted(const Header& header, size_t file_size) {
  check(header.file_size() == file_size, "accepted header describes the whole file");
  uint64_t end = 0;
  for (const TensorInfo& tensor : header.tensors()) {
    check(tensor.begin == end && tensor.end >= tensor.begin, "offsets are contiguous");
    end = tensor.end;
    check(dtype_byte_size(tensor.dtype, static_cast<uint64_t>(tensor.elements())) == tensor.byte_size(),
          "byte size matches dtype and shape");
    check(header.find(tensor.name) == &tensor, "lookup by name finds the tensor");
  }
}

// What reshard accepts, a strict RFC 8259 parser must accept too, with the same names.
void check_json_agrees(const Header& header, std::string_view json) {
  const nlohmann::json parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  check(!parsed.is_discarded() && parsed.is_object(), "accepted header is a JSON object");
  size_t tensors = 0;
  for (const auto& [key, value] : parsed.items()) {
    if (key == "__metadata__") continue;
    ++tensors;
    check(header.find(key) != nullptr, "every JSON key is a tensor");
  }
  check(tensors == header.tensors().size(), "as many tensors as JSON keys");
}

// Writing the header again and reading that back gives the same tensors.
void check_rewrite(const Header& header) {
  std::vector<TensorSpec> specs;
  for (const TensorInfo& tensor : header.tensors()) specs.push_back({tensor.name, tensor.dtype, tensor.shape});
  const FileLayout layout = FileLayout::plan(std::move(specs), header.metadata());
  const std::string& bytes = layout.header_bytes();
  const Header again = parse_header(std::as_bytes(std::span(bytes.data(), bytes.size())),
                                    layout.file_size(), "rewritten");
  check(again.metadata() == header.metadata(), "metadata survives a rewrite");
  check(again.tensors().size() == header.tensors().size(), "tensor count survives a rewrite");
  for (const TensorInfo& tensor : header.tensors()) {
    const TensorInfo* copy = again.find(tensor.name);
    check(copy != nullptr && copy->dtype == tensor.dtype && copy->shape == tensor.shape,
          "every tensor survives a rewrite");
  }
}

}  // namespace
}  // namespace reshard::safetensors

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reshard::safetensors;
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  std::optional<Header> header;
  try {
    header = parse_header(file, size, "fuzz.safetensors");
  } catch (const reshard::Error&) {
    return 0;  // a typed rejection is the right answer to bad input
  }
  check_accepted(*header, size);
  const std::string_view json(reinterpret_cast<const char*>(data) + kLengthPrefixBytes,
                              static_cast<size_t>(header->json_bytes()));
  check_json_agrees(*header, json);
  check_rewrite(*header);
  return 0;
}
