#include "formats/json_escape.h"

namespace reshard::formats_detail {
namespace {

// The escape for a byte that needs one, or nullptr (serde_json's ESCAPE table).
const char* short_escape(unsigned char byte) {
  switch (byte) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\t': return "\\t";
    case '\n': return "\\n";
    case '\f': return "\\f";
    case '\r': return "\\r";
    default: return nullptr;
  }
}

bool needs_escape(unsigned char byte) { return byte < 0x20 || byte == '"' || byte == '\\'; }

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  size_t plain_from = 0;  // copy unescaped stretches in one go
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (!needs_escape(byte)) continue;
    out.append(text.substr(plain_from, i - plain_from));
    if (const char* escape = short_escape(byte)) {
      out.append(escape);
    } else {
      out.append("\\u00");
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
    }
    plain_from = i + 1;
  }
  out.append(text.substr(plain_from));
  out.push_back('"');
}

std::string json_quoted(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

}  // namespace reshard::formats_detail
