#include "pipelines/tensor_map/tensor_map_pattern.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {
namespace {

[[noreturn]] void bad(std::string_view what, std::string_view why) {
  throw Error(ErrorCode::kParse, fmt::format("{}: {}", what, why));
}

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || std::isdigit(static_cast<unsigned char>(c)) != 0; }

bool valid_identifier(std::string_view name) {
  return !name.empty() && is_name_start(name[0]) && std::all_of(name.begin(), name.end(), is_name_char);
}

// How much of `name` from `at` one placeholder may take: up to the next '.'
// (or digits only), at least one character.
size_t placeholder_limit(std::string_view name, size_t at, bool digits) {
  size_t end = at;
  while (end < name.size() && name[end] != '.' &&
         (!digits || std::isdigit(static_cast<unsigned char>(name[end])) != 0)) {
    ++end;
  }
  return end;
}

bool match_from(const NamePattern& pattern, size_t part, std::string_view name, size_t at,
                const std::optional<std::string>& digits, Captures& captures) {
  if (part == pattern.parts.size()) return at == name.size();
  const NamePattern::Part& p = pattern.parts[part];
  if (!p.placeholder) {
    if (name.substr(at, p.text.size()) != p.text) return false;
    return match_from(pattern, part + 1, name, at + p.text.size(), digits, captures);
  }
  const bool is_digits = digits && *digits == p.text;
  const size_t limit = placeholder_limit(name, at, is_digits);
  // Longest first: a literal after the placeholder then decides where it ends.
  for (size_t end = limit; end > at; --end) {
    const std::string_view value = name.substr(at, end - at);
    if (is_digits && value.size() > 1 && value[0] == '0') continue;
    if (match_from(pattern, part + 1, name, end, digits, captures)) {
      captures[p.text] = std::string(value);
      return true;
    }
  }
  return false;
}

// One side of a rearrange: names and parenthesised groups.
AxisGroups parse_side(std::string_view text, std::string_view what) {
  AxisGroups groups;
  bool in_group = false;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\t') {
      ++i;
    } else if (c == '(') {
      if (in_group) bad(what, "nested parentheses");
      in_group = true;
      groups.emplace_back();
      ++i;
    } else if (c == ')') {
      if (!in_group) bad(what, "')' without '('");
      if (groups.back().empty()) bad(what, "an empty group '()'");
      in_group = false;
      ++i;
    } else if (is_name_start(c)) {
      size_t end = i;
      while (end < text.size() && is_name_char(text[end])) ++end;
      std::string name(text.substr(i, end - i));
      if (in_group) {
        groups.back().push_back(std::move(name));
      } else {
        groups.push_back({std::move(name)});
      }
      i = end;
    } else {
      bad(what, fmt::format("unexpected '{}' (axis names are letters, digits and '_')", c));
    }
  }
  if (in_group) bad(what, "'(' without ')'");
  std::set<std::string> seen;
  for (const auto& group : groups) {
    for (const std::string& name : group) {
      if (!seen.insert(name).second) bad(what, fmt::format("axis '{}' appears twice on one side", name));
    }
  }
  return groups;
}

std::string side_text(const AxisGroups& groups) {
  std::string out;
  for (const auto& group : groups) {
    if (!out.empty()) out += ' ';
    if (group.size() == 1) {
      out += group[0];
      continue;
    }
    out += '(';
    for (size_t i = 0; i < group.size(); ++i) out += (i ? " " : "") + group[i];
    out += ')';
  }
  return out;
}

}  // namespace

std::vector<std::string> NamePattern::placeholders() const {
  std::vector<std::string> names;
  for (const Part& part : parts) {
    if (part.placeholder) names.push_back(part.text);
  }
  return names;
}

NamePattern parse_name_pattern(std::string_view text, std::string_view what) {
  NamePattern pattern;
  std::set<std::string> seen;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '}') bad(what, fmt::format("'}}' without '{{' in '{}'", text));
    if (text[i] != '{') {
      const size_t end = std::min(text.find_first_of("{}", i), text.size());
      pattern.parts.push_back({false, std::string(text.substr(i, end - i))});
      i = end;
      continue;
    }
    const size_t close = text.find('}', i);
    if (close == std::string_view::npos) bad(what, fmt::format("'{{' without '}}' in '{}'", text));
    const std::string name(text.substr(i + 1, close - i - 1));
    if (!valid_identifier(name)) bad(what, fmt::format("'{{{}}}' is not a placeholder name in '{}'", name, text));
    if (!seen.insert(name).second) bad(what, fmt::format("placeholder {{{}}} appears twice in '{}'", name, text));
    if (!pattern.parts.empty() && pattern.parts.back().placeholder) {
      bad(what, fmt::format("placeholders with nothing between them in '{}'", text));
    }
    pattern.parts.push_back({true, name});
    i = close + 1;
  }
  if (pattern.parts.empty()) bad(what, "an empty name pattern");
  return pattern;
}

bool match_name(const NamePattern& pattern, std::string_view name, const std::optional<std::string>& digits,
                Captures& captures) {
  Captures found;
  if (!match_from(pattern, 0, name, 0, digits, found)) return false;
  captures = std::move(found);
  return true;
}

std::string fill_name(const NamePattern& pattern, const Captures& values) {
  std::string out;
  for (const NamePattern::Part& part : pattern.parts) {
    out += part.placeholder ? values.at(part.text) : part.text;
  }
  return out;
}

std::pair<AxisGroups, AxisGroups> parse_rearrange(std::string_view text, std::string_view what) {
  const size_t arrow = text.find("->");
  if (arrow == std::string_view::npos || text.find("->", arrow + 2) != std::string_view::npos) {
    bad(what, fmt::format("'{}' needs exactly one '->'", text));
  }
  return {parse_side(text.substr(0, arrow), what), parse_side(text.substr(arrow + 2), what)};
}

std::string rearrange_text(const AxisGroups& from, const AxisGroups& to) {
  return side_text(from) + " -> " + side_text(to);
}

}  // namespace reshard::pipelines_detail
