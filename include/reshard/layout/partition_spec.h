// PartitionSpec: how each array dimension is split over mesh axes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace reshard {

class Mesh;

// The axes that split one dimension, first axis most significant. Empty means
// not partitioned (None); one name is a single axis; several are a tuple.
using SpecEntry = std::vector<std::string>;

class PartitionSpec {
 public:
  PartitionSpec() = default;
  // Entries are normalised on construction: an empty tuple is None, a
  // one-element tuple is that axis (the same entry either way here).
  explicit PartitionSpec(std::vector<SpecEntry> entries);

  // Parses either syntax of the command line: `None,data,(a,b)` (with `_` for None)
  // or JAX's printed form `P('data', None)` / `PartitionSpec(('a','b'),)`.
  // An empty string or `P()` is fully replicated. Throws Error(kParse) naming
  // the bad part, Error(kNestedTuple) for a tuple inside a tuple.
  static PartitionSpec parse(std::string_view text);

  const std::vector<SpecEntry>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }

  // Every axis named, in order of appearance.
  std::vector<std::string> axis_names() const;

  // Checks the spec against a mesh and an array rank, in JAX's order: a nested
  // or repeated axis (kDuplicateAxis), an axis the mesh lacks (kUnknownAxis),
  // more entries than the rank (kRank). Messages name the spec.
  void validate(const Mesh& mesh, size_t rank) const;

  // JAX's repr: "PartitionSpec('data', None)", "PartitionSpec(('a', 'b'),)".
  std::string to_string() const;

  // Specs equal after dropping trailing Nones (as JAX compares them).
  bool operator==(const PartitionSpec& other) const;

 private:
  std::vector<SpecEntry> entries_;
};

}  // namespace reshard
