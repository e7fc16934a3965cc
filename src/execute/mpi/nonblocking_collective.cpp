#include "nonblocking_collective.h"

#include <array>
#include <memory>

#include "mpi_error.h"

namespace reshard::mpi_detail {
namespace {

// One collective in progress. On the heap: a collective request can be
// neither cancelled nor freed, so if the wait fails MPI may still write the
// buffers, and the engine keeps them until the job ends.
struct Collective {
  MPI_Request request = MPI_REQUEST_NULL;
  std::array<uint64_t, 2> in{};
  std::array<uint64_t, 2> out{};
};

void wait_for(ProgressEngine& engine, const std::shared_ptr<Collective>& collective, const char* what) {
  try {
    engine.wait(
        [&] {
          int finished = 0;
          check_mpi(MPI_Test(&collective->request, &finished, MPI_STATUS_IGNORE), what);
          return finished != 0 ? WaitStep::kDone : WaitStep::kIdle;
        },
        [&] { return std::string(what) + " (some rank has not joined it)"; });
  } catch (...) {
    engine.keep_alive(collective);
    throw;
  }
}

}  // namespace

void barrier(ProgressEngine& engine, MPI_Comm comm) {
  auto collective = std::make_shared<Collective>();
  {
    auto guard = engine.lock();
    engine.throw_if_aborted();
    check_mpi(MPI_Ibarrier(comm, &collective->request), "starting a barrier");
  }
  wait_for(engine, collective, "waiting in a barrier");
}

bool all_equal(ProgressEngine& engine, MPI_Comm comm, uint64_t value) {
  auto collective = std::make_shared<Collective>();
  collective->in = {value, ~value};
  {
    auto guard = engine.lock();
    engine.throw_if_aborted();
    check_mpi(MPI_Iallreduce(collective->in.data(), collective->out.data(), 2, MPI_UINT64_T, MPI_MAX, comm,
                             &collective->request),
              "starting an agreement check");
  }
  wait_for(engine, collective, "checking that every rank agrees");
  // The largest value, and the complement of the smallest: equal iff all are.
  return collective->out[0] == value && ~collective->out[1] == value;
}

}  // namespace reshard::mpi_detail
