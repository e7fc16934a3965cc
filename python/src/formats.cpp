#include "bindings.h"
namespace reshard::python {
void bind_formats(nb::module_&) {}
}  // namespace reshard::python
