// The layout a converted checkpoint is saved in: per tensor, a partition
// spec on one mesh, chosen by name patterns or by best-effort sharding.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/layout/mesh.h"
#include "reshard/layout/partition_spec.h"
#include "reshard/layout/sharding.h"
#include "reshard/layout/topology.h"

namespace reshard {

// One line of a rules file: tensors whose name matches `pattern` (a shell
// glob: `*`, `?`, `[...]`) get `spec`.
struct LayoutRule {
  std::string pattern;
  PartitionSpec spec;
};

// Parses a rules file: one rule per line, `PATTERN SPEC` (the spec is the rest
// of the line, in --spec's syntax: `model,None`, `P('model', None)`, or `_`
// / `P()` for replicated); blank lines and `#` comments are skipped.
// Error(kParse) naming `where` and the line.
std::vector<LayoutRule> parse_layout_rules(std::string_view text, std::string_view where);

// How every tensor of a conversion is laid out.
struct CheckpointLayout {
  Mesh mesh;
  Topology topology;
  std::vector<LayoutRule> rules;                // the first matching rule wins
  std::optional<std::string> best_effort_axis;  // for the tensors no rule lays out
  bool strict = false;                          // a matching rule that does not fit the rank is an error

  // The sharding of tensor `name` of `shape`: the first matching rule whose
  // spec fits the tensor's rank (a 1-D norm weight passes over a 2-D rule),
  // else best-effort sharding over `best_effort_axis` when set
  // (Error(kUnknownAxis) when the mesh lacks it), else replicated. With
  // `strict`, a matching rule longer than the rank is Error(kRank) naming the
  // tensor and the rule. The chosen spec is validated against the shape
  // (kIndivisible...).
  NamedSharding sharding_for(std::string_view name, const Shape& shape) const;
};

}  // namespace reshard
