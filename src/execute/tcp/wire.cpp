#include "execute/tcp/wire.h"

#include <cstring>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::tcp_detail {

void MessageWriter::u32(uint32_t value) {
  const auto* raw = reinterpret_cast<const std::byte*>(&value);
  bytes_.insert(bytes_.end(), raw, raw + sizeof value);
}

void MessageWriter::u64(uint64_t value) {
  const auto* raw = reinterpret_cast<const std::byte*>(&value);
  bytes_.insert(bytes_.end(), raw, raw + sizeof value);
}

void MessageWriter::text(std::string_view value) {
  u32(static_cast<uint32_t>(value.size()));
  const auto* raw = reinterpret_cast<const std::byte*>(value.data());
  bytes_.insert(bytes_.end(), raw, raw + value.size());
}

std::vector<std::byte> MessageWriter::framed() const {
  MessageWriter out;
  out.u32(static_cast<uint32_t>(bytes_.size()));
  out.bytes_.insert(out.bytes_.end(), bytes_.begin(), bytes_.end());
  return out.bytes_;
}

std::span<const std::byte> MessageReader::take(size_t count) {
  if (count > bytes_.size()) {
    throw Error(ErrorCode::kTransport, fmt::format("a malformed rendezvous message from {}", from_));
  }
  const auto taken = bytes_.first(count);
  bytes_ = bytes_.subspan(count);
  return taken;
}

uint32_t MessageReader::u32() {
  uint32_t value = 0;
  std::memcpy(&value, take(sizeof value).data(), sizeof value);
  return value;
}

uint64_t MessageReader::u64() {
  uint64_t value = 0;
  std::memcpy(&value, take(sizeof value).data(), sizeof value);
  return value;
}

std::string MessageReader::text() {
  const uint32_t size = u32();
  if (size > kMaxRendezvousString) {
    throw Error(ErrorCode::kTransport, fmt::format("a rendezvous message from {} names a string of {} bytes", from_, size));
  }
  const auto raw = take(size);
  return std::string(reinterpret_cast<const char*>(raw.data()), raw.size());
}

}  // namespace reshard::tcp_detail
