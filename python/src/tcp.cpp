// Bindings of the TCP transport (jobs that MPI did not start) and of the
// launcher chooser, so that Python picks a job's transport by the same rules
// as the command line. Transports made here carry what made them (`kind`,
// `rendezvous`), for reshard.transport() to report.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>

#include "bindings.h"
#include "forwarding_transport.h"
#include "reshard/execute/in_process_transport.h"
#include "reshard/execute/tcp_transport.h"
#include "reshard/layout/error.h"
#include "execute/launcher_env.h"

namespace reshard::python {
namespace {

using execute_detail::choose_launcher;
using execute_detail::LauncherChoice;
using execute_detail::parse_transport_kind;
using execute_detail::process_env;
using execute_detail::transport_kind_name;

#if RESHARD_PYTHON_WITH_MPI
constexpr bool kMpiBuilt = true;
#else
constexpr bool kMpiBuilt = false;
#endif

// A transport and the words that say how it was made: "tcp" or "none", and
// the rendezvous ("jax", "torchrun", "explicit", "single", ...). Owns it (and,
// for a job of one, the one-process group it belongs to).
class LabeledTransport final : public ForwardingTransport {
 public:
  LabeledTransport(std::unique_ptr<Transport> inner, std::string kind, std::string rendezvous)
      : inner_(std::move(inner)), kind_(std::move(kind)), rendezvous_(std::move(rendezvous)) {}
  LabeledTransport(std::unique_ptr<InProcessGroup> group, std::string rendezvous)
      : group_(std::move(group)), kind_("none"), rendezvous_(std::move(rendezvous)) {}
  // The TCP transport joins its progress thread as it goes; Python drops it
  // with the GIL held, and nothing it waits for needs the GIL, but a wait of
  // seconds should not stop every other Python thread.
  ~LabeledTransport() override {
    if (inner_ && nb::is_alive() && PyGILState_Check() != 0) {
      nb::gil_scoped_release release;
      inner_.reset();
    }
  }
  LabeledTransport(const LabeledTransport&) = delete;
  LabeledTransport& operator=(const LabeledTransport&) = delete;

  const std::string& kind() const { return kind_; }
  const std::string& rendezvous() const { return rendezvous_; }
  std::optional<std::string> label_of(int rank) const {
    if (const auto* tcp = dynamic_cast<const TcpTransport*>(inner_.get())) return tcp->label_of(rank);
    return std::nullopt;
  }

 private:
  Transport& target() const override { return inner_ ? *inner_ : group_->transport(0); }

  std::unique_ptr<Transport> inner_;
  std::unique_ptr<InProcessGroup> group_;
  std::string kind_;
  std::string rendezvous_;
};

std::unique_ptr<LabeledTransport> make_tcp_transport(int rank, int size, const std::string& coordinator,
                                                     const std::string& job_token, const std::string& bind_address,
                                                     double timeout_seconds, std::optional<nb::callable> on_listening,
                                                     const std::string& rendezvous) {
  TcpTransportOptions options;
  options.rank = rank;
  options.size = size;
  options.coordinator = coordinator;
  options.job_token = job_token;
  options.bind_address = bind_address;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000.0));
  if (on_listening) {
    // A handle, not an owning object: the caller's argument outlives the
    // constructor, and copies of the function are made without the GIL.
    const nb::handle callback = *on_listening;
    options.on_listening = [callback](const std::string& address) {
      nb::gil_scoped_acquire acquire;
      try {
        callback(address);
      } catch (nb::python_error& error) {
        throw Error(ErrorCode::kTransport, std::string("on_listening raised: ") + error.what());
      }
    };
  }
  std::unique_ptr<TcpTransport> tcp;
  {
    nb::gil_scoped_release release;  // collective: waits for the other processes
    tcp = std::make_unique<TcpTransport>(options);
  }
  return std::make_unique<LabeledTransport>(std::move(tcp), "tcp", rendezvous);
}

std::unique_ptr<LabeledTransport> make_single_transport(const std::string& rendezvous) {
  return std::make_unique<LabeledTransport>(std::make_unique<InProcessGroup>(1), rendezvous);
}

// (kind, rendezvous, rank, size, coordinator) as the command line would choose
// from this process's environment; `requested` is "auto", "mpi", "tcp" or "none".
std::tuple<std::string, std::string, int, int, std::string> choose_from_env(const std::string& requested) {
  const LauncherChoice choice = choose_launcher(parse_transport_kind(requested), kMpiBuilt, process_env());
  return {std::string(transport_kind_name(choice.transport)), choice.rendezvous, choice.rank, choice.size,
          choice.coordinator};
}

}  // namespace

void after_tcp_failure() {
  if (!TcpTransport::gave_up_on_a_peer()) return;
  static bool armed = false;
  register_exit_handler_once(armed, "reshard._job_transport", "_exit_if_given_up");
}

void bind_tcp(nb::module_& m) {
  nb::class_<LabeledTransport, Transport>(m, "_LabeledTransport",
                                          "A transport that says how it was made (reshard.transport()).")
      .def_prop_ro("kind", &LabeledTransport::kind, "\"tcp\", or \"none\" for a job of one process.")
      .def_prop_ro("rendezvous", &LabeledTransport::rendezvous,
                   "How the processes met: \"explicit\", \"jax\", \"torchrun\", \"reshard\", \"slurm\", \"single\".")
      .def("label_of", &LabeledTransport::label_of, nb::arg("rank"),
           "How errors name process `rank` (\"rank 2 (host, ip:port)\"); None for a job of one.");
  m.def("_tcp_transport", &make_tcp_transport, nb::arg("rank"), nb::arg("size"), nb::arg("coordinator"),
        nb::arg("job_token"), nb::arg("bind_address"), nb::arg("timeout"), nb::arg("on_listening").none(),
        nb::arg("rendezvous"),
        "Joins the TCP job whose rendezvous rank 0 serves at `coordinator` (collective).");
  m.def("_single_transport", &make_single_transport, nb::arg("rendezvous"), "A transport of a job of one process.");
  m.def("_choose_launcher", &choose_from_env, nb::arg("requested"),
        "(kind, rendezvous, rank, size, coordinator) of the job this process's launcher started.");
}

}  // namespace reshard::python
