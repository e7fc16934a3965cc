// Bindings of the MPI transport, when the extension is built with MPI
// (RESHARD_PYTHON_WITH_MPI): the session (MPI's lifetime) and transports over
// MPI_COMM_WORLD or a communicator the caller has (an mpi4py one's handle).
// A transport can be closed before the interpreter exits, so that reshard.mpi
// can finalise MPI at exit whatever Python still holds: a Python object's
// lifetime is not the caller's to choose, and MPI_Finalize must come after
// every transport is gone and before the process ends.
#include "bindings.h"
#include "forwarding_transport.h"

#if RESHARD_PYTHON_WITH_MPI

#include <dlfcn.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <optional>
#include <string>
#include <type_traits>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "reshard/mpi.h"

namespace reshard::python {
namespace {

class ClosableMpiTransport;

// Every open transport, so that ending the session closes them first
// (MPI_Finalize with a transport's heartbeat thread still in MPI is fatal).
// Touched with the GIL held, or from the GIL-less close, under the lock.
struct OpenTransports {
  std::mutex lock;
  std::set<ClosableMpiTransport*> open;
};
OpenTransports& open_transports() {
  static OpenTransports registry;
  return registry;
}

// An MpiTransport that can be closed: after close() every use is
// Error(kTransport), and the MPI resources are already released.
class ClosableMpiTransport final : public ForwardingTransport {
 public:
  explicit ClosableMpiTransport(std::unique_ptr<MpiTransport> inner) : inner_(std::move(inner)) {
    const std::lock_guard guard(open_transports().lock);
    open_transports().open.insert(this);
  }
  // Python drops its transport with the GIL held; the MPI transport's thread
  // may need the GIL to release memory a failed transfer left in MPI's hands
  // (a numpy array's), so the GIL is let go while it is joined.
  ~ClosableMpiTransport() override {
    {
      const std::lock_guard guard(open_transports().lock);
      open_transports().open.erase(this);
    }
    if (inner_ && nb::is_alive() && PyGILState_Check() != 0) {
      nb::gil_scoped_release release;
      inner_.reset();
    }
  }
  ClosableMpiTransport(const ClosableMpiTransport&) = delete;
  ClosableMpiTransport& operator=(const ClosableMpiTransport&) = delete;

  void close() { inner_.reset(); }
  bool closed() const { return inner_ == nullptr; }

  // Closes every open transport (before MPI_Finalize).
  static void close_all() {
    const std::lock_guard guard(open_transports().lock);
    for (ClosableMpiTransport* t : open_transports().open) t->close();
  }

