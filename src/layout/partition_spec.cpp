#include "reshard/layout/partition_spec.h"

#include <cctype>
#include <set>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/layout/mesh.h"

namespace reshard {
namespace {

// Recursive-descent parser over both spec syntaxes.
class SpecParser {
 public:
  explicit SpecParser(std::string_view text) : text_(text) {}

  std::vector<SpecEntry> parse() {
    skip_space();
    const bool jax_form = consume_word("PartitionSpec(") || consume_word("P(");
    std::vector<SpecEntry> entries = parse_items(jax_form ? ')' : '\0', false);
    if (jax_form) expect(')');
    skip_space();
    if (pos_ != text_.size()) fail(fmt::format("unexpected '{}'", text_[pos_]));
    return entries;
  }

 private:
  // items := item (',' item)* [','] ; stops before `close` (or end of text).
  std::vector<SpecEntry> parse_items(char close, bool in_tuple) {
    std::vector<SpecEntry> items;
    skip_space();
    if (at_end_or(close)) return items;
    while (true) {
      items.push_back(parse_item(in_tuple));
      skip_space();
      if (!consume(',')) break;
      skip_space();
      if (at_end_or(close) && close != '\0') break;  // trailing comma, as in ('x',)
    }
    return items;
  }

  SpecEntry parse_item(bool in_tuple) {
    skip_space();
    if (peek() == '(') {
      if (in_tuple) {
        throw Error(ErrorCode::kNestedTuple,
                    fmt::format("invalid partition spec '{}': a tuple inside a tuple at position {} "
                                "(an entry is None, an axis, or a flat tuple of axes)",
                                text_, pos_));
      }
      ++pos_;
      std::vector<SpecEntry> members = parse_items(')', true);
      expect(')');
      SpecEntry flat;
      for (SpecEntry& m : members) {
        if (m.empty()) fail("None inside a tuple");
        flat.push_back(std::move(m.front()));
      }
      return flat;
    }
    std::string word = parse_word();
    if (word == "None" || word == "_") return {};
    return {std::move(word)};
  }

  std::string parse_word() {
    const char quote = peek();
    if (quote == '\'' || quote == '"') {
      const size_t close = text_.find(quote, pos_ + 1);
      if (close == std::string_view::npos) fail("unterminated quote");
      std::string word(text_.substr(pos_ + 1, close - pos_ - 1));
      pos_ = close + 1;
      if (word.empty()) fail("empty axis name");
      return word;
    }
    const size_t start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) {
      fail(pos_ < text_.size() ? fmt::format("expected an axis name, None or '(' but found '{}'", text_[pos_])
                               : std::string("expected an axis name, None or '(' but the spec ended"));
    }
    return std::string(text_.substr(start, pos_ - start));
  }

  static bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool at_end_or(char close) const { return pos_ == text_.size() || (close != '\0' && peek() == close); }
  bool consume(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  bool consume_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  void expect(char c) {
    skip_space();
    if (!consume(c)) fail(fmt::format("expected '{}'", c));
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(ErrorCode::kParse,
                fmt::format("invalid partition spec '{}': {} at position {}", text_, why, pos_));
  }

  std::string_view text_;
  size_t pos_ = 0;
};

std::string entry_repr(const SpecEntry& entry) {
  if (entry.empty()) return "None";
  if (entry.size() == 1) return fmt::format("'{}'", entry.front());
  std::vector<std::string> quoted;
  for (const std::string& axis : entry) quoted.push_back(fmt::format("'{}'", axis));
  return fmt::format("({})", fmt::join(quoted, ", "));
}

std::vector<SpecEntry> without_trailing_none(std::vector<SpecEntry> entries) {
  while (!entries.empty() && entries.back().empty()) entries.pop_back();
  return entries;
}

}  // namespace

PartitionSpec::PartitionSpec(std::vector<SpecEntry> entries) : entries_(std::move(entries)) {}

PartitionSpec PartitionSpec::parse(std::string_view text) {
  return PartitionSpec(SpecParser(text).parse());
}

std::vector<std::string> PartitionSpec::axis_names() const {
  std::vector<std::string> names;
  for (const SpecEntry& entry : entries_) names.insert(names.end(), entry.begin(), entry.end());
  return names;
}

void PartitionSpec::validate(const Mesh& mesh, size_t rank) const {
  std::set<std::string> seen;
  for (const std::string& axis : axis_names()) {
    if (!seen.insert(axis).second) {
      throw Error(ErrorCode::kDuplicateAxis,
                  fmt::format("a NamedSharding spec can map every mesh axis to at most one "
                              "positional dimension, but {} has duplicate entries for `{}`",
                              to_string(), axis));
    }
  }
  for (const std::string& axis : axis_names()) {
    if (!mesh.axis_index(axis)) {
      std::vector<std::string> names;
      for (const MeshAxis& a : mesh.axes()) names.push_back(fmt::format("'{}'", a.name));
      throw Error(ErrorCode::kUnknownAxis,
                  fmt::format("resource axis '{}' of {} is not found in mesh: ({})", axis,
                              to_string(), fmt::join(names, ", ")));
    }
  }
  if (entries_.size() > rank) {
    throw Error(ErrorCode::kRank,
                fmt::format("{} is only valid for values of rank at least {}, but was applied to a "
                            "value of rank {}",
                            to_string(), entries_.size(), rank));
  }
}

std::string PartitionSpec::to_string() const {
  std::vector<std::string> parts;
  for (const SpecEntry& entry : entries_) parts.push_back(entry_repr(entry));
  if (parts.size() == 1) return fmt::format("PartitionSpec({},)", parts.front());
  return fmt::format("PartitionSpec({})", fmt::join(parts, ", "));
}

bool PartitionSpec::operator==(const PartitionSpec& other) const {
  return without_trailing_none(entries_) == without_trailing_none(other.entries_);
}

}  // namespace reshard
