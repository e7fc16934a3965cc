// PeerArena: a process's arena mapped through its descriptor, its runs translated, and refusals told apart.
#include "execute/mpi/peer_arena.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "execute/shared_arena.h"
#include "support/capability.h"

namespace reshard::mpi_detail {
namespace {

TEST(PeerArena, MapsAnArenaAndReadsItsRunsInPlace) {
  // This process plays its own peer: the same calls, the same permission.
  execute_detail::SharedArena arena(size_t{8} << 20, 0);
  std::byte* data = arena.allocate(size_t{1} << 20);
  ASSERT_NE(data, nullptr);
  for (size_t i = 0; i < (size_t{1} << 20); ++i) data[i] = static_cast<std::byte>(i * 31);
  const auto mapped = PeerArena::map(::getpid(), arena.fd(), arena.base_address(), arena.reserved_bytes(),
                                     arena.token());
  if (!mapped) RESHARD_SKIP_WITHOUT("pidfd_getfd") << "this kernel refuses it";
  const RunGroup rows{reinterpret_cast<uintptr_t>(data) + 100, 64, 4096, 200};
  const auto local = mapped->to_local(std::span(&rows, 1));
  ASSERT_TRUE(local.has_value());
  const auto* there = reinterpret_cast<const std::byte*>(static_cast<uintptr_t>((*local)[0].address));
  EXPECT_NE(there, data + 100) << "a mapping of its own";
  EXPECT_EQ(std::memcmp(there + 199 * 4096, data + 100 + 199 * 4096, 64), 0);
  // Later writes show through: one memory, two mappings.
  data[100] = std::byte{0x5A};
  EXPECT_EQ(there[0], std::byte{0x5A});
  // Runs outside the arena are left to the kernel copy.
  std::array<std::byte, 64> outside{};
  const RunGroup stray{reinterpret_cast<uintptr_t>(outside.data()), 64, 0, 1};
  EXPECT_FALSE(mapped->to_local(std::span(&stray, 1)).has_value());
  const RunGroup past_end{arena.base_address() + arena.reserved_bytes() - 32, 64, 0, 1};
  EXPECT_FALSE(mapped->to_local(std::span(&past_end, 1)).has_value());
}

TEST(PeerArena, AWrongTokenOrDescriptorOrLengthIsRefused) {
  execute_detail::SharedArena arena(size_t{4} << 20, 0);
  std::array<std::byte, execute_detail::SharedArena::kTokenBytes> wrong{};
  std::copy(arena.token().begin(), arena.token().end(), wrong.begin());
  wrong[0] ^= std::byte{1};
  EXPECT_EQ(PeerArena::map(::getpid(), arena.fd(), arena.base_address(), arena.reserved_bytes(), wrong), nullptr);
  EXPECT_EQ(PeerArena::map(::getpid(), -1, arena.base_address(), arena.reserved_bytes(), arena.token()), nullptr);
  EXPECT_EQ(PeerArena::map(::getpid(), STDIN_FILENO, arena.base_address(), arena.reserved_bytes(), arena.token()),
            nullptr);
  // Longer than the file: mapping past its end would fault on reading.
  EXPECT_EQ(PeerArena::map(::getpid(), arena.fd(), arena.base_address(), arena.reserved_bytes() * 2, arena.token()),
            nullptr);
}

}  // namespace
}  // namespace reshard::mpi_detail
