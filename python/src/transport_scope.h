// How a binding runs a collective operation: over the transport the caller
// passed (an MPI transport, or one rank of an in-process group), or, when it
// passed None, over a fresh one-process group (the single-process default).
// The GIL is released while the operation runs.
#pragma once

#include <string>

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

template <typename Body>
auto with_transport(Transport* transport, const Topology& topology, Body&& body) {
  if (transport == nullptr) {
    check_one_process(topology);
    InProcessGroup group(1);  // a fresh group per call, so threads never share one
    nanobind::gil_scoped_release release;
    return body(group.transport(0));
  }
  check_transport_fits(*transport, topology);
  nanobind::gil_scoped_release release;
  return body(*transport);
}

}  // namespace reshard::python
