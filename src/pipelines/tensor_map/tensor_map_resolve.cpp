#include "pipelines/tensor_map/tensor_map_resolve.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "layout/checked.h"
#include "pipelines/tensor_map/tensor_map_pattern.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {

using layout_detail::checked_mul;

namespace {

using safetensors::TensorSpec;

struct CompiledRule {
  const TensorMapRule* rule = nullptr;
  NamePattern from, to;
  std::optional<std::string> unstack, stack;
  AxisSizes known;  // map's sizes, then the rule's, then the caller's
};

struct Match {
  size_t source = 0;
  Captures captures;
};

// An output before ordering: sorted by its first source, then its index.
struct Pending {
  size_t first_source = 0;
  int64_t index = 0;
  ResolvedTensor tensor;
};

std::string describe(const TensorSpec& tensor) {
  return fmt::format("tensor '{}' ({} {})", tensor.name, dtype_name(tensor.dtype), fmt::join(tensor.shape, "x"));
}

CompiledRule compile(const TensorMap& map, const TensorMapRule& rule, const ResolveOptions& options) {
  CompiledRule compiled;
  compiled.rule = &rule;
  compiled.from = parse_name_pattern(rule.from, rule.label());
  compiled.to = parse_name_pattern(rule.to, rule.label());
  compiled.unstack = rule.unstack_axis();
  compiled.stack = rule.stack_axis();
  compiled.known = map.sizes;
  for (const auto& [axis, size] : rule.sizes) compiled.known[axis] = size;
  for (const auto& [axis, size] : options.sizes) compiled.known[axis] = size;
  return compiled;
}

// Every axis size of the rule for a source of `shape`: each dimension's
// product must be its extent, with at most one unknown factor per dimension.
AxisSizes axis_sizes(const CompiledRule& rule, const TensorSpec& source, int64_t stack_count) {
  const TensorMapRule& r = *rule.rule;
  const std::string where = fmt::format("{}, {}", describe(source), r.label());
  if (source.shape.size() != r.from_axes.size()) {
    throw Error(ErrorCode::kRank, fmt::format("{}: has {} dimensions, the rule's 'from' side names {}", where,
                                              source.shape.size(), r.from_axes.size()));
  }
  const Shape source_shape = safetensors::layout_shape(source);
  AxisSizes sizes;
  for (size_t dim = 0; dim < r.from_axes.size(); ++dim) {
    const auto& group = r.from_axes[dim];
    int64_t known = 1;
    std::optional<std::string> unknown;
    for (const std::string& axis : group) {
      const auto it = rule.known.find(axis);
      if (it == rule.known.end() || (group.size() == 1)) {
        if (unknown) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: dimension {} splits into axes {}; give the sizes of all but one in \"sizes\"",
                                  where, dim, fmt::join(group, ", ")));
        }
        unknown = axis;
      } else {
        known = checked_mul(known, it->second, "axis sizes");
        sizes[axis] = it->second;
      }
    }
    const int64_t extent = source_shape[dim];
    if (unknown) {
      if (extent % known != 0) {
        throw Error(ErrorCode::kIndivisible,
                    fmt::format("{}: dimension {} (size {}) does not factor into axes {} (sizes known: {})", where,
                                dim, extent, fmt::join(group, ", "), known));
      }
      sizes[*unknown] = extent / known;
      const auto given = rule.known.find(*unknown);
      if (group.size() == 1 && given != rule.known.end() && given->second != extent) {
        throw Error(ErrorCode::kIndivisible,
                    fmt::format("{}: dimension {} is axis '{}' of size {}, but the tensor has {}", where, dim,
                                *unknown, given->second, extent));
      }
    } else if (known != extent) {
      throw Error(ErrorCode::kIndivisible,
                  fmt::format("{}: dimension {} (size {}) does not factor into axes {} of sizes {}", where, dim,
                              extent, fmt::join(group, ", "), known));
    }
  }
  if (rule.stack) sizes[*rule.stack] = stack_count;
  return sizes;
}

// Per axis name: the dimension it belongs to and its stride in elements of that dimension.
struct Placement {
  size_t dim = 0;
  int64_t factor = 1;
};

std::map<std::string, Placement> place(const AxisGroups& groups, const AxisSizes& sizes) {
  std::map<std::string, Placement> placed;
  for (size_t dim = 0; dim < groups.size(); ++dim) {
    int64_t factor = 1;
    for (size_t k = groups[dim].size(); k-- > 0;) {
      placed[groups[dim][k]] = {dim, factor};
      factor = checked_mul(factor, sizes.at(groups[dim][k]), "axis sizes");
    }
  }
  return placed;
}

Shape shape_of(const AxisGroups& groups, const AxisSizes& sizes) {
  Shape shape;
  for (const auto& group : groups) {
    int64_t extent = 1;
    for (const std::string& axis : group) extent = checked_mul(extent, sizes.at(axis), "output shape");
    shape.push_back(extent);
  }
  return shape;
}

