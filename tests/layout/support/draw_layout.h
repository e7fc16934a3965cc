// draw_sharding of a NamedSharding on a default-order mesh, for tests.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/layout/sharding.h"
#include "reshard/layout/sharding_picture.h"

namespace reshard::testing {

struct Drawn {
  std::optional<std::string> text;
  std::vector<Box> boxes;
  std::vector<DeviceId> devices;
};

Drawn draw(std::vector<MeshAxis> axes, std::string_view spec, const Shape& shape, bool uneven = false,
           const PictureStyle& style = {});

}  // namespace reshard::testing
