#include "execute/launcher_env.h"

#include <charconv>
#include <cstdlib>

#include "reshard/layout/error.h"

namespace reshard::execute_detail {
namespace {

// A rank or size from the environment: a decimal int, checked for overflow.
int parse_count(std::string_view name, const std::string& text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    throw Error(ErrorCode::kInvalidArgument, std::string(name) + "=" + text + " is not a non-negative integer");
  }
  return value;
}

bool started_by_mpi(const EnvLookup& env) {
  // Open MPI's mpirun, and PMI/PMIx launchers (srun --mpi=pmix, hydra).
  return env("OMPI_COMM_WORLD_SIZE") || env("PMIX_RANK") || env("PMI_SIZE");
}

LauncherChoice tcp_choice(std::string rendezvous, std::string_view rank_var, std::string_view size_var,
                          std::string coordinator, const EnvLookup& env) {
  LauncherChoice choice{TransportKind::kTcp, std::move(rendezvous), 0, 1, std::move(coordinator)};
  choice.rank = parse_count(rank_var, *env(rank_var));
  choice.size = parse_count(size_var, *env(size_var));
  if (choice.size < 1 || choice.rank >= choice.size) {
    throw Error(ErrorCode::kInvalidArgument, std::string(rank_var) + "=" + std::to_string(choice.rank) + " is not below " +
                                                 std::string(size_var) + "=" + std::to_string(choice.size));
  }
  return choice;
}

// Where torchrun's job meets: MASTER_ADDR:MASTER_PORT, unless torchrun's own
// agent already serves its store there (TORCHELASTIC_USE_AGENT_STORE=True,
// as recent torchrun does), when the next port is reshard's.
// RESHARD_COORDINATOR, where set, says otherwise.
std::string torchrun_coordinator(const EnvLookup& env) {
  if (auto given = env("RESHARD_COORDINATOR")) return *given;
  int port = parse_count("MASTER_PORT", *env("MASTER_PORT"));
  if (env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True") ++port;
  if (port > 65535) throw Error(ErrorCode::kInvalidArgument, "MASTER_PORT=" + *env("MASTER_PORT") + " is not a port");
  return *env("MASTER_ADDR") + ":" + std::to_string(port);
}

// The TCP rendezvous the environment describes, if any.
std::optional<LauncherChoice> tcp_from_env(const EnvLookup& env) {
  if (env("RANK") && env("WORLD_SIZE") && env("MASTER_ADDR") && env("MASTER_PORT")) {
    return tcp_choice("torchrun", "RANK", "WORLD_SIZE", torchrun_coordinator(env), env);
  }
  auto coordinator = env("RESHARD_COORDINATOR");
  if (!coordinator) return std::nullopt;
  if (env("RESHARD_RANK") && env("RESHARD_SIZE")) {
    return tcp_choice("reshard", "RESHARD_RANK", "RESHARD_SIZE", *coordinator, env);
  }
  if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    return tcp_choice("slurm", "SLURM_PROCID", "SLURM_NTASKS", *coordinator, env);
  }
  return std::nullopt;
}

}  // namespace

TransportKind parse_transport_kind(std::string_view text) {
  if (text == "auto") return TransportKind::kAuto;
  if (text == "mpi") return TransportKind::kMpi;
  if (text == "tcp") return TransportKind::kTcp;
  if (text == "none") return TransportKind::kNone;
  throw Error(ErrorCode::kParse, "transport '" + std::string(text) + "' is not one of auto, mpi, tcp, none");
}

std::string_view transport_kind_name(TransportKind kind) {
  switch (kind) {
    case TransportKind::kAuto: return "auto";
    case TransportKind::kMpi: return "mpi";
    case TransportKind::kTcp: return "tcp";
    case TransportKind::kNone: return "none";
  }
  return "none";
}

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

LauncherChoice choose_launcher(TransportKind requested, bool mpi_built, const EnvLookup& env) {
  const LauncherChoice single{TransportKind::kNone, "single", 0, 1, ""};
  switch (requested) {
    case TransportKind::kNone: return single;
    case TransportKind::kMpi:
      if (!mpi_built) throw Error(ErrorCode::kUnsupported, "transport mpi: this build has no MPI");
      return {TransportKind::kMpi, "mpirun", 0, 1, ""};
    case TransportKind::kTcp:
      if (auto tcp = tcp_from_env(env)) return *tcp;
      throw Error(ErrorCode::kInvalidArgument,
                  "transport tcp needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun), or RESHARD_RANK, "
                  "RESHARD_SIZE and RESHARD_COORDINATOR, or SLURM_PROCID and SLURM_NTASKS with RESHARD_COORDINATOR");
    case TransportKind::kAuto: break;
  }
  if (mpi_built && started_by_mpi(env)) return {TransportKind::kMpi, "mpirun", 0, 1, ""};
  if (auto tcp = tcp_from_env(env)) return *tcp;
  return single;
}

}  // namespace reshard::execute_detail
