// How a process names the paths its messages take (the RESHARD_LOG=debug line).
#include "execute/mpi/peer_paths.h"

#include <gtest/gtest.h>

#include <vector>

namespace reshard::mpi_detail {
namespace {

TEST(PeerPaths, EachPathNamesItsPeersAsRangesInPathOrder) {
  const std::vector<PeerPath> paths = {PeerPath::kSingleCopy, PeerPath::kSelf,      PeerPath::kSingleCopy,
                                       PeerPath::kSingleCopy, PeerPath::kOtherHost, PeerPath::kRefused,
                                       PeerPath::kSingleCopy};
  EXPECT_EQ(describe_peer_paths(1, paths),
            "rank 1 of 7: single copy with ranks 0, 2-3, 6; MPI (other host) with rank 4; "
            "MPI (attach refused) with rank 5");
}

TEST(PeerPaths, AJobOfOneIsAlone) {
  const std::vector<PeerPath> paths = {PeerPath::kSelf};
  EXPECT_EQ(describe_peer_paths(0, paths), "rank 0 of 1: alone");
}

TEST(PeerPaths, EveryPathHasItsOwnName) {
  EXPECT_EQ(peer_path_name(PeerPath::kOptedOut), "MPI (single copy off)");
  EXPECT_EQ(peer_path_name(PeerPath::kRefused), "MPI (attach refused)");
  EXPECT_EQ(peer_path_name(PeerPath::kOtherHost), "MPI (other host)");
  EXPECT_EQ(peer_path_name(PeerPath::kSingleCopy), "single copy");
}

}  // namespace
}  // namespace reshard::mpi_detail
