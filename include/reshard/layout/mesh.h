// Mesh: an N-d array of distinct devices with a name per axis.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/layout/topology.h"

namespace reshard {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
  bool operator==(const MeshAxis&) const = default;
};

// The device list is in row-major order of the mesh: position i is logical
// device i. The order is part of the mesh, as in JAX.
class Mesh {
 public:
  Mesh() = default;
  // Throws Error(kInvalidMesh) naming the problem: empty or repeated axis
  // names, sizes < 1, a device count that is not the product of the sizes,
  // repeated or negative device ids.
  Mesh(std::vector<MeshAxis> axes, std::vector<DeviceId> devices);

  // Devices 0..n-1 in order.
  static Mesh with_default_order(std::vector<MeshAxis> axes);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  const std::vector<DeviceId>& devices() const { return devices_; }
  size_t num_axes() const { return axes_.size(); }
  int64_t size() const { return static_cast<int64_t>(devices_.size()); }

  // Position of the axis called `name`, or nullopt.
  std::optional<size_t> axis_index(std::string_view name) const;
  int64_t axis_size(size_t axis) const { return axes_[axis].size; }

  // Mesh coordinate of logical device `logical` (one entry per axis).
  std::vector<int64_t> coordinates(int64_t logical) const;

  // Logical position of device id, or nullopt if the mesh does not have it.
  std::optional<int64_t> logical_index_of(DeviceId device) const;

  // "Mesh('data': 4, 'model': 4)" with the device list when not 0..n-1.
  std::string to_string() const;

  bool operator==(const Mesh&) const = default;

 private:
  std::vector<MeshAxis> axes_;
  std::vector<DeviceId> devices_;
};

}  // namespace reshard
