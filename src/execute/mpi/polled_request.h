// PolledRequest: a request the progress engine advances on every round, with wait, test and a kept error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "progress_engine.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"

namespace reshard::mpi_detail {

// One message to or from `peer` that moves on only when polled. The engine
// advances every registered one in each round, whatever is being waited on,
// so a receive is matched as soon as its message arrives. An error found in
// a round is kept and thrown by the next wait() or test(), and by every one
// after that.
class PolledRequest : public Request {
 public:
  void wait() override;
  bool test() override;

  // Under the engine's lock: advance() unless done or failed, keeping an error.
  void advance_keeping_error() noexcept;

 protected:
  PolledRequest(ProgressEngine& engine, int peer) : engine_(engine), peer_(peer) {}

  // Under the lock: moves the request on; true once it is done. May throw.
  virtual bool advance() = 0;
  // "receiving 4096 bytes from rank 2 (tag 7)", for errors and timeouts.
  virtual std::string describe() const = 0;
  // The peers whose silence fails a wait on it: its peer, unless it says otherwise.
  virtual std::vector<int> waited_peers() const { return {peer_}; }

  ProgressEngine& engine_;
  const int peer_;
  bool done_ = false;

 private:
  // The kept error, or advance() unless done; an error it throws is kept.
  bool step();

  std::optional<Error> error_;
};

}  // namespace reshard::mpi_detail
