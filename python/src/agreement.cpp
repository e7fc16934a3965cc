// _agreed: failing together from Python with the pipelines' own agreement
// (pipelines/common/agreement.h), so that a Python collective call and a C++
// pipeline exchange the same report and fail with the same PeerFailedError.
#include "pipelines/common/agreement.h"

#include <exception>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "bindings.h"

namespace reshard::python {
namespace {

namespace agreement = reshard::pipelines_detail;

// A report travels as small metadata: long enough to name a tensor and its
// layout, short enough to stay small.
constexpr size_t kMaxMessage = 2000;

// "TypeName: message", as Python prints an exception (what() of a
// python_error carries a traceback, too long and too local to send).
std::string describe(const nb::python_error& error) {
  const std::string type = nb::cast<std::string>(nb::handle(error.type()).attr("__name__"));
  std::string text = type + ": " + nb::cast<std::string>(nb::str(error.value()));
  if (text.empty()) text = "unknown error";
  if (text.size() > kMaxMessage) text.resize(kMaxMessage);
  return text;
}

nb::object agreed(Transport* transport, const nb::callable& prepare, const std::string& what) {
  if (transport == nullptr || transport->size() == 1) return prepare();
  nb::object result;
  agreement::Failure failure;
  try {
    result = prepare();
  } catch (nb::python_error& e) {
    // Only Exceptions are agreed on, as in Python's own `except Exception`:
    // an interrupt (KeyboardInterrupt, SystemExit) leaves at once.
    if (!e.matches(PyExc_Exception)) throw;
    failure.message = describe(e);
    failure.error = std::current_exception();
  }
  std::vector<agreement::Report> reports;
  {
    nb::gil_scoped_release released;
    reports = agreement::exchange_reports(*transport, {failure.message, {}});
  }
  agreement::require_all_succeeded(reports, transport->rank(), what, failure.error);
  return result;
}

}  // namespace

void bind_agreement(nb::module_& m) {
  m.def("_agreed", &agreed, nb::arg("transport").none(), nb::arg("prepare"), nb::arg("what"),
        "Runs `prepare()`, this process's local part of a collective call (no communication\n"
        "in it), then agrees on its outcome with every process of `transport`: if it raised\n"
        "anywhere, every process raises. A process whose own preparation failed raises its own\n"
        "error; the others raise PeerFailedError naming, in the context `what`, the first\n"
        "failed process and its error. One small all_gather per call; none without a\n"
        "transport or with one process.");
}

}  // namespace reshard::python
