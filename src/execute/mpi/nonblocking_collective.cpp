#include "nonblocking_collective.h"

#include <array>
#include <memory>
#include <vector>

#include "mpi_error.h"
#include "orphans.h"

namespace reshard::mpi_detail {
namespace {

// One collective in progress. On the heap: a collective request can be
// neither cancelled nor freed, so if the wait fails MPI may still write the
// buffers, and Orphans keeps them until MPI completes it or is finalized.
struct Collective {
  MPI_Request request = MPI_REQUEST_NULL;
  std::array<uint64_t, 2> in{};
  std::array<uint64_t, 2> out{};
};

// Every rank but this one: a collective needs them all.
std::vector<int> other_ranks(int rank, int size) {
  std::vector<int> others;
  for (int r = 0; r < size; ++r) {
    if (r != rank) others.push_back(r);
  }
  return others;
}

// Waits as long as every peer is alive (heartbeats), sleeping between looks.
void wait_for(ProgressEngine& engine, MPI_Comm comm, const std::shared_ptr<Collective>& collective, const char* what) {
  try {
    int size = 1;
    check_mpi(MPI_Comm_size(comm, &size), "reading a communicator's size");
    const std::vector<int> others = other_ranks(engine.rank(), size);
    engine.wait(WaitFor{[&] {
                          int finished = 0;
                          check_mpi(MPI_Test(&collective->request, &finished, MPI_STATUS_IGNORE), what);
                          return finished != 0 ? WaitStep::kDone : WaitStep::kIdle;
                        },
                        [&] { return std::string(what) + " (some rank has not joined it)"; },
                        [&] { return others; }});
  } catch (...) {
    auto guard = engine.lock();
    if (collective->request != MPI_REQUEST_NULL) {
      Orphans::instance().adopt(collective->request, collective, /*cancellable=*/false);
      collective->request = MPI_REQUEST_NULL;
    }
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
  wait_for(engine, comm, collective, "waiting in a barrier");
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
  wait_for(engine, comm, collective, "checking that every rank agrees");
  // The largest value, and the complement of the smallest: equal iff all are.
  return collective->out[0] == value && ~collective->out[1] == value;
}

}  // namespace reshard::mpi_detail
