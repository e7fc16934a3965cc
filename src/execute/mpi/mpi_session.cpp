#include "reshard/execute/mpi/mpi_session.h"

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "communicator.h"
#include "given_up_peers.h"
#include "mpi_error.h"
#include "orphans.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

// Set by the launchers reshard meets: Open MPI's mpirun, MPICH's Hydra
// (PMI), Slurm's srun with PMI-2 or PMIx, MVAPICH.
constexpr const char* kLauncherVariables[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                              "MV2_COMM_WORLD_SIZE"};

std::atomic<int64_t> g_peer_timeout_ms{60'000};

bool mpi_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  return initialized != 0;
}

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

}  // namespace

bool launched_by_mpi() {
  for (const char* name : kLauncherVariables) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return true;
  }
  return false;
}

MpiSession::MpiSession(MpiSessionOptions options) {
  if (options.peer_timeout.count() <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("MPI session: peer_timeout {} ms must be positive", options.peer_timeout.count()));
  }
  g_peer_timeout_ms.store(options.peer_timeout.count());
  if (mpi_initialized()) {
    mpi_detail::check_mpi(MPI_Query_thread(&thread_level_), "querying MPI's thread level");
    return;
  }
  mpi_detail::check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &thread_level_),
                        "initialising MPI");
  owns_ = true;
}

MpiSession::~MpiSession() {
  if (!owns_ || mpi_finalized()) return;
  // MPI_Finalize waits for every process of the job, the lost peer too; without
  // it the launcher sees this process end unfinalised and ends the job.
  if (mpi_detail::GivenUpPeers::any()) return;
  // What failed transfers left behind: MPI may still complete some of it.
  mpi_detail::Orphans::instance().cancel_all(std::chrono::milliseconds(100));
  mpi_detail::Communicator::free_retired();
  MPI_Finalize();
  mpi_detail::Orphans::instance().forget_all();
}

bool MpiSession::gave_up_on_a_peer() { return mpi_detail::GivenUpPeers::any(); }

bool MpiSession::peer_went_silent() { return mpi_detail::GivenUpPeers::any_silent(); }

std::chrono::milliseconds MpiSession::peer_timeout() {
  return std::chrono::milliseconds(g_peer_timeout_ms.load());
}

int MpiSession::world_rank() {
  int rank = 0;
  mpi_detail::check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "reading the MPI world rank");
  return rank;
}

int MpiSession::world_size() {
  int size = 0;
  mpi_detail::check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "reading the MPI world size");
  return size;
}

bool MpiSession::all_ranks_arrive(std::chrono::milliseconds grace) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &request) != MPI_SUCCESS) return false;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (true) {
    int done = 0;
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done != 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;  // left pending: the job ends next
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void MpiSession::abort_job(int exit_code) {
  std::cout.flush();
  std::cerr.flush();
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this is for an MPI that does
}

}  // namespace reshard
