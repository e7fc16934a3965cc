// Bindings of the plan layer: plan(...) and its transfers and byte counts.
#include <string>

#include <fmt/format.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "reshard/layout/dtype.h"
#include "reshard/plan/planner.h"

namespace reshard::python {
namespace {

Plan make_plan_from_python(nb::handle shape, const std::string& dtype, const NamedSharding& src,
                           const NamedSharding& dst, const Topology& topology, const PlanOptions& options) {
  PlanKey key{shape_from_python(shape), dtype_from_string(dtype), src, dst, topology};
  nb::gil_scoped_release release;
  return make_plan(key, options);
}

nb::dict stats_to_dict(const PlanStats& s) {
  nb::dict out;
  out["bytes_total"] = s.bytes_total;
  out["bytes_same_device"] = s.bytes_same_device;
  out["bytes_same_process"] = s.bytes_same_process;
  out["bytes_cross_process"] = s.bytes_cross_process;
  out["max_process_send_bytes"] = s.max_process_send_bytes;
  out["bytes_fan_out"] = s.bytes_fan_out;
  return out;
}

}  // namespace

void bind_plan(nb::module_& m) {
  nb::class_<Transfer>(m, "Transfer", "Copy `box` (global coordinates) from source device `src` to target device `dst`.")
      .def_ro("src", &Transfer::src, "Source device id.")
      .def_ro("dst", &Transfer::dst, "Target device id.")
      .def_ro("box", &Transfer::box, "The elements moved, in global coordinates.")
      .def_ro("stage", &Transfer::stage,
              "0: from a source-layout holder; 1: after stage 0, a copy within one process from a target device "
              "whose stage-0 transfers brought the box in (so it crosses into the process once).")
      .def("__eq__", [](const Transfer& a, const Transfer& b) { return a == b; }, nb::is_operator())
      .def("__eq__", [](const Transfer&, nb::handle) { return false; })
      .def("__repr__", [](const Transfer& t) {
        return fmt::format("Transfer(src={}, dst={}, box={}, stage={})", t.src, t.dst, t.box.to_string(), t.stage);
      });

  nb::class_<PlanStats>(m, "PlanStats", "Byte counts of a plan (as `reshard plan --json`).")
      .def_ro("bytes_total", &PlanStats::bytes_total, "Bytes every target device receives, in all.")
      .def_ro("bytes_same_device", &PlanStats::bytes_same_device, "Bytes copied within one device.")
      .def_ro("bytes_same_process", &PlanStats::bytes_same_process, "Bytes between devices of one process.")
      .def_ro("bytes_cross_process", &PlanStats::bytes_cross_process, "Bytes between processes.")
      .def_ro("max_process_send_bytes", &PlanStats::max_process_send_bytes,
              "The most cross-process bytes any one process sends.")
      .def_ro("bytes_fan_out", &PlanStats::bytes_fan_out,
              "Bytes of stage-1 copies (within a process, from a target device that received them in stage 0).")
      .def("to_dict", &stats_to_dict, nb::sig("def to_dict(self) -> dict[str, int]"), "The counts as a dict.")
      .def("__eq__", [](const PlanStats& a, const PlanStats& b) { return a == b; }, nb::is_operator())
      .def("__eq__", [](const PlanStats&, nb::handle) { return false; })
      .def("__repr__", [](const PlanStats& s) { return "PlanStats(" + nb::cast<std::string>(nb::repr(stats_to_dict(s))) + ")"; });

  nb::class_<PlanOptions>(m, "PlanOptions", "How the planner may go beyond each target device fetching its own slice.")
      .def(
          "__init__",
          [](PlanOptions* self, bool fan_out, bool balance_senders) {
            new (self) PlanOptions{.fan_out = fan_out, .balance_senders = balance_senders};
          },
          nb::kw_only(), nb::arg("fan_out") = PlanOptions{}.fan_out,
          nb::arg("balance_senders") = PlanOptions{}.balance_senders, "The defaults: fan out and balance senders.")
      .def_rw("fan_out", &PlanOptions::fan_out,
              "A remote piece several devices of one process need crosses into it once; the others copy it (stage 1).")
      .def_rw("balance_senders", &PlanOptions::balance_senders,
              "A piece several processes hold is split over them so the largest sender sends the least.")
      .def("__repr__", [](nb::handle self) { return keyword_repr(self, {"fan_out", "balance_senders"}); });

  nb::class_<Plan>(m, "Plan", "The immutable list of transfers that builds a target layout from a source.")
      .def_prop_ro("shape", [](const Plan& p) { return shape_to_python(p.key().shape); },
                   nb::for_getter(nb::sig("def shape(self) -> tuple[int, ...]")), "The array's global shape.")
      .def_prop_ro("dtype", [](const Plan& p) { return std::string(dtype_name(p.key().dtype)); },
                   "The element type's safetensors name.")
      .def_prop_ro("src", [](const Plan& p) { return p.key().src; }, "The source sharding.")
      .def_prop_ro("dst", [](const Plan& p) { return p.key().dst; }, "The target sharding.")
      .def_prop_ro("topology", [](const Plan& p) { return p.key().topology; }, "The job's topology.")
      .def_prop_ro("transfers", &Plan::transfers, "Every transfer, in target mesh order then box order.")
      .def_prop_ro("stats", &Plan::stats, "The plan's byte counts.")
      .def("__len__", [](const Plan& p) { return p.transfers().size(); })
      .def("validate", &Plan::validate, nb::call_guard<nb::gil_scoped_release>(),
           "Checks every target element is covered once by a holder (InvalidPlanError otherwise).")
      .def("__eq__", [](const Plan& a, const Plan& b) { return a == b; }, nb::is_operator())
      .def("__eq__", [](const Plan&, nb::handle) { return false; })
      .def("__repr__", [](const Plan& p) {
        return fmt::format("Plan(shape=({}), dtype={}, transfers={}, bytes_total={})", fmt::join(p.key().shape, ", "),
                           dtype_name(p.key().dtype), p.transfers().size(), p.stats().bytes_total);
      });

  m.def("_plan", &make_plan_from_python, nb::arg("shape"), nb::arg("dtype"), nb::arg("src"), nb::arg("dst"),
        nb::arg("topology"), nb::arg("options"),
        nb::sig("def _plan(shape: collections.abc.Sequence[int], dtype: str, src: NamedSharding, dst: NamedSharding, "
                "topology: Topology, options: PlanOptions) -> Plan"),
        "The plan from `src` to `dst` for an array of `shape` and `dtype` (a safetensors name).");
}

}  // namespace reshard::python
