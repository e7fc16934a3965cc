// How a binding runs a collective operation: over the transport the caller
// passed (an MPI transport, or one rank of an in-process group), or, when it
// passed None, over a fresh one-process group (the single-process default).
// The GIL is released while the operation runs.
#pragma once

#include <string>
#include <utility>

#include <nanobind/nanobind.h>

#include "reshard/execute/in_process_transport.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"
#include "reshard/layout/topology.h"

namespace reshard::python {

// Error(kUnsupported) unless `topology` has one process: what None allows.
void check_one_process(const Topology& topology);

// Error(kInvalidArgument) unless `transport` spans `topology`'s processes.
void check_transport_fits(const Transport& transport, const Topology& topology);

// Runs `body` over `transport`, or over a fresh one-process group when it is
// null, with the GIL released.
template <typename Body>
auto run_collective(Transport* transport, Body&& body) {
  if (transport == nullptr) {
    InProcessGroup group(1);  // a fresh group per call, so threads never share one
    nanobind::gil_scoped_release release;
    return body(group.transport(0));
  }
  nanobind::gil_scoped_release release;
  return body(*transport);
}

// The same, after checking that the transport (or None) fits `topology`.
template <typename Body>
auto with_transport(Transport* transport, const Topology& topology, Body&& body) {
  if (transport == nullptr) {
    check_one_process(topology);
  } else {
    check_transport_fits(*transport, topology);
  }
  return run_collective(transport, std::forward<Body>(body));
}

}  // namespace reshard::python
