#include "reshard/layout/mesh.h"

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include <fmt/format.h>

#include "layout/checked.h"
#include "reshard/layout/error.h"

namespace reshard {

using layout_detail::checked_mul;

namespace {

[[noreturn]] void invalid_mesh(const std::string& message) {
  throw Error(ErrorCode::kInvalidMesh, "invalid mesh: " + message);
}

void validate_axes(const std::vector<MeshAxis>& axes) {
  std::unordered_set<std::string> names;
  for (const MeshAxis& axis : axes) {
    if (axis.name.empty()) invalid_mesh("an axis has an empty name");
    if (axis.size < 1) {
      invalid_mesh(fmt::format("axis '{}' has size {} (sizes must be at least 1)", axis.name, axis.size));
    }
    if (!names.insert(axis.name).second) invalid_mesh(fmt::format("axis '{}' appears twice", axis.name));
  }
}

}  // namespace

Mesh::Mesh(std::vector<MeshAxis> axes, std::vector<DeviceId> devices)
    : axes_(std::move(axes)), devices_(std::move(devices)) {
  validate_axes(axes_);
  int64_t expected = 1;
  for (const MeshAxis& axis : axes_) expected = checked_mul(expected, axis.size, "mesh size");
  if (static_cast<int64_t>(devices_.size()) != expected) {
    std::vector<std::string> sizes;
    for (const MeshAxis& a : axes_) sizes.push_back(fmt::format("{}={}", a.name, a.size));
    invalid_mesh(fmt::format("axes {} need {} devices but {} were given", fmt::join(sizes, ","),
                             expected, devices_.size()));
  }
  std::unordered_set<DeviceId> seen;
  for (DeviceId d : devices_) {
    if (d < 0) invalid_mesh(fmt::format("device id {} is negative", d));
    if (!seen.insert(d).second) invalid_mesh(fmt::format("device {} appears twice", d));
  }
}

Mesh Mesh::with_default_order(std::vector<MeshAxis> axes) {
  validate_axes(axes);
  int64_t count = 1;
  for (const MeshAxis& axis : axes) count = checked_mul(count, axis.size, "mesh size");
  std::vector<DeviceId> devices(static_cast<size_t>(count));
  std::iota(devices.begin(), devices.end(), DeviceId{0});
  return Mesh(std::move(axes), std::move(devices));
}

std::optional<size_t> Mesh::axis_index(std::string_view name) const {
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == name) return i;
  }
  return std::nullopt;
}

std::vector<int64_t> Mesh::coordinates(int64_t logical) const {
  std::vector<int64_t> coords(axes_.size());
  for (size_t a = axes_.size(); a-- > 0;) {
    coords[a] = logical % axes_[a].size;
    logical /= axes_[a].size;
  }
  return coords;
}

std::optional<int64_t> Mesh::logical_index_of(DeviceId device) const {
  const auto it = std::find(devices_.begin(), devices_.end(), device);
  if (it == devices_.end()) return std::nullopt;
  return it - devices_.begin();
}

std::string Mesh::to_string() const {
  std::vector<std::string> parts;
  for (const MeshAxis& a : axes_) parts.push_back(fmt::format("'{}': {}", a.name, a.size));
  bool default_order = true;
  for (size_t i = 0; i < devices_.size(); ++i) default_order &= devices_[i] == static_cast<DeviceId>(i);
  if (default_order) return fmt::format("Mesh({})", fmt::join(parts, ", "));
  return fmt::format("Mesh({}, devices=[{}])", fmt::join(parts, ", "), fmt::join(devices_, ","));
}

}  // namespace reshard
