#include "header_json.h"

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "formats/json_escape.h"
#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"

namespace reshard::formats_detail {

using safetensors::Dims;
using safetensors::Metadata;
using safetensors::TensorInfo;

namespace {

bool is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, uint32_t code_point) {
  auto byte = [&](uint32_t b) { out.push_back(static_cast<char>(b)); };
  if (code_point < 0x80) {
    byte(code_point);
  } else if (code_point < 0x800) {
    byte(0xC0 | (code_point >> 6));
    byte(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    byte(0xE0 | (code_point >> 12));
    byte(0x80 | ((code_point >> 6) & 0x3F));
    byte(0x80 | (code_point & 0x3F));
  } else {
    byte(0xF0 | (code_point >> 18));
    byte(0x80 | ((code_point >> 12) & 0x3F));
    byte(0x80 | ((code_point >> 6) & 0x3F));
    byte(0x80 | (code_point & 0x3F));
  }
}

std::optional<DType> exact_dtype(std::string_view name) {
  static const std::array<std::string_view, kNumDTypes> kNames = [] {
    std::array<std::string_view, kNumDTypes> names{};
    for (int i = 0; i < kNumDTypes; ++i) names[static_cast<size_t>(i)] = dtype_name(static_cast<DType>(i));
    return names;
  }();
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<DType>(i);  // case-sensitive, as serde's enum
  }
  return std::nullopt;
}

// Whether any of the 8 bytes in `word` is '"', '\\' or below 0x20: the bytes
// that end a plain stretch of string (a SWAR test, 8 bytes per step).
bool has_string_stop(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHighs = 0x8080808080808080ULL;
  auto has_zero = [](uint64_t v) { return (v - kOnes) & ~v & kHighs; };
  const uint64_t quote = has_zero(word ^ (kOnes * '"'));
  const uint64_t backslash = has_zero(word ^ (kOnes * '\\'));
  const uint64_t control = (word - kOnes * 0x20) & ~word & kHighs;
  return (quote | backslash | control) != 0;
}

// A number as JSON spells it, before deciding what it may stand for.
struct NumberToken {
  std::string_view text;
  bool negative = false;
  bool integral = true;  // no fraction and no exponent
};

class Parser {
 public:
  Parser(std::string_view json, std::string_view file) : json_(json), file_(file) {}

  ParsedEntries parse() {
    skip_space();
    expect('{', "the header must be a JSON object");
    enter(1);
    // A rough count (entries take 60+ bytes) saves regrowing the list.
    out_.tensors.reserve(json_.size() / 64);
    skip_space();
    if (!consume('}')) {
      do {
        skip_space();
        std::string key(read_string("a tensor name"));
        skip_space();
        expect(':', "':' after a key");
        skip_space();
        if (key == "__metadata__") {
          parse_metadata();
        } else {
          parse_tensor(std::move(key));
        }
        skip_space();
      } while (consume(','));
      expect('}', "',' or '}' after an entry");
    }
    skip_space();
    if (pos_ != json_.size()) fail("trailing characters after the JSON object");
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    const std::string where =
        tensor_ ? fmt::format("tensor {}: ", json_quoted(*tensor_)) : std::string();
    throw Error(file_rule::kInvalidHeaderJson,
                fmt::format("{}: {}invalid header (JSON) at byte {}: {}", file_, where, pos_, what));
  }

  char peek() const { return pos_ < json_.size() ? json_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= json_.size(); }

  // Hot loops scan with a local index: stores through `char` may alias the
  // member, which would make the compiler reload it every step.
  void skip_space() {
    size_t at = pos_;
    while (at < json_.size() && is_json_space(json_[at])) ++at;
    pos_ = at;
  }

