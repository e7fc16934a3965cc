// The job this process belongs to: alone, or one rank of a job that mpirun,
// torchrun, Slurm or a plain loop of processes started. Shared by the front
// ends that run as one (the command line, its benchmarks and its demo).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "execute/launcher_env.h"

namespace reshard {
class Topology;
class Transport;
}  // namespace reshard

namespace reshard::job {

// This process's rank and the number of processes in the job.
struct JobWorld {
  int rank = 0;
  int size = 1;
};

// One process, unless a launcher started this one as a rank of a job:
// mpirun/mpiexec/srun with MPI (MPI is then initialised on first use and the
// job is MPI's world), or torchrun, RESHARD_RANK/RESHARD_SIZE/
// RESHARD_COORDINATOR or Slurm without MPI (the TCP transport; see
// --transport). This is what `--processes` defaults to.
JobWorld job_world();

// The transport between the job's processes, created on first use. Under
// MPI its creation is collective: every rank must ask for it.
Transport& job_transport();

// How this process's bytes reach each rank of the job, by rank: "self", and
// under MPI "single copy" or why not ("MPI (other host)", "MPI (single copy
// off)", "MPI (attach refused)"); over TCP "single copy", "TCP (this host)" or
// "TCP (other host)". Creates the transport: collective.
std::vector<std::string> job_peer_paths();

// `topology` with each process on the host it really runs on (under MPI:
// the hosts the transport found, told apart by kernel and network namespace),
// so that plans take each element into a host once. Unchanged for a job of
// one process or a topology of another size. Creates the transport: collective.
Topology with_job_hosts(const Topology& topology);

// The liveness bound of the job's transport (--timeout): how
// long a peer may stay silent before the job fails naming it. 60 s unless set.
std::chrono::milliseconds job_timeout();
// Sets it; applies to a transport already created too. Positive only.
void set_job_timeout(std::chrono::milliseconds timeout);

// How the job's processes find each other, instead of RESHARD_TRANSPORT or
// auto. Takes effect when the job starts (its first use).
void set_job_transport(execute_detail::TransportKind kind);

// {"transport": "tcp", "rendezvous": "torchrun", "processes": 4}: how this job
// was formed, for the --json of every command that moves data.
nlohmann::ordered_json job_json();

// Ends the job's use of MPI and returns `exit_code`. A failure (non-zero
// code) in a job of several processes never returns: it tells the peers
// (Transport::abort, so their waits name this rank) and ends every process
// with MPI_Abort, since MPI cannot let one rank leave a job that the others
// may still be waiting on. Call once, on the way out of main().
int finish_job(int exit_code);

}  // namespace reshard::job
