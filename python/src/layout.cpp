// The layout layer's bindings, in JAX's idiom: one file per concept
// (layout_mesh.cpp, layout_spec.cpp, layout_sharding.cpp, layout_values.cpp).
#include "bindings.h"

namespace reshard::python {

void bind_layout(nb::module_& m) {
  bind_dtypes(m);
  bind_topology(m);
  bind_box(m);
  bind_mesh(m);
  bind_partition_spec(m);
  bind_named_sharding(m);
}

}  // namespace reshard::python
