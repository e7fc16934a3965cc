#include "reshard/execute/transport.h"

namespace reshard {

// A transport that never touches a span after its request ends has no use
// for the owner: the plain calls are already safe.
std::unique_ptr<Request> Transport::isend_owned(int peer, Tag tag, std::span<const std::byte> data,
                                                std::shared_ptr<const void> /*owner*/) {
  return isend(peer, tag, data);
}

std::unique_ptr<Request> Transport::irecv_owned(int peer, Tag tag, std::span<std::byte> data,
                                                std::shared_ptr<const void> /*owner*/) {
  return irecv(peer, tag, data);
}

}  // namespace reshard
