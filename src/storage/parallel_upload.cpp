#include "reshard/storage/parallel_upload.h"

#include <charconv>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::storage {

std::string PartReceipt::serialize() const { return fmt::format("{}:{}", index, tag); }

PartReceipt PartReceipt::parse(std::string_view text) {
  const size_t colon = text.find(':');
  PartReceipt receipt;
  const char* end = colon == std::string_view::npos ? nullptr : text.data() + colon;
  const auto [stop, error] =
      end == nullptr ? std::from_chars_result{text.data(), std::errc::invalid_argument}
                     : std::from_chars(text.data(), end, receipt.index);
  if (error != std::errc() || stop != end || colon == 0) {
    throw Error(ErrorCode::kParse, fmt::format("{:?} is not a part receipt (INDEX:TAG)", std::string(text)));
  }
  receipt.tag = std::string(text.substr(colon + 1));
  return receipt;
}

void ParallelUpload::write_at(uint64_t /*offset*/, std::span<const std::byte> /*bytes*/) {
  throw Error(ErrorCode::kUnsupported,
              fmt::format("{}: this store takes whole parts, not bytes at any offset", destination().str()));
}

}  // namespace reshard::storage
