#include "execute/support/rank_threads.h"

namespace reshard::testing {

void run_ranks(InProcessGroup& group, const RankBody& body) { group.run(body); }

void run_ranks(int ranks, const RankBody& body, std::chrono::milliseconds timeout) {
  InProcessGroup group(ranks, timeout);
  run_ranks(group, body);
}

}  // namespace reshard::testing
