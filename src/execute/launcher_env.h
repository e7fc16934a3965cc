// Which transport and rendezvous a process joins, read from the environment its
// launcher set: mpirun/srun with MPI, torchrun, Slurm without MPI, or none.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace reshard::execute_detail {

enum class TransportKind { kAuto, kMpi, kTcp, kNone };

// "auto", "mpi", "tcp" or "none" (the --transport flag, RESHARD_TRANSPORT).
TransportKind parse_transport_kind(std::string_view text);
std::string_view transport_kind_name(TransportKind kind);

// The job a process joins. For kTcp, rank 0 serves the rendezvous store at
// `coordinator` (host:port).
struct LauncherChoice {
  TransportKind transport = TransportKind::kNone;
  std::string rendezvous;  // what decided it: "mpirun", "torchrun", "slurm", "reshard", "single"
  int rank = 0;
  int size = 1;
  std::string coordinator;
};

// Reads one environment variable; tests pass a map instead of the process's.
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;
EnvLookup process_env();

// `requested` kAuto picks, in order: MPI when an MPI launcher started us and
// `mpi_built`; torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; RESHARD_RANK/
// RESHARD_SIZE/RESHARD_COORDINATOR; Slurm's SLURM_PROCID/SLURM_NTASKS with
// RESHARD_COORDINATOR; otherwise one process. An explicit kind that the
// environment cannot serve is an error naming what is missing.
LauncherChoice choose_launcher(TransportKind requested, bool mpi_built, const EnvLookup& env);

}  // namespace reshard::execute_detail