 private:
  Transport& target() const override {
    if (!inner_) throw Error(ErrorCode::kTransport, "this MPI transport was closed");
    return *inner_;
  }
  std::unique_ptr<MpiTransport> inner_;
};

// The interpreter loads extensions with RTLD_LOCAL; Open MPI's plugins,
// loaded later by MPI_Init, expect libmpi's symbols to be global (mpi4py
// does the same promotion). RTLD_NOLOAD: only the library already linked.
void promote_libmpi_to_global() {
  for (const char* name : {"libmpi.so.40", "libmpi.so.12", "libmpi.so"}) {
    if (dlopen(name, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) != nullptr) return;
  }
}

// A communicator handle as mpi4py's MPI._handleof gives it: a pointer in
// Open MPI, an int in MPICH (a template, so only the right cast compiles).
template <typename Comm>
Comm comm_from_integer(uintptr_t handle) {
  if constexpr (std::is_pointer_v<Comm>) {
    return reinterpret_cast<Comm>(handle);
  } else {
    return static_cast<Comm>(handle);
  }
}

MPI_Comm comm_from_handle(std::optional<uintptr_t> handle) {
  return handle ? comm_from_integer<MPI_Comm>(*handle) : MPI_COMM_WORLD;
}

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

std::unique_ptr<ClosableMpiTransport> make_transport(std::optional<uintptr_t> comm, size_t segment_bytes,
                                                     size_t max_bytes_in_flight, double timeout_seconds) {
  MpiTransportOptions options;
  options.segment_bytes = segment_bytes;
  options.max_bytes_in_flight = max_bytes_in_flight;
  options.timeout = milliseconds(timeout_seconds);
  // Building a communicator is collective: with a silent member it would never
  // end. (Not refused in the C++ library: there a peer merely slow past the
  // timeout may build the next transport with the others, as its tests do.)
  if (MpiSession::peer_went_silent()) {
    throw Error(ErrorCode::kPeerFailed,
                "cannot make a new MPI transport: this process gave up on a peer that went silent, and MPI cannot "
                "build a communicator without it (end the job and start it again)");
  }
  const MPI_Comm parent = comm_from_handle(comm);
  nb::gil_scoped_release release;  // collective: waits for the other processes
  return std::make_unique<ClosableMpiTransport>(std::make_unique<MpiTransport>(parent, options));
}

// The process's one session: Python objects die in no order the program
// controls, so the session is held here and ended explicitly (at exit).
std::unique_ptr<MpiSession>& session() {
  static std::unique_ptr<MpiSession> the_session;
  return the_session;
}

void init_session(double peer_timeout) {
  if (session()) return;
  promote_libmpi_to_global();
  session() = std::make_unique<MpiSession>(MpiSessionOptions{milliseconds(peer_timeout)});
}

}  // namespace

void after_transport_failure() {
  if (!session() || !MpiSession::gave_up_on_a_peer()) return;
  static bool armed = false;
  register_exit_handler_once(armed, "reshard.mpi", "_exit_if_given_up");
}

void bind_mpi(nb::module_& m) {
  m.attr("_mpi_available") = true;
  m.attr("DEFAULT_MPI_SEGMENT_BYTES") = MpiTransportOptions{}.segment_bytes;
  m.attr("DEFAULT_MPI_BYTES_IN_FLIGHT") = MpiTransportOptions{}.max_bytes_in_flight;
  m.def("_launched_by_mpi", &launched_by_mpi, "Whether an MPI launcher (mpirun, srun) started this process.");
  m.def("_mpi_init", &init_session, nb::arg("peer_timeout"),
        "Initialises MPI (unless already initialised) for the process, once.");
  m.def("_mpi_finalize", [] {
    ClosableMpiTransport::close_all();
    session().reset();
  }, nb::call_guard<nb::gil_scoped_release>(),
        "Closes every MPI transport, then ends the session (MPI_Finalize if it initialised MPI).");
  m.def("_mpi_gave_up", &MpiSession::gave_up_on_a_peer,
        "Whether a transport gave up on a peer (silent or failed) with none built since.");
  m.def("_mpi_owns", [] { return session() != nullptr && session()->owns_mpi(); },
        "Whether the session initialised MPI (and so finalises it).");
  m.def("_mpi_thread_level", [] { return session() ? session()->thread_level() : -1; },
        "The thread level MPI provides (-1 without a session).");
  m.def("_mpi_world_rank", &MpiSession::world_rank, "This process's rank in MPI_COMM_WORLD.");
  m.def("_mpi_world_size", &MpiSession::world_size, "The number of processes in MPI_COMM_WORLD.");
  nb::class_<ClosableMpiTransport, Transport>(m, "_MpiTransport", "The transport between MPI processes.")
      .def("close", &ClosableMpiTransport::close, nb::call_guard<nb::gil_scoped_release>(),
           "Releases the transport's MPI resources; using it afterwards is a TransportError.")
      .def_prop_ro("closed", &ClosableMpiTransport::closed, "Whether close() was called.")
      .def_prop_ro("kind", [](const ClosableMpiTransport&) { return "mpi"; }, "\"mpi\".")
      .def_prop_ro("rendezvous", [](const ClosableMpiTransport&) { return "mpirun"; },
                   "How the processes met: \"mpirun\" (an MPI launcher).");
  m.def("_mpi_transport", &make_transport, nb::arg("comm").none(), nb::arg("segment_bytes"),
        nb::arg("max_bytes_in_flight"), nb::arg("timeout"),
        "A transport over MPI_COMM_WORLD, or the communicator of handle `comm` (collective).");
}

}  // namespace reshard::python

#else

namespace reshard::python {

void bind_mpi(nb::module_& m) { m.attr("_mpi_available") = false; }

void after_transport_failure() {}

}  // namespace reshard::python

#endif
