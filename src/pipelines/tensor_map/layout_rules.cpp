#include "reshard/pipelines/layout_rules.h"

#include <fnmatch.h>

#include <fmt/format.h>

#include "reshard/layout/best_effort.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\r')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

}  // namespace

std::vector<LayoutRule> parse_layout_rules(std::string_view text, std::string_view where) {
  std::vector<LayoutRule> rules;
  size_t line_number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++line_number;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    const size_t space = line.find_first_of(" \t");
    if (space == std::string_view::npos) {
      throw Error(ErrorCode::kParse, fmt::format("{}: line {}: expected PATTERN SPEC", where, line_number));
    }
    const std::string_view spec_text = trim(line.substr(space));
    try {
      rules.push_back({std::string(line.substr(0, space)),
                       spec_text == "_" ? PartitionSpec() : PartitionSpec::parse(spec_text)});
    } catch (const Error& e) {
      throw e.with_context(fmt::format("{}: line {}", where, line_number));
    }
  }
  return rules;
}

NamedSharding CheckpointLayout::sharding_for(std::string_view name, const Shape& shape) const {
  const std::string context = fmt::format("tensor '{}'", name);
  try {
    const std::string key(name);
    for (const LayoutRule& rule : rules) {
      if (::fnmatch(rule.pattern.c_str(), key.c_str(), 0) != 0) continue;
      if (rule.spec.size() > shape.size()) {
        if (!strict) continue;  // one broad rule may cover tensors of several ranks
        throw Error(ErrorCode::kRank, fmt::format("rule '{} {}' has {} entries, the tensor {} has rank {}",
                                                  rule.pattern, rule.spec.to_string(), rule.spec.size(),
                                                  Box::whole(shape).to_string(), shape.size()));
      }
      NamedSharding sharding(mesh, rule.spec);
      sharding.validate(shape);
      return sharding;
    }
    if (best_effort_axis) return best_effort_sharding(shape, mesh, *best_effort_axis);
    return NamedSharding(mesh, PartitionSpec());
  } catch (const Error& e) {
    throw e.with_context(context);
  }
}

}  // namespace reshard
