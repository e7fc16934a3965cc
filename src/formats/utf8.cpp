#include "utf8.h"

#include <cstdint>
#include <cstring>

namespace reshard::formats_detail {
namespace {

// Bytes [lo, hi] allowed right after a lead byte; the rest are 0x80..0xBF.
struct LeadRule {
  int length;  // 0 for a byte that cannot start a sequence
  uint8_t second_lo;
  uint8_t second_hi;
};

LeadRule rule_for(uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};  // no overlong forms
  if (lead == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (lead >= 0xE1 && lead <= 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};  // no overlong forms
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};  // nothing past U+10FFFF
  return {0, 0, 0};
}

bool is_continuation(uint8_t byte) { return (byte & 0xC0) == 0x80; }

// Whether the 8 bytes at `p` are all ASCII.
bool ascii_word(const char* p) {
  uint64_t word = 0;
  std::memcpy(&word, p, sizeof word);
  return (word & 0x8080808080808080ULL) == 0;
}

}  // namespace

std::optional<size_t> first_invalid_utf8(std::string_view text) {
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (i + 8 <= n && ascii_word(text.data() + i)) {
      i += 8;
      continue;
    }
    const auto lead = static_cast<uint8_t>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    const LeadRule rule = rule_for(lead);
    if (rule.length == 0 || n - i < static_cast<size_t>(rule.length)) return i;
    const auto second = static_cast<uint8_t>(text[i + 1]);
    if (second < rule.second_lo || second > rule.second_hi) return i;
    for (int k = 2; k < rule.length; ++k) {
      if (!is_continuation(static_cast<uint8_t>(text[i + static_cast<size_t>(k)]))) return i;
    }
    i += static_cast<size_t>(rule.length);
  }
  return std::nullopt;
}

}  // namespace reshard::formats_detail