// The walk of one region: the output's axes in row-major order (a stack axis
// is fixed in a region and left out).
std::vector<FineAxis> fine_axes(const TensorMapRule& rule, const AxisSizes& sizes, const Shape& source_shape) {
  if (!rule.rearranged) return identity_axes(source_shape);
  std::vector<FineAxis> axes;
  const auto src = place(rule.from_axes, sizes);
  const auto out = place(rule.to_axes, sizes);
  for (const auto& group : rule.to_axes) {
    for (const std::string& axis : group) {
      const auto from = src.find(axis);
      if (from == src.end()) continue;  // the stack axis
      const Placement& to = out.at(axis);
      axes.push_back({sizes.at(axis), to.dim, to.factor, from->second.dim, from->second.factor});
    }
  }
  return axes;
}

DType output_dtype(const CompiledRule& rule, DType source, const ResolveOptions& options) {
  return cast_dtype(source, rule.rule->dtype ? rule.rule->dtype : options.dtype);
}

ResolvedTensor make_output(const CompiledRule& rule, const TensorSpec& source, std::string name, Shape shape,
                           const ResolveOptions& options) {
  ResolvedTensor tensor;
  tensor.out = {std::move(name), output_dtype(rule, source.dtype, options), safetensors::dims_of(shape)};
  tensor.source_dtype = source.dtype;
  tensor.rule = rule.rule->index;
  return tensor;
}

// A rule without a stack axis: each source gives one output, or one per index
// of its unstack axis.
void resolve_each(const CompiledRule& rule, std::span<const TensorSpec> sources, const std::vector<Match>& matches,
                  const ResolveOptions& options, std::vector<Pending>& pending) {
  const TensorMapRule& r = *rule.rule;
  for (const Match& match : matches) {
    const TensorSpec& source = sources[match.source];
    const Shape source_shape = safetensors::layout_shape(source);
    if (!r.rearranged) {
      ResolvedTensor tensor = make_output(rule, source, fill_name(rule.to, match.captures), source_shape, options);
      tensor.regions.push_back({match.source, Box::whole(source_shape), std::vector<int64_t>(source_shape.size(), 0),
                                fine_axes(r, {}, source_shape)});
      pending.push_back({match.source, 0, std::move(tensor)});
      continue;
    }
    const AxisSizes sizes = axis_sizes(rule, source, 0);
    const Shape shape = shape_of(r.to_axes, sizes);
    const std::vector<FineAxis> axes = fine_axes(r, sizes, source_shape);
    const int64_t count = rule.unstack ? sizes.at(*rule.unstack) : 1;
    const size_t unstack_dim = rule.unstack ? place(r.from_axes, sizes).at(*rule.unstack).dim : 0;
    for (int64_t index = 0; index < count; ++index) {
      Captures values = match.captures;
      std::vector<int64_t> origin(source.shape.size(), 0);
      if (rule.unstack) {
        values[*rule.unstack] = std::to_string(index);
        origin[unstack_dim] = index;
      }
      ResolvedTensor tensor = make_output(rule, source, fill_name(rule.to, values), shape, options);
      tensor.regions.push_back({match.source, Box::whole(shape), std::move(origin), axes});
      pending.push_back({match.source, index, std::move(tensor)});
    }
  }
}

// A rule with a stack axis: sources that agree on every other placeholder
// form one output, source i its slice i along the stack axis.
void resolve_stacks(const CompiledRule& rule, std::span<const TensorSpec> sources, const std::vector<Match>& matches,
                    const ResolveOptions& options, std::vector<Pending>& pending) {
  const TensorMapRule& r = *rule.rule;
  const std::string& axis = *rule.stack;
  std::map<Captures, std::map<int64_t, size_t>> groups;
  for (const Match& match : matches) {
    Captures rest = match.captures;
    const std::string digits = rest.at(axis);
    rest.erase(axis);
    if (digits.size() > 15) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}, {}: index {} along '{}' is too large",
                                                           describe(sources[match.source]), r.label(), digits, axis));
    }
    groups[rest][std::stoll(digits)] = match.source;
  }
  // A known size of the stack axis (e.g. the layer count of config.json) also
  // catches missing last indices, which the indices alone cannot show.
  const auto known_count = rule.known.find(axis);
  for (const auto& [captures, members] : groups) {
    const TensorSpec& first = sources[members.begin()->second];
    const int64_t count = known_count != rule.known.end() ? known_count->second : static_cast<int64_t>(members.size());
    if (known_count != rule.known.end() && members.rbegin()->first >= count) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: {} has index {} along '{}', whose size is {}", r.label(),
                              describe(sources[members.rbegin()->second]), members.rbegin()->first, axis, count));
    }
    for (int64_t index = 0; index < count; ++index) {
      const auto it = members.find(index);
      if (it == members.end()) {
        throw Error(ErrorCode::kMissingTensor,
                    fmt::format("{}: stacking {} tensors along '{}' needs indices 0..{}, but index {} is missing "
                                "(next to {})",
                                r.label(), count, axis, count - 1, index, describe(first)));
      }
      const TensorSpec& member = sources[it->second];
      if (member.dtype != first.dtype || member.shape != first.shape) {
        throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} and {} cannot be stacked along '{}'", r.label(),
                                                             describe(member), describe(first), axis));
      }
    }
    const AxisSizes sizes = axis_sizes(rule, first, count);
    const Shape shape = shape_of(r.to_axes, sizes);
    const size_t stack_dim = place(r.to_axes, sizes).at(axis).dim;
    const std::vector<FineAxis> axes = fine_axes(r, sizes, safetensors::layout_shape(first));
    ResolvedTensor tensor = make_output(rule, first, fill_name(rule.to, captures), shape, options);
    size_t first_source = members.begin()->second;
    for (const auto& [index, source] : members) {
      std::vector<int64_t> origin(shape.size(), 0), extent = shape;
      origin[stack_dim] = index;
      extent[stack_dim] = 1;
      tensor.regions.push_back({source, Box(origin, extent), std::vector<int64_t>(first.shape.size(), 0), axes});
      first_source = std::min(first_source, source);
    }
    pending.push_back({first_source, 0, std::move(tensor)});
  }
}

