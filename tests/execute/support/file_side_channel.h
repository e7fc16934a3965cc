// SideChannel between processes that share nothing but a folder (the TCP
// transport's child processes, started without a launcher): each event is an
// empty file, created once and consumed once.
#pragma once

#include <string>
#include <vector>

#include "execute/support/side_channel.h"

namespace reshard::testing {

class FileSideChannel final : public SideChannel {
 public:
  // `folder` must exist and be the same for every process of the test.
  FileSideChannel(std::string folder, int ranks);

  // Creates the first free `to-<rank>-<n>` file: notifiers never collide, since
  // creation is exclusive.
  void notify(int rank) override;
  // Waits for `to-<self>-<n>`, n counting the events this process consumed.
  void await(int self) override;

 private:
  std::string event_path(int rank, int number) const;

  std::string folder_;
  std::vector<int> consumed_;
};

}  // namespace reshard::testing
