#include "cli/job_options.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "execute/launcher_env.h"
#include "job/job.h"

namespace reshard::cli {

using job::set_job_timeout;
using job::set_job_transport;

void add_transport_option(CLI::App& command) {
  command
      .add_option_function<std::string>(
          "--transport", [](const std::string& name) { set_job_transport(execute_detail::parse_transport_kind(name)); },
          "How the job's processes find each other: auto (default: mpirun/srun with MPI, else torchrun's "
          "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, else RESHARD_RANK/RESHARD_SIZE/RESHARD_COORDINATOR, else "
          "Slurm's SLURM_PROCID/SLURM_NTASKS with RESHARD_COORDINATOR, else one process), mpi, tcp or none. "
          "Also RESHARD_TRANSPORT")
      ->check(CLI::IsMember({"auto", "mpi", "tcp", "none"}));
}

void add_timeout_option(CLI::App& command) {
  add_transport_option(command);
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

}  // namespace reshard::cli