void check_unique_names(const std::vector<Pending>& pending, std::span<const TensorSpec> sources) {
  std::unordered_map<std::string_view, const ResolvedTensor*> seen;
  for (const Pending& p : pending) {
    const auto [it, inserted] = seen.emplace(p.tensor.out.name, &p.tensor);
    if (inserted) continue;
    const ResolvedTensor& other = *it->second;
    throw Error(ErrorCode::kDuplicateTensor,
                fmt::format("two outputs named '{}': from tensor '{}' (rule {}) and tensor '{}' (rule {})",
                            p.tensor.out.name, sources[other.regions.front().source].name, other.rule,
                            sources[p.tensor.regions.front().source].name, p.tensor.rule));
  }
}

}  // namespace

std::vector<FineAxis> identity_axes(const Shape& shape) {
  std::vector<FineAxis> axes;
  for (size_t dim = 0; dim < shape.size(); ++dim) axes.push_back({shape[dim], dim, 1, dim, 1});
  return axes;
}

const ResolvedTensor* ResolvedMap::find(std::string_view name) const {
  const auto it = std::find_if(outputs.begin(), outputs.end(), [&](const auto& t) { return t.out.name == name; });
  return it == outputs.end() ? nullptr : &*it;
}

std::vector<TensorSpec> ResolvedMap::output_specs() const {
  std::vector<TensorSpec> specs;
  specs.reserve(outputs.size());
  for (const ResolvedTensor& tensor : outputs) specs.push_back(tensor.out);
  return specs;
}

ResolvedMap resolve_tensor_map(const TensorMap& map, std::span<const TensorSpec> sources,
                               const ResolveOptions& options) {
  std::vector<CompiledRule> rules;
  rules.reserve(map.rules.size());
  for (const TensorMapRule& rule : map.rules) rules.push_back(compile(map, rule, options));

  std::vector<std::vector<Match>> matches(rules.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    bool matched = false;
    for (size_t r = 0; r < rules.size() && !matched; ++r) {
      Captures captures;
      if (!match_name(rules[r].from, sources[i].name, rules[r].stack, captures)) continue;
      if (dtype_bits(sources[i].dtype) < 8) {
        throw Error(ErrorCode::kUnsupported, fmt::format("{}, {}: sub-byte dtypes cannot be mapped", describe(sources[i]),
                                                         map.rules[r].label()));
      }
      matches[r].push_back({i, std::move(captures)});
      matched = true;
    }
    if (!matched && !options.skip_unmatched) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: no rule of the map matches it", describe(sources[i])));
    }
  }

  std::vector<Pending> pending;
  for (size_t r = 0; r < rules.size(); ++r) {
    const TensorMapRule& rule = map.rules[r];
    if (matches[r].empty()) {
      if (rule.optional || options.allow_unused_rules) continue;
      throw Error(ErrorCode::kMissingTensor, fmt::format("{}: matches no tensor (mark it \"optional\" if that is "
                                                         "expected)", rule.label()));
    }
    try {
      if (rules[r].stack) {
        resolve_stacks(rules[r], sources, matches[r], options, pending);
      } else {
        resolve_each(rules[r], sources, matches[r], options, pending);
      }
    } catch (const Error& e) {
      throw e.with_context("resolving the map");
    }
  }
  check_unique_names(pending, sources);
  std::stable_sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
    return std::tie(a.first_source, a.index) < std::tie(b.first_source, b.index);
  });

  ResolvedMap resolved;
  resolved.sources.assign(sources.begin(), sources.end());
  for (Pending& p : pending) resolved.outputs.push_back(std::move(p.tensor));
  return resolved;
}

}  // namespace reshard::pipelines_detail
