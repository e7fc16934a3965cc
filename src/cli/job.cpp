#include "cli/job.h"

#include <fmt/format.h>

#include <cmath>
#include <chrono>
#include <memory>

#include <CLI/CLI.hpp>

#include "reshard/execute/in_process_transport.h"
#include "reshard/layout/topology.h"
#include "reshard/storage/open_store.h"
#if RESHARD_WITH_MPI
#include "reshard/execute/mpi/mpi_session.h"
#include "reshard/execute/mpi/mpi_transport.h"
#endif

namespace reshard::cli {
namespace {

// Everything the job started, torn down in reverse order by finish_job (or,
// failing that, at exit).
struct Job {
#if RESHARD_WITH_MPI
  std::unique_ptr<MpiSession> session;
  std::unique_ptr<MpiTransport> mpi_transport;
#endif
  std::unique_ptr<InProcessGroup> alone;  // the transport of a one-process job
  bool started = false;
  std::chrono::milliseconds timeout = InProcessGroup::kDefaultTimeout;
  JobWorld world;
};

Job& job() {
  static Job instance;
  return instance;
}

Job& started_job() {
  Job& j = job();
  if (j.started) return j;
  j.started = true;
#if RESHARD_WITH_MPI
  if (launched_by_mpi()) {
    j.session = std::make_unique<MpiSession>(MpiSessionOptions{j.timeout});
    j.world = JobWorld{MpiSession::world_rank(), MpiSession::world_size()};
  }
#endif
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
  for (int peer = 0; peer < transport.size(); ++peer) {
    paths.emplace_back(peer == transport.rank() ? "self" : "in process");
  }
  return paths;
}

Topology with_job_hosts(const Topology& topology) {
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
  if (j.alone) j.alone->transport(0).set_timeout(timeout);
}

void add_timeout_option(CLI::App& command) {
  command
      .add_option_function<double>(
          "--timeout",
          [](double seconds) {
            set_job_timeout(std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000))));
          },
          "Seconds a peer may stay silent (dead, hung, unreachable) before the job fails naming it; a peer "
          "that is alive but slow is waited for (default 60)")
      ->check(CLI::Range(0.001, 1e9));
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
  j.alone.reset();
  return exit_code;
}

}  // namespace reshard::cli
