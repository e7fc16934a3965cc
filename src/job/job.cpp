#include "job/job.h"

#include <fmt/format.h>

#include <cstdlib>
#include <optional>
#include <chrono>
#include <memory>

#include "execute/launcher_env.h"
#include "reshard/execute/in_process_transport.h"
#include "reshard/execute/tcp_transport.h"
#include "reshard/layout/error.h"
#include "reshard/layout/topology.h"
#include "reshard/storage/open_store.h"
#if RESHARD_WITH_MPI
#include "reshard/execute/mpi/mpi_session.h"
#include "reshard/execute/mpi/mpi_transport.h"
#endif

namespace reshard::job {

using execute_detail::choose_launcher;
using execute_detail::LauncherChoice;
using execute_detail::parse_transport_kind;
using execute_detail::process_env;
using execute_detail::transport_kind_name;
using execute_detail::TransportKind;

namespace {

// Everything the job started, torn down in reverse order by finish_job (or,
// failing that, at exit).
struct Job {
#if RESHARD_WITH_MPI
  std::unique_ptr<MpiSession> session;
  std::unique_ptr<MpiTransport> mpi_transport;
#endif
  std::unique_ptr<TcpTransport> tcp_transport;
  std::unique_ptr<InProcessGroup> alone;  // the transport of a one-process job
  bool started = false;
  std::chrono::milliseconds timeout = InProcessGroup::kDefaultTimeout;
  std::optional<TransportKind> requested;  // --transport; else RESHARD_TRANSPORT; else auto
  LauncherChoice choice;
  JobWorld world;
};

Job& job() {
  static Job instance;
  return instance;
}

TransportKind requested_kind(const Job& j) {
  if (j.requested) return *j.requested;
  const auto from_env = process_env()("RESHARD_TRANSPORT");
  if (!from_env || from_env->empty()) return TransportKind::kAuto;
  try {
    return parse_transport_kind(*from_env);
  } catch (const Error& e) {
    throw Error(ErrorCode::kParse, std::string("RESHARD_TRANSPORT: ") + e.what());
  }
}

// RESHARD_LOG=debug: which transport the job uses, and how it was found.
void log_choice(const LauncherChoice& choice) {
  const char* level = std::getenv("RESHARD_LOG");
  if (level == nullptr || std::string_view(level) != "debug") return;
  fmt::print(stderr, "reshard: debug: transport {} (rendezvous {}{}), rank {} of {}\n", transport_kind_name(choice.transport),
             choice.rendezvous, choice.coordinator.empty() ? "" : " at " + choice.coordinator, choice.rank, choice.size);
}

// Whether this build has the MPI transport (RESHARD_WITH_MPI is defined only when it does).
#if RESHARD_WITH_MPI
constexpr bool kBuiltWithMpi = true;
#else
constexpr bool kBuiltWithMpi = false;
#endif

Job& started_job() {
  Job& j = job();
  if (j.started) return j;
  j.started = true;
  j.choice = choose_launcher(requested_kind(j), kBuiltWithMpi, process_env());
#if RESHARD_WITH_MPI
  if (j.choice.transport == TransportKind::kMpi) {
    j.session = std::make_unique<MpiSession>(MpiSessionOptions{j.timeout});
    j.world = JobWorld{MpiSession::world_rank(), MpiSession::world_size()};
    j.choice.rank = j.world.rank;
    j.choice.size = j.world.size;
  }
#endif
  if (j.choice.transport == TransportKind::kTcp) j.world = JobWorld{j.choice.rank, j.choice.size};
  log_choice(j.choice);
  return j;
}

}  // namespace

JobWorld job_world() { return started_job().world; }

Transport& job_transport() {
  Job& j = started_job();
#if RESHARD_WITH_MPI
  if (j.session) {
    if (!j.mpi_transport) {
      MpiTransportOptions options;
      options.timeout = j.timeout;
      j.mpi_transport = std::make_unique<MpiTransport>(MPI_COMM_WORLD, options);
    }
    return *j.mpi_transport;
  }
#endif
  if (j.choice.transport == TransportKind::kTcp) {
    if (!j.tcp_transport) {
      TcpTransportOptions options;
      options.rank = j.choice.rank;
      options.size = j.choice.size;
      options.coordinator = j.choice.coordinator;
      if (const auto bind = process_env()("RESHARD_BIND_ADDRESS")) options.bind_address = *bind;
      options.timeout = j.timeout;
      j.tcp_transport = std::make_unique<TcpTransport>(options);
    }
    return *j.tcp_transport;
  }
  if (!j.alone) j.alone = std::make_unique<InProcessGroup>(1, j.timeout);
  return j.alone->transport(0);
}

std::vector<std::string> job_peer_paths() {
  Transport& transport = job_transport();
  std::vector<std::string> paths;
#if RESHARD_WITH_MPI
  if (const Job& j = job(); j.mpi_transport) {
    for (int peer = 0; peer < transport.size(); ++peer) {
      paths.emplace_back(peer_path_name(j.mpi_transport->path_to(peer)));
    }
    return paths;
  }
#endif
  if (const Job& j = job(); j.tcp_transport) {
    for (int peer = 0; peer < transport.size(); ++peer) {
      const TcpTransport& tcp = *j.tcp_transport;
      if (peer == transport.rank()) {
        paths.emplace_back("self");
      } else if (tcp.host_of(peer) != tcp.host_of(transport.rank())) {
        paths.emplace_back("TCP (other host)");
      } else {
        paths.emplace_back(tcp.reads_across(peer) ? "single copy" : "TCP (this host)");
      }
    }
    return paths;
  }
  for (int peer = 0; peer < transport.size(); ++peer) {
    paths.emplace_back(peer == transport.rank() ? "self" : "in process");
  }
  return paths;
}

Topology with_job_hosts(const Topology& topology) {
  if (job_world().size > 1 && job().choice.transport == TransportKind::kTcp) {
    Transport& transport = job_transport();
    const Job& j = job();
    if (topology.num_processes() != transport.size()) return topology;
    std::vector<int> hosts;
    for (int rank = 0; rank < transport.size(); ++rank) hosts.push_back(j.tcp_transport->host_of(rank));
    return topology.with_hosts(std::move(hosts));
  }
#if RESHARD_WITH_MPI
  Transport& transport = job_transport();
  if (const Job& j = job(); j.mpi_transport && topology.num_processes() == transport.size()) {
    std::vector<int> hosts;
    for (int rank = 0; rank < transport.size(); ++rank) hosts.push_back(j.mpi_transport->host_of(rank));
    return topology.with_hosts(std::move(hosts));
  }
#endif
  return topology;  // one process, or the threads of one: one host, and nothing crosses it
}

std::chrono::milliseconds job_timeout() { return job().timeout; }

void set_job_timeout(std::chrono::milliseconds timeout) {
  Job& j = job();
  j.timeout = timeout;
  // Requests to object stores give up after the same time without progress.
  storage::StoreOptions store = storage::default_store_options();
  store.timeout = timeout;
  storage::set_default_store_options(store);
#if RESHARD_WITH_MPI
  if (j.mpi_transport) j.mpi_transport->set_timeout(timeout);
#endif
  if (j.tcp_transport) j.tcp_transport->set_timeout(timeout);
  if (j.alone) j.alone->transport(0).set_timeout(timeout);
}

void set_job_transport(TransportKind kind) { job().requested = kind; }

nlohmann::ordered_json job_json() {
  const Job& j = started_job();
  return {{"transport", transport_kind_name(j.choice.transport)},
          {"rendezvous", j.choice.rendezvous},
          {"processes", j.world.size}};
}

int finish_job(int exit_code) {
  Job& j = job();
#if RESHARD_WITH_MPI
  if (j.session && exit_code != 0 && j.world.size > 1) {
    const std::string reason =
        fmt::format("rank {} of {} failed with exit status {} (its error is above)", j.world.rank, j.world.size,
                    exit_code);
    if (j.mpi_transport) j.mpi_transport->abort(reason);
    // Ranks that fail together (each sees the same bad input) all get to say
    // why before the job ends; a rank failing alone waits this long at most.
    constexpr std::chrono::milliseconds kFailureGrace{3000};
    MpiSession::all_ranks_arrive(kFailureGrace);
    MpiSession::abort_job(exit_code);
  }
  j.mpi_transport.reset();
  j.session.reset();
#endif
  if (j.tcp_transport && exit_code != 0 && j.world.size > 1) {
    // The peers' waits then fail naming this rank at once; its own
    // destructor never waits for a peer that has gone.
    j.tcp_transport->abort(fmt::format("rank {} of {} failed with exit status {} (its error is above)", j.world.rank,
                                       j.world.size, exit_code));
  }
  j.tcp_transport.reset();
  j.alone.reset();
  return exit_code;
}

}  // namespace reshard::job
