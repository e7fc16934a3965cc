#include "support/golden_sharding.h"

#include <fstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace reshard::testing {
namespace {

template <typename T>
std::string joined(const std::vector<T>& items, const char* separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    if constexpr (std::is_same_v<T, std::string>) {
      out += items[i];
    } else {
      out += std::to_string(items[i]);
    }
  }
  return out;
}

GoldenCase parse_case(const nlohmann::json& j) {
  GoldenCase c;
  c.name = j.at("name").get<std::string>();
  for (const auto& axis : j.at("mesh").at("axes")) {
    c.axes.emplace_back(axis.at(0).get<std::string>(), axis.at(1).get<int64_t>());
  }
  c.devices = j.at("mesh").at("devices").get<std::vector<int64_t>>();
  for (const auto& entry : j.at("spec")) {
    if (entry.is_null()) {
      c.spec.emplace_back();
    } else if (entry.is_string()) {
      c.spec.push_back({entry.get<std::string>()});
    } else {
      c.spec.push_back(entry.get<std::vector<std::string>>());
    }
  }
  c.shape = j.at("shape").get<std::vector<int64_t>>();
  c.uneven = j.contains("uneven") && j.at("uneven") == true;
  if (j.contains("error")) {
    c.error = j.at("error").get<std::string>();
    return c;
  }
  const auto& expect = j.at("expect");
  for (const auto& d : expect.at("devices")) {
    GoldenDevice device;
    device.id = d.at("id").get<int64_t>();
    device.index = d.at("index").get<std::vector<std::pair<int64_t, int64_t>>>();
    device.replica = d.at("replica").get<int64_t>();
    c.expected.push_back(std::move(device));
  }
  if (expect.contains("shard_shape")) c.shard_shape = expect.at("shard_shape").get<std::vector<int64_t>>();
  return c;
}

std::vector<GoldenCase> load() {
  const std::string path = std::string(RESHARD_SHARED_DIR) + "/golden/jax_sharding.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::vector<GoldenCase> cases;
  for (const auto& j : doc.at("cases")) cases.push_back(parse_case(j));
  if (cases.empty()) throw std::runtime_error(path + " has no cases");
  return cases;
}

}  // namespace

std::string GoldenCase::mesh_flag() const {
  std::vector<std::string> parts;
  for (const auto& [axis, size] : axes) parts.push_back(fmt::format("{}={}", axis, size));
  return joined(parts, ",");
}

std::string GoldenCase::devices_flag() const { return joined(devices, ","); }

std::string GoldenCase::spec_flag() const {
  std::vector<std::string> parts;
  for (const auto& entry : spec) {
    if (entry.empty()) {
      parts.push_back("None");
    } else if (entry.size() == 1) {
      parts.push_back(entry.front());
    } else {
      parts.push_back(fmt::format("({})", joined(entry, ",")));
    }
  }
  return joined(parts, ",");
}

std::string GoldenCase::shape_flag() const { return joined(shape, ","); }

std::string GoldenCase::spec_jax() const {
  std::vector<std::string> parts;
  for (const auto& entry : spec) {
    std::vector<std::string> quoted;
    for (const std::string& axis : entry) quoted.push_back(fmt::format("'{}'", axis));
    if (entry.empty()) {
      parts.push_back("None");
    } else if (entry.size() == 1) {
      parts.push_back(quoted.front());
    } else {
      parts.push_back(fmt::format("({})", joined(quoted, ", ")));
    }
  }
  return fmt::format("P({})", joined(parts, ", "));
}

const std::vector<GoldenCase>& golden_sharding_cases() {
  static const std::vector<GoldenCase> cases = load();
  return cases;
}

}  // namespace reshard::testing