  bool consume(char c) {
    if (at_end() || json_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  void expect(char c, std::string_view what) {
    if (!consume(c)) fail(fmt::format("expected {}", what));
  }

  void enter(int depth) const {
    if (depth >= kMaxJsonDepth) fail(fmt::format("nested deeper than {} levels", kMaxJsonDepth - 1));
  }

  // A string's contents: a view into the JSON when it has no escapes, else
  // into a scratch buffer valid until the next call.
  std::string_view read_string(std::string_view what) {
    if (!consume('"')) fail(fmt::format("expected {} (a string)", what));
    const size_t start = pos_;
    size_t at = start;
    while (at + 8 <= json_.size()) {
      uint64_t word = 0;
      std::memcpy(&word, json_.data() + at, sizeof word);
      if (has_string_stop(word)) break;
      at += 8;
    }
    while (at < json_.size()) {
      const auto c = static_cast<unsigned char>(json_[at]);
      if (c == '"') {
        pos_ = at + 1;
        return json_.substr(start, at - start);
      }
      if (c == '\\') break;
      if (c < 0x20) {
        pos_ = at;
        fail("control character inside a string");
      }
      ++at;
    }
    pos_ = at;
    if (at_end()) fail("unterminated string");
    scratch_.assign(json_.substr(start, pos_ - start));
    return read_escaped_rest();
  }

  std::string_view read_escaped_rest() {
    while (true) {
      if (at_end()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(json_[pos_]);
      if (c == '"') {
        ++pos_;
        return scratch_;
      }
      if (c < 0x20) fail("control character inside a string");
      if (c != '\\') {
        scratch_.push_back(static_cast<char>(c));
        ++pos_;
        continue;
      }
      ++pos_;
      read_escape();
    }
  }

  void read_escape() {
    const char c = peek();
    ++pos_;
    switch (c) {
      case '"': scratch_.push_back('"'); return;
      case '\\': scratch_.push_back('\\'); return;
      case '/': scratch_.push_back('/'); return;
      case 'b': scratch_.push_back('\b'); return;
      case 'f': scratch_.push_back('\f'); return;
      case 'n': scratch_.push_back('\n'); return;
      case 'r': scratch_.push_back('\r'); return;
      case 't': scratch_.push_back('\t'); return;
      case 'u': append_utf8(scratch_, read_unicode_escape()); return;
      default: --pos_; fail("invalid escape in a string");
    }
  }

  // After "\u": one code point, joining a surrogate pair; lone surrogates are refused.
  uint32_t read_unicode_escape() {
    const uint32_t first = read_hex4();
    if (first >= 0xDC00 && first <= 0xDFFF) fail("lone trailing surrogate in a \\u escape");
    if (first < 0xD800 || first > 0xDBFF) return first;
    if (!(consume('\\') && consume('u'))) fail("lone leading surrogate in a \\u escape");
    const uint32_t second = read_hex4();
    if (second < 0xDC00 || second > 0xDFFF) fail("lone leading surrogate in a \\u escape");
    return 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
  }

  uint32_t read_hex4() {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      const int digit = hex_value(peek());
      if (digit < 0) fail("invalid \\u escape");
      value = value * 16 + static_cast<uint32_t>(digit);
      ++pos_;
    }
    return value;
  }

  NumberToken read_number() {
    NumberToken token;
    const size_t start = pos_;
    token.negative = consume('-');
    if (consume('0')) {
      // JSON allows no leading zeros.
    } else if (is_digit(peek())) {
      while (is_digit(peek())) ++pos_;
    } else {
      fail("invalid number");
    }
    if (consume('.')) {
      token.integral = false;
      if (!is_digit(peek())) fail("invalid number");
      while (is_digit(peek())) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      token.integral = false;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!is_digit(peek())) fail("invalid number");
      while (is_digit(peek())) ++pos_;
    }
    token.text = json_.substr(start, pos_ - start);
    return token;
  }

  // Shape entries and offsets: integers from 0 to 2^64-1, as Rust's usize.
  uint64_t read_unsigned(std::string_view what) {
    if (peek() == '-') fail(fmt::format("{} must not be negative", what));
    if (!is_digit(peek())) fail(fmt::format("{} must be a non-negative integer", what));
    const size_t start = pos_;
    uint64_t value = 0;
    if (!consume('0')) {
      size_t at = start;
      while (at < json_.size() && is_digit(json_[at])) {
        value = value * 10 + static_cast<uint64_t>(json_[at] - '0');  // wraps past 19 digits
        ++at;
      }
      pos_ = at;
    }
    if (peek() == '.' || peek() == 'e' || peek() == 'E') fail(fmt::format("{} must be an integer", what));
    const size_t digits = pos_ - start;
    // 19 digits always fit; 20 fit only up to 18446744073709551615.
    if (digits > 20 || (digits == 20 && json_.substr(start, 20) > "18446744073709551615")) {
      fail(fmt::format("{} does not fit 64 bits", what));
    }
    return value;
  }

  // serde_json reads numbers it cannot hold in 64 bits as doubles and refuses
  // those that overflow; the grammar is checked by read_number.
  void check_number_range(const NumberToken& token) const {
    const bool fits_integer = token.integral && token.text.size() - (token.negative ? 1 : 0) <= 19;
    if (fits_integer) return;
    const std::string copy(token.text);
    if (std::isinf(std::strtod(copy.c_str(), nullptr))) fail("number out of range");
  }

  void skip_value(int depth) {
    switch (peek()) {
      case '{': skip_object(depth + 1); return;
      case '[': skip_array(depth + 1); return;
      case '"': read_string("a value"); return;
      case 't': skip_literal("true"); return;
      case 'f': skip_literal("false"); return;
      case 'n': skip_literal("null"); return;
      default:
        if (peek() == '-' || is_digit(peek())) {
          check_number_range(read_number());
          return;
        }
        fail("expected a JSON value");
    }
  }

  void skip_literal(std::string_view literal) {
    if (json_.substr(pos_, literal.size()) != literal) fail("invalid literal");
    pos_ += literal.size();
  }

  void skip_object(int depth) {
    enter(depth);
    ++pos_;
    skip_space();
    if (consume('}')) return;
    do {
      skip_space();
      read_string("a key");
      skip_space();
      expect(':', "':' after a key");
      skip_space();
      skip_value(depth);
      skip_space();
    } while (consume(','));
    expect('}', "',' or '}' in an object");
  }

  void skip_array(int depth) {
    enter(depth);
    ++pos_;
    skip_space();
    if (consume(']')) return;
    do {
      skip_space();
      skip_value(depth);
      skip_space();
    } while (consume(','));
    expect(']', "',' or ']' in a list");
  }

  bool consume_null() {
    if (json_.substr(pos_, 4) != "null") return false;
    pos_ += 4;
    return true;
  }

  void parse_metadata() {
    if (seen_metadata_) fail("duplicate __metadata__");
    seen_metadata_ = true;
    if (consume_null()) return;
    if (!consume('{')) fail("__metadata__ must be an object of strings");
    enter(2);
    Metadata metadata;
    skip_space();
    if (!consume('}')) {
      do {
        skip_space();
        std::string key(read_string("a metadata key"));
        skip_space();
        expect(':', "':' after a key");
        skip_space();
        if (peek() != '"') fail(fmt::format("__metadata__ value of {} must be a string", json_quoted(key)));
        std::string value(read_string("a metadata value"));
        set_metadata(metadata, std::move(key), std::move(value));
        skip_space();
      } while (consume(','));
      expect('}', "',' or '}' in __metadata__");
    }
    out_.metadata = std::move(metadata);
  }

  // A repeated key keeps its last value, as the reference's map does.
  static void set_metadata(Metadata& metadata, std::string key, std::string value) {
    for (auto& [k, v] : metadata) {
      if (k == key) {
        v = std::move(value);
        return;
      }
    }
    metadata.emplace_back(std::move(key), std::move(value));
  }

  void parse_tensor(std::string name) {
    TensorInfo& tensor = out_.tensors.emplace_back();
    tensor.name = std::move(name);
    tensor_ = &tensor.name;
    if (peek() == '[') {
      parse_tensor_list(tensor);
    } else if (peek() == '{') {
      parse_tensor_object(tensor);
    } else {
      fail("a tensor entry must be an object");
    }
    tensor_ = nullptr;
  }

  // {"dtype": ..., "shape": [...], "data_offsets": [b, e], unknown fields ignored}.
  void parse_tensor_object(TensorInfo& tensor) {
    enter(2);
    ++pos_;
    bool seen_dtype = false, seen_shape = false, seen_offsets = false;
    skip_space();
    if (!consume('}')) {
      do {
        skip_space();
        const std::string_view key = read_string("a field name");
        skip_space();
        expect(':', "':' after a key");
        skip_space();
        if (key == "dtype") {
          mark_field(seen_dtype, "dtype");
          tensor.dtype = read_dtype();
        } else if (key == "shape") {
          mark_field(seen_shape, "shape");
          read_shape(tensor.shape);
        } else if (key == "data_offsets") {
          mark_field(seen_offsets, "data_offsets");
          read_offsets(tensor);
        } else {
          skip_value(2);
        }
        skip_space();
      } while (consume(','));
      expect('}', "',' or '}' in a tensor entry");
    }
    if (!seen_dtype) fail("missing field dtype");
    if (!seen_shape) fail("missing field shape");
    if (!seen_offsets) fail("missing field data_offsets");
  }

  // serde also reads a struct from a list of its fields in order:
  // ["F32", [2, 3], [0, 24]].
  void parse_tensor_list(TensorInfo& tensor) {
    enter(2);
    ++pos_;
    skip_space();
    tensor.dtype = read_dtype();
    skip_space();
    expect(',', "',' then the shape");
    skip_space();
    read_shape(tensor.shape);
    skip_space();
    expect(',', "',' then the data offsets");
    skip_space();
    read_offsets(tensor);
    skip_space();
    expect(']', "']' after three fields");
  }

  void mark_field(bool& seen, std::string_view field) const {
    if (seen) fail(fmt::format("duplicate field {}", field));
    seen = true;
  }

  DType read_dtype() {
    if (peek() != '"') fail("dtype must be a string");
    const std::string_view name = read_string("dtype");
    if (auto dtype = exact_dtype(name)) return *dtype;
    fail(fmt::format("unknown dtype {}", json_quoted(name)));
  }

  void read_shape(Dims& shape) {
    if (!consume('[')) fail("shape must be a list of non-negative integers");
    enter(3);
    skip_space();
    if (consume(']')) return;
    do {
      skip_space();
      const uint64_t dim = read_unsigned("a shape entry");
      shape.push_back(dim);
      skip_space();
    } while (consume(','));
    expect(']', "',' or ']' in the shape");
  }

  void read_offsets(TensorInfo& tensor) {
    if (!consume('[')) fail("data_offsets must be a list of two integers");
    enter(3);
    skip_space();
    tensor.begin = read_unsigned("data_offsets[0]");
    skip_space();
    expect(',', "data_offsets to have two entries");
    skip_space();
    tensor.end = read_unsigned("data_offsets[1]");
    skip_space();
    expect(']', "data_offsets to have two entries");
  }

  std::string_view json_;
  std::string_view file_;
  size_t pos_ = 0;
  std::string scratch_;
  const std::string* tensor_ = nullptr;  // the entry being parsed, for messages
  bool seen_metadata_ = false;
  ParsedEntries out_;
};

}  // namespace

ParsedEntries parse_header_entries(std::string_view json, std::string_view file) {
  return Parser(json, file).parse();
}

}  // namespace reshard::formats_detail
