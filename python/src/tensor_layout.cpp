// reshard._core._TensorLayout: the sharding convert and import give a tensor
// by its name and shape (CheckpointLayout: the first matching glob rule that
// fits its rank, else best effort over an axis, else replicated), for the
// Python code that lays tensors out itself (reshard.orbax), so that every
// entry point follows the one set of rules.
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/layout_rules.h"

namespace reshard::python {
namespace {

void init_layout(CheckpointLayout* self, const Mesh& mesh, const Topology& topology, nb::handle rules,
                 std::optional<std::string> best_effort, bool strict) {
  // An axis the mesh lacks is the argument's mistake: said once, here, not per tensor.
  if (best_effort && !mesh.axis_index(*best_effort)) {
    throw Error(ErrorCode::kUnknownAxis,
                fmt::format("best_effort: the mesh {} has no axis '{}'", mesh.to_string(), *best_effort));
  }
  new (self) CheckpointLayout{mesh, topology, rules_from_python(rules), std::move(best_effort), strict};
}

}  // namespace

void bind_tensor_layout(nb::module_& m) {
  nb::class_<CheckpointLayout>(m, "_TensorLayout",
                               "Tensors laid out on a mesh by glob rules, then best effort, as convert and import "
                               "lay them out.")
      .def("__init__", &init_layout, nb::arg("mesh"), nb::arg("topology"), nb::arg("rules").none(),
           nb::arg("best_effort").none(), nb::arg("strict"),
           nb::sig("def __init__(self, mesh: Mesh, topology: Topology, "
                   "rules: str | collections.abc.Sequence[tuple[str, PartitionSpec]] | None, "
                   "best_effort: str | None, strict: bool) -> None"),
           "`rules`: a rules file's text or (glob, PartitionSpec) pairs; `best_effort`: the axis for the "
           "tensors no rule lays out.")
      .def(
          "sharding_for",
          [](const CheckpointLayout& layout, const std::string& name, nb::handle shape) {
            return layout.sharding_for(name, shape_from_python(shape));
          },
          nb::arg("name"), nb::arg("shape"),
          nb::sig("def sharding_for(self, name: str, shape: collections.abc.Sequence[int]) -> NamedSharding"),
          "The first matching rule that fits the tensor's rank, else best effort, else replicated; errors name "
          "the tensor.");
}

}  // namespace reshard::python
