// GivenUpPeers: whether this process has given up on a peer of an MPI job.
#pragma once

namespace reshard::mpi_detail {

// Process-wide: once a transport has given up on a peer (timed out on a silent
// one, or seen one fail or close), MPI_Finalize would wait for that peer at
// exit (Open MPI's finalize is a fence over the whole job), so the session
// skips it; the launcher then ends the job. A peer that failed or was only
// slow may recover with the others: a transport built after the failure
// (collective, so every member was there) clears the give-up.
class GivenUpPeers {
 public:
  // A wait gave up on a peer; `silent` when it timed out on it.
  static void note(bool silent) noexcept;
  // A new transport's members all took part in building it.
  static void note_all_present() noexcept;
  // Whether a peer is given up on and no transport built since.
  static bool any() noexcept;
  // Whether a peer went silent (for good: nothing clears it).
  static bool any_silent() noexcept;
};

}  // namespace reshard::mpi_detail
