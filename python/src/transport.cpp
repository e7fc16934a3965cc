// Bindings of transports: the abstract Transport that operations take, and
// InProcessGroup (processes as threads of this one, for tests and for
// programs that simulate a job). The MPI transport is in mpi.cpp, the TCP one
// in tcp.cpp.
#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bindings.h"
#include "transport_scope.h"

namespace reshard::python {

void check_one_process(const Topology& topology) {
  if (topology.num_processes() != 1) {
    throw Error(ErrorCode::kUnsupported, "without a transport this operation runs in one process, but the topology has " +
                                             std::to_string(topology.num_processes()) +
                                             " processes (pass transport=, e.g. reshard.transport())");
  }
}

void check_transport_fits(const Transport& transport, const Topology& topology) {
  if (transport.size() != topology.num_processes()) {
    throw Error(ErrorCode::kInvalidArgument, "the transport has " + std::to_string(transport.size()) +
                                                 " processes, the topology " +
                                                 std::to_string(topology.num_processes()));
  }
}

namespace {

// What a rank's Python body raised, made fit for InProcessGroup::run: a
// PeerFailedError becomes the C++ kPeerFailed it stands for (so the rank that
// failed first is the one reported), anything else keeps its Python type and
// traceback and gains a note naming the rank.
[[noreturn]] void rethrow_rank_failure(nb::python_error& error, int rank) {
  const nb::handle value = error.value();
  if (nb::hasattr(value, "code") && nb::str(value.attr("code")).equal(nb::str("peer_failed"))) {
    throw Error(ErrorCode::kPeerFailed, nb::str(value).c_str());
  }
  if (nb::hasattr(value, "add_note")) {
    value.attr("add_note")(nb::str(fmt::format("(raised on rank {} of the InProcessGroup)", rank).c_str()));
  }
  // The group describes each failure to the others without the GIL: what()
  // formats the message now, while this thread holds it.
  (void)error.what();
  throw;
}

// group.run(fn): fn(transport) on one thread per rank, each holding the GIL
// only while Python runs; the results in rank order.
nb::list run_group(InProcessGroup& group, const nb::callable& body) {
  std::vector<nb::object> results(static_cast<size_t>(group.size()));
  {
    nb::gil_scoped_release release;
    group.run([&](Transport& transport) {
      nb::gil_scoped_acquire acquire;
      try {
        results[static_cast<size_t>(transport.rank())] = body(nb::cast(&transport, nb::rv_policy::reference));
      } catch (nb::python_error& error) {
        rethrow_rank_failure(error, transport.rank());
      }
    });
  }
  nb::list out;
  for (const nb::object& result : results) out.append(result);
  return out;
}

nb::list all_gather_bytes(Transport& transport, nb::bytes local) {
  const std::span<const std::byte> mine(static_cast<const std::byte*>(static_cast<const void*>(local.c_str())),
                                        local.size());
  std::vector<std::vector<std::byte>> gathered;
  {
    nb::gil_scoped_release released;
    gathered = transport.all_gather(mine);
  }
  nb::list out;
  for (const auto& bytes : gathered) {
    out.append(nb::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  return out;
}

}  // namespace

void bind_transport(nb::module_& m) {
  nb::class_<Transport>(m, "Transport",
                        "Moves bytes between the processes of a job (reshard.transport(): MPI or TCP, or one\n"
                        "rank of an InProcessGroup). Operations taking transport= are collective over it.")
      .def_prop_ro("rank", &Transport::rank, "This process's rank.")
      .def_prop_ro("size", &Transport::size, "The number of processes.")
      .def_prop_ro("bytes_sent", [](const Transport& t) { return t.counters().bytes_sent; },
                   "Payload bytes this process has sent so far.")
      .def_prop_ro("bytes_received", [](const Transport& t) { return t.counters().bytes_received; },
                   "Payload bytes this process has received so far.")
      .def("barrier", &Transport::barrier, nb::call_guard<nb::gil_scoped_release>(),
           "Returns once every process has entered it.")
      .def("all_gather", &all_gather_bytes, nb::arg("local"),
           "Collective: every process's `local` bytes, as a list indexed by rank (small\n"
           "metadata only: how processes agree before an operation; a silent peer fails it\n"
           "after the timeout).")
      .def_prop_rw("timeout", [](const Transport& t) { return static_cast<double>(t.timeout().count()) / 1000.0; },
                   [](Transport& t, double seconds) {
                     t.set_timeout(std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0)));
                   }, "Seconds a peer may stay silent before waits on it fail (TransportTimeoutError).");

  nb::class_<InProcessGroup>(m, "InProcessGroup",
                             "A job whose processes are threads of this one: transport(rank) is each thread's.")
      .def(nb::init<int>(), nb::arg("size"), "A group of `size` processes.")
      .def_prop_ro("size", &InProcessGroup::size, "The number of processes.")
      .def("transport", &InProcessGroup::transport, nb::arg("rank"), nb::rv_policy::reference_internal,
           "The transport of process `rank` (lives as long as the group).")
      .def("run", &run_group, nb::arg("body"),
           "Calls body(transport) on one thread per process, each with its own transport, and returns\n"
           "the results in rank order. A process that raises fails the group at once: the others' waits\n"
           "on it raise PeerFailedError instead of waiting out the timeout, and run raises what the\n"
           "first failing process raised, noting its rank (a reshard error names it in its message).\n"
           "The group stays failed: run again on a new one.");
}

}  // namespace reshard::python
