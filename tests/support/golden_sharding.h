// The golden NamedSharding cases of golden/jax_sharding.json, as plain values
// (no reshard types, so every suite can use them: the library and the CLI).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace reshard::testing {

// One device's expected slice ([start, stop) per dimension) and replica id.
struct GoldenDevice {
  int64_t id = 0;
  std::vector<std::pair<int64_t, int64_t>> index;
  int64_t replica = 0;
};

struct GoldenCase {
  std::string name;
  std::vector<std::pair<std::string, int64_t>> axes;
  std::vector<int64_t> devices;
  std::vector<std::vector<std::string>> spec;  // per dimension: {} None, {a} axis, {a, b} tuple
  std::vector<int64_t> shape;
  bool uneven = false;
  std::string error;  // error class ("indivisible", ...) for error cases, else empty
  std::vector<GoldenDevice> expected;
  std::optional<std::vector<int64_t>> shard_shape;

  // The layout as `reshard` flags: "x=4,y=2", "0,1,...", "None,(x,y)", "8,2".
  std::string mesh_flag() const;
  std::string devices_flag() const;
  std::string spec_flag() const;
  std::string shape_flag() const;
  // The spec in JAX's printed form: "P(None, ('x', 'y'))".
  std::string spec_jax() const;
};

// How GoogleTest prints a case in a failure: by its name.
inline void PrintTo(const GoldenCase& c, std::ostream* out) { *out << c.name; }

// Every case of RESHARD_SHARED_DIR/golden/jax_sharding.json; throws if the file
// is missing or malformed (so a broken checkout fails loudly, never passes empty).
const std::vector<GoldenCase>& golden_sharding_cases();

}  // namespace reshard::testing
