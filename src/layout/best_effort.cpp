#include "reshard/layout/best_effort.h"

#include <numeric>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard {

NamedSharding best_effort_sharding(const Shape& shape, const Mesh& mesh, std::string_view axis) {
  const std::optional<size_t> index = mesh.axis_index(axis);
  if (!index) {
    throw Error(ErrorCode::kUnknownAxis,
                fmt::format("best-effort sharding: mesh {} has no axis '{}'", mesh.to_string(), axis));
  }
  const int64_t size = mesh.axis_size(*index);
  std::vector<SpecEntry> entries(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] % size == 0) {
      entries[d] = {std::string(axis)};
      return NamedSharding(mesh, PartitionSpec(std::move(entries)));
    }
  }
  return NamedSharding(mesh, PartitionSpec());
}

NamedSharding best_effort_sharding(const Shape& shape, const std::vector<DeviceId>& devices) {
  if (devices.empty()) throw Error(ErrorCode::kInvalidArgument, "best-effort sharding needs a device");
  int64_t remaining = static_cast<int64_t>(devices.size());
  std::vector<int64_t> split(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 0;) {
    // gcd(0, n) = n: an empty dimension divides evenly over any count, as in Levanter.
    split[d] = std::gcd(shape[d], remaining);
    remaining /= split[d];
  }
  std::vector<MeshAxis> axes;
  std::vector<SpecEntry> entries(shape.size());
  if (remaining > 1) axes.push_back({"replica", remaining});
  for (size_t d = 0; d < shape.size(); ++d) {
    if (split[d] == 1) continue;
    axes.push_back({fmt::format("d{}", d), split[d]});
    entries[d] = {axes.back().name};
  }
  return NamedSharding(Mesh(std::move(axes), devices), PartitionSpec(std::move(entries)));
}

}  // namespace reshard
