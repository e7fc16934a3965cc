#include "given_up_peers.h"

#include <atomic>

namespace reshard::mpi_detail {
namespace {

std::atomic<bool> g_given_up{false};
std::atomic<bool> g_silent{false};

}  // namespace

void GivenUpPeers::note(bool silent) noexcept {
  g_given_up.store(true);
  if (silent) g_silent.store(true);
}

void GivenUpPeers::note_all_present() noexcept { g_given_up.store(false); }

bool GivenUpPeers::any() noexcept { return g_given_up.load(); }

bool GivenUpPeers::any_silent() noexcept { return g_silent.load(); }

}  // namespace reshard::mpi_detail
