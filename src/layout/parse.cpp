#include "reshard/layout/parse.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    parts.push_back(trim(text.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) return parts;
    start = comma + 1;
  }
}

[[noreturn]] void parse_error(std::string_view what, std::string_view text, std::string_view why) {
  throw Error(ErrorCode::kParse, fmt::format("invalid {} '{}': {}", what, text, why));
}

// A name a partition spec can refer to: what PartitionSpec::parse reads as an
// axis, and not a word it reads as "not partitioned".
void check_axis_name(std::string_view text, std::string_view name) {
  if (name == "None" || name == "_") {
    parse_error("mesh", text, fmt::format("axis name '{}' means 'not partitioned' in a spec", name));
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      parse_error("mesh", text,
                  fmt::format("axis name '{}' has '{}' (use letters, digits, '_', '-' and '.')", name, c));
    }
  }
}

}  // namespace

int64_t parse_count(std::string_view text, std::string_view what) {
  text = trim(text);
  if (text.empty()) parse_error(what, text, "empty");
  if (text.front() == '-') parse_error(what, text, "must not be negative");
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) parse_error(what, text, "too large");
  if (ec != std::errc() || end != text.data() + text.size()) parse_error(what, text, "not a whole number");
  return value;
}

std::vector<MeshAxis> parse_mesh_axes(std::string_view text) {
  if (trim(text).empty()) parse_error("mesh", text, "expected axes such as data=2,model=8");
  std::vector<MeshAxis> axes;
  for (std::string_view part : split_commas(text)) {
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      parse_error("mesh", text, fmt::format("axis '{}' has no size (expected name=size)", part));
    }
    const std::string_view name = trim(part.substr(0, eq));
    if (name.empty()) parse_error("mesh", text, fmt::format("axis '{}' has no name", part));
    check_axis_name(text, name);
    const int64_t size = parse_count(part.substr(eq + 1), fmt::format("size of mesh axis '{}'", name));
    if (size == 0) parse_error("mesh", text, fmt::format("axis '{}' has size 0", name));
    axes.push_back({std::string(name), size});
  }
  return axes;
}

std::vector<DeviceId> parse_device_list(std::string_view text) {
  if (trim(text).empty()) parse_error("device list", text, "empty");
  std::vector<DeviceId> devices;
  size_t position = 0;
  for (std::string_view part : split_commas(text)) {
    devices.push_back(parse_count(part, fmt::format("device id at position {}", position++)));
  }
  return devices;
}

Shape parse_shape(std::string_view text) {
  Shape shape;
  if (trim(text).empty()) return shape;
  size_t dim = 0;
  for (std::string_view part : split_commas(text)) {
    shape.push_back(parse_count(part, fmt::format("shape dimension {}", dim++)));
  }
  return shape;
}

uint64_t parse_byte_size(std::string_view text) {
  const std::string_view original = text;
  text = trim(text);
  size_t split = 0;
  while (split < text.size() && (std::isdigit(static_cast<unsigned char>(text[split])) || text[split] == '.')) {
    ++split;
  }
  const std::string number(text.substr(0, split));
  std::string unit(trim(text.substr(split)));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (number.empty()) parse_error("size", original, "expected a number such as 5GB, 500MB or 1.5GiB");
  struct Unit { std::string_view name; double scale; };
  static constexpr std::array<Unit, 10> kUnits = {{
      {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
      {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}, {"TIB", 1099511627776.0},
  }};
  for (const Unit& u : kUnits) {
    if (u.name != unit) continue;
    double value = 0;
    const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc() || end != number.data() + number.size()) parse_error("size", original, "not a number");
    const double bytes = std::floor(value * u.scale);
    if (!(bytes < 1.8e19)) parse_error("size", original, "too large");
    return static_cast<uint64_t>(bytes);
  }
  parse_error("size", original, fmt::format("unknown unit '{}' (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", unit));
}

}  // namespace reshard
