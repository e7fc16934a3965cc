#include "draw_layout.h"

namespace reshard::testing {

Drawn draw(std::vector<MeshAxis> axes, std::string_view spec, const Shape& shape, bool uneven,
           const PictureStyle& style) {
  const NamedSharding s(Mesh::with_default_order(std::move(axes)), PartitionSpec::parse(spec), MemoryKind::kDevice,
                        uneven);
  Drawn d;
  d.boxes = s.index_domains(shape);
  d.devices = s.mesh().devices();
  d.text = draw_sharding(shape, d.boxes, d.devices, style);
  return d;
}

}  // namespace reshard::testing
