// What travels on the TCP transport's connections: the rendezvous's
// messages (length-prefixed, fields in a fixed order) and, once the job is
// connected, frames: a fixed header, then `bytes` of payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace reshard::tcp_detail {

// The first bytes of every connection: a stray client (a port scanner, a
// process of another job or another protocol) is told apart at once.
inline constexpr uint64_t kMagic = 0x31'44'52'41'48'53'45'52;  // "RESHARD1", little-endian
inline constexpr uint32_t kProtocolVersion = 1;
// Bounds on what a peer may announce during the rendezvous, so a malformed
// or hostile message cannot make this process allocate without limit.
inline constexpr uint32_t kMaxRendezvousMessage = 1u << 20;
inline constexpr uint32_t kMaxRendezvousString = 4096;

enum class FrameKind : uint32_t {
  kData = 1,       // a message: `tag`, then `bytes` of payload
  kHeartbeat = 2,  // nothing to say, but alive
  kAbort = 3,      // the sender failed; the payload says why
  kGoodbye = 4,    // the sender closes its transport: no more frames follow
  // A message the receiver reads out of the sender's memory (a peer of its
  // host that lets it): `tag`, and a ReadableMessage as payload.
  kReadable = 5,
  kReadDone = 6,   // the receiver has read it: the payload is its id
};

struct ReadableMessage {
  uint64_t address = 0;
  uint64_t bytes = 0;
  uint64_t id = 0;
};

struct FrameHeader {
  uint32_t kind = 0;
  uint32_t reserved = 0;
  uint64_t tag = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(FrameHeader) == 24);

// Appends fields; the message is sent with its length in front.
class MessageWriter {
 public:
  void u32(uint32_t value);
  void u64(uint64_t value);
  void text(std::string_view value);
  // The message with its 4-byte length in front.
  std::vector<std::byte> framed() const;

 private:
  std::vector<std::byte> bytes_;
};

// Reads fields in the order they were written; throws Error(kTransport)
// naming `from` when the message is shorter than its fields or a string
// longer than kMaxRendezvousString.
class MessageReader {
 public:
  MessageReader(std::span<const std::byte> bytes, std::string_view from) : bytes_(bytes), from_(from) {}
  uint32_t u32();
  uint64_t u64();
  std::string text();

 private:
  std::span<const std::byte> take(size_t count);
  std::span<const std::byte> bytes_;
  std::string_view from_;
};

}  // namespace reshard::tcp_detail
