// MpiSession: MPI's lifetime as an RAII object, and how to tell an MPI launch.
#pragma once

#include <chrono>

namespace reshard {

// Whether an MPI launcher (mpirun/mpiexec of Open MPI or MPICH, srun with PMI
// or PMIx) started this process, judged from the environment it sets. Lets a
// program initialise MPI only when it runs as part of an MPI job.
bool launched_by_mpi();

struct MpiSessionOptions {
  // The liveness bound of every MpiTransport that leaves its own at zero: a
  // peer silent for this long is taken for dead (see MpiTransportOptions).
  std::chrono::milliseconds peer_timeout{std::chrono::seconds(60)};
};

// Initialises MPI for its lifetime (MPI_Init_thread, asking for
// MPI_THREAD_MULTIPLE) and finalises it at the end. If MPI is already
// initialised, the session leaves it to whoever initialised it. Memory that
// a failed transfer left in MPI's hands is released after MPI_Finalize.
class MpiSession {
 public:
  // Throws Error(kTransport) if MPI fails to initialise, and
  // Error(kInvalidArgument) unless options.peer_timeout is positive.
  explicit MpiSession(MpiSessionOptions options = {});
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // Whether this session called MPI_Init_thread (and so will finalise).
  bool owns_mpi() const { return owns_; }
  // The thread level MPI provides (MPI_THREAD_SINGLE .. MPI_THREAD_MULTIPLE).
  int thread_level() const { return thread_level_; }

  // This process's rank in MPI_COMM_WORLD, and the world's size.
  static int world_rank();
  static int world_size();

  // The liveness bound transports take by default: the latest session's
  // peer_timeout, 60 s without one.
  static std::chrono::milliseconds peer_timeout();

  // Whether a transport of this process gave up on a peer (one silent past
  // the timeout, or one that failed) with no transport built since. Then the
  // session does not call MPI_Finalize, which would wait for that peer: the
  // process ends unfinalised and the launcher ends the job.
  static bool gave_up_on_a_peer();
  // Whether a transport of this process ever timed out on a silent peer: a new
  // transport over a communicator with that peer would wait for it forever
  // if it is dead or stopped (reshard.mpi refuses to make one then).
  static bool peer_went_silent();

  // Ends every process of the job with `exit_code` (MPI_Abort on the world).
  // The only clean way out once a rank has failed: without ULFM, MPI cannot
  // shrink or repair a communicator that has lost a member, so the survivors
  // would otherwise wait for it forever.
  [[noreturn]] static void abort_job(int exit_code);

  // Waits at most `grace` for every rank of the world to call it too (a
  // non-blocking barrier on the world, polled); whether they all did. Before
  // abort_job it lets ranks that fail together (bad input that each one sees)
  // all report before any of them ends the job.
  static bool all_ranks_arrive(std::chrono::milliseconds grace);

 private:
  bool owns_ = false;
  int thread_level_ = 0;
};

}  // namespace reshard
