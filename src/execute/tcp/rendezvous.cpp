#include "execute/tcp/rendezvous.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "execute/tcp/wire.h"
#include "reshard/layout/error.h"

namespace reshard::tcp_detail {
namespace {

using namespace std::chrono_literals;

// A connection that does not say who it is within this long is dropped, so a
// silent stray client delays the rendezvous by this much at most.
constexpr auto kHelloWait = 2000ms;

enum class MessageKind : uint32_t { kJoin = 1, kTable = 2, kPeerHello = 3, kPeerAccepted = 4 };

void send_message(const Socket& socket, const MessageWriter& message, Clock::time_point deadline,
                  std::string_view peer) {
  write_exactly(socket, message.framed(), deadline, peer);
}

std::vector<std::byte> read_message(const Socket& socket, Clock::time_point deadline, std::string_view peer) {
  uint32_t length = 0;
  read_exactly(socket, std::as_writable_bytes(std::span(&length, 1)), deadline, peer);
  if (length > kMaxRendezvousMessage) {
    throw Error(ErrorCode::kTransport, fmt::format("{} announced a rendezvous message of {} bytes", peer, length));
  }
  std::vector<std::byte> body(length);
  read_exactly(socket, body, deadline, peer);
  return body;
}

MessageWriter header(MessageKind kind) {
  MessageWriter out;
  out.u64(kMagic);
  out.u32(kProtocolVersion);
  out.u32(static_cast<uint32_t>(kind));
  return out;
}

// Reads and checks the magic, version and kind; throws naming `peer` if any is wrong.
void expect_header(MessageReader& in, MessageKind kind, std::string_view peer) {
  if (in.u64() != kMagic) throw Error(ErrorCode::kTransport, fmt::format("{} does not speak reshard's protocol", peer));
  if (const uint32_t version = in.u32(); version != kProtocolVersion) {
    throw Error(ErrorCode::kTransport,
                fmt::format("{} speaks version {} of reshard's protocol, this process {}", peer, version,
                            kProtocolVersion));
  }
  if (in.u32() != static_cast<uint32_t>(kind)) {
    throw Error(ErrorCode::kTransport, fmt::format("{} sent an unexpected message", peer));
  }
}

void write_record(MessageWriter& out, const PeerRecord& record) {
  out.text(record.address);
  out.text(record.host_name);
  out.text(record.host_key);
}

PeerRecord read_record(MessageReader& in) {
  PeerRecord record;
  record.address = in.text();
  record.host_name = in.text();
  record.host_key = in.text();
  return record;
}

std::string random_token() {
  std::random_device device;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", device(), device(), device(), device());
}

void log_refused(const Socket& socket, std::string_view why) {
  fmt::print(stderr, "reshard: refused a connection from {}: {}\n", peer_address(socket), why);
}

std::string rank_list(const std::vector<int>& ranks) { return fmt::format("{}", fmt::join(ranks, ", ")); }

// A connection that arrived at a listener, with what it claimed.
struct Arrival {
  Socket socket;
  int rank = -1;
  PeerRecord record;
};

// Accepts connections until `wanted` ranks (those `is_wanted` accepts, each
// once) have proven themselves with `parse`; refuses and logs the rest.
template <typename Parse>
std::vector<Arrival> accept_ranks(const Socket& listener, size_t wanted, Clock::time_point deadline,
                                  const std::vector<int>& expected, Parse parse, std::string_view where) {
  std::vector<Arrival> arrived;
  std::vector<std::string> refusals;
  while (arrived.size() < wanted) {
    Socket socket = accept_until(listener, deadline);
    if (!socket.valid()) {
      std::vector<int> missing;
      for (const int rank : expected) {
        bool here = false;
        for (const Arrival& a : arrived) here = here || a.rank == rank;
        if (!here) missing.push_back(rank);
      }
      throw Error(ErrorCode::kTimeout,
                  fmt::format("{}: rank(s) {} did not arrive in time{}", where, rank_list(missing),
                              refusals.empty() ? "" : fmt::format(" (refused meanwhile: {})", fmt::join(refusals, "; "))));
    }
    const std::string from = peer_address(socket);
    try {
      const auto body = read_message(socket, std::min(deadline, Clock::now() + kHelloWait), from);
      MessageReader in(body, from);
      Arrival arrival = parse(in, from);
      for (const Arrival& a : arrived) {
        if (a.rank == arrival.rank) throw Error(ErrorCode::kTransport, fmt::format("rank {} arrived twice", a.rank));
      }
      arrival.socket = std::move(socket);
      arrived.push_back(std::move(arrival));
    } catch (const Error& e) {
      log_refused(socket, e.what());
      refusals.push_back(fmt::format("{}: {}", from, e.what()));
    }
  }
  return arrived;
}

int checked_rank(uint32_t rank, int lowest, int size, std::string_view from) {
  if (rank < static_cast<uint32_t>(lowest) || rank >= static_cast<uint32_t>(size)) {
    throw Error(ErrorCode::kTransport, fmt::format("{} claims rank {}, not one expected here", from, rank));
  }
  return static_cast<int>(rank);
}

void check_size(uint32_t size, int ours, std::string_view from) {
  if (size != static_cast<uint32_t>(ours)) {
    throw Error(ErrorCode::kTransport, fmt::format("{} says the job has {} processes, this one {}", from, size, ours));
  }
}

void check_token(const std::string& theirs, const std::string& ours, std::string_view from) {
  if (theirs != ours) throw Error(ErrorCode::kTransport, fmt::format("{} does not hold this job's token", from));
}

// Rank 0: takes every other rank's report, then sends each the table.
JoinedJob serve_rendezvous(const TcpTransportOptions& options, const HostPort& coordinator,
                           Clock::time_point deadline) {
  const Socket listener = listen_on(coordinator.host, coordinator.port);
  const std::string bound = local_address(listener);
  const HostPort actual = parse_host_port(bound, "the coordinator's address");
  // Published as the coordinator was named (a host name stays a name).
  const std::string address = fmt::format("{}:{}", options.bind_address.empty() ? coordinator.host : options.bind_address,
                                          actual.port);
  if (options.on_listening) options.on_listening(address);

  JoinedJob job;
  job.token = options.job_token.empty() ? random_token() : options.job_token;
  job.peers.resize(static_cast<size_t>(options.size));
  job.connections.resize(static_cast<size_t>(options.size));
  job.peers[0] = {address, this_host_name(), this_host_key()};
  std::vector<int> expected;
  for (int rank = 1; rank < options.size; ++rank) expected.push_back(rank);
  const auto parse = [&](MessageReader& in, std::string_view from) {
    expect_header(in, MessageKind::kJoin, from);
    Arrival arrival;
    arrival.rank = checked_rank(in.u32(), 1, options.size, from);
    check_size(in.u32(), options.size, from);
    const std::string token = in.text();
    if (!options.job_token.empty()) check_token(token, options.job_token, from);
    arrival.record = read_record(in);
    return arrival;
  };
  auto arrived = accept_ranks(listener, expected.size(), deadline, expected, parse,
                              fmt::format("the coordinator at {}", address));
  for (Arrival& a : arrived) {
    job.peers[static_cast<size_t>(a.rank)] = std::move(a.record);
    job.connections[static_cast<size_t>(a.rank)] = std::move(a.socket);
  }
  MessageWriter table = header(MessageKind::kTable);
  table.text(job.token);
  table.u32(static_cast<uint32_t>(options.size));
  for (const PeerRecord& record : job.peers) write_record(table, record);
  for (int rank = 1; rank < options.size; ++rank) {
    send_message(job.connections[static_cast<size_t>(rank)], table, deadline, fmt::format("rank {}", rank));
  }
  return job;
}

// Ranks above 0: calls each lower rank's listener (rank 0's connection is
// the rendezvous's own) and proves the token.
void call_lower_ranks(JoinedJob& job, const TcpTransportOptions& options, const std::string& ip,
                      Clock::time_point deadline) {
  for (int lower = 1; lower < options.rank; ++lower) {
    const std::string who = fmt::format("rank {} ({})", lower, job.peers[static_cast<size_t>(lower)].address);
    Socket socket = connect_until(parse_host_port(job.peers[static_cast<size_t>(lower)].address, who), who, ip,
                                  deadline);
    MessageWriter hello = header(MessageKind::kPeerHello);
    hello.u32(static_cast<uint32_t>(options.rank));
    hello.u32(static_cast<uint32_t>(options.size));
    hello.text(job.token);
    send_message(socket, hello, deadline, who);
    const auto reply = read_message(socket, deadline, who);
    MessageReader in(reply, who);
    expect_header(in, MessageKind::kPeerAccepted, who);
    job.connections[static_cast<size_t>(lower)] = std::move(socket);
  }
}

void accept_higher_ranks(JoinedJob& job, const TcpTransportOptions& options, const Socket& listener,
                         Clock::time_point deadline) {
  std::vector<int> expected;
  for (int rank = options.rank + 1; rank < options.size; ++rank) expected.push_back(rank);
  const auto parse = [&](MessageReader& in, std::string_view from) {
    expect_header(in, MessageKind::kPeerHello, from);
    Arrival arrival;
    arrival.rank = checked_rank(in.u32(), options.rank + 1, options.size, from);
    check_size(in.u32(), options.size, from);
    check_token(in.text(), job.token, from);
    return arrival;
  };
  auto arrived = accept_ranks(listener, expected.size(), deadline, expected, parse,
                              fmt::format("rank {} at {}", options.rank, local_address(listener)));
  for (Arrival& a : arrived) {
    send_message(a.socket, header(MessageKind::kPeerAccepted), deadline, fmt::format("rank {}", a.rank));
    job.connections[static_cast<size_t>(a.rank)] = std::move(a.socket);
  }
}

JoinedJob join_rendezvous(const TcpTransportOptions& options, const HostPort& coordinator,
                          Clock::time_point deadline) {
  const std::string role = fmt::format("the coordinator (rank 0) at {}", options.coordinator);
  // connect_until names the address itself: "could not reach the coordinator (rank 0) at host:port".
  Socket to_coordinator = connect_until(coordinator, "the coordinator (rank 0)", options.bind_address, deadline);
  const std::string ip = options.bind_address.empty() ? local_ip(to_coordinator) : options.bind_address;
  const Socket listener = listen_on(ip, 0);
  MessageWriter join = header(MessageKind::kJoin);
  join.u32(static_cast<uint32_t>(options.rank));
  join.u32(static_cast<uint32_t>(options.size));
  join.text(options.job_token);
  write_record(join, {local_address(listener), this_host_name(), this_host_key()});
  send_message(to_coordinator, join, deadline, role);

  const auto body = read_message(to_coordinator, deadline, role);
  MessageReader in(body, role);
  expect_header(in, MessageKind::kTable, role);
  JoinedJob job;
  job.token = in.text();
  check_size(in.u32(), options.size, role);
  for (int rank = 0; rank < options.size; ++rank) job.peers.push_back(read_record(in));
  job.connections.resize(static_cast<size_t>(options.size));
  job.connections[0] = std::move(to_coordinator);
  call_lower_ranks(job, options, ip, deadline);
  accept_higher_ranks(job, options, listener, deadline);
  // Connections leave from the address the others dialled back to.
  job.peers[static_cast<size_t>(options.rank)].address = local_address(listener);
  return job;
}

}  // namespace

std::string this_host_key() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (!(in >> boot_id)) boot_id = this_host_name();
  struct stat status {};
  const uint64_t net = ::stat("/proc/self/ns/net", &status) == 0 ? static_cast<uint64_t>(status.st_ino) : 0;
  return fmt::format("{}/{}", boot_id, net);
}

std::string this_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

JoinedJob join_job(const TcpTransportOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("rank {} of {} processes: want 0 <= rank < size", options.rank, options.size));
  }
  if (options.timeout <= 0ms) throw Error(ErrorCode::kInvalidArgument, "the timeout must be positive");
  if (options.size == 1) {
    JoinedJob alone;
    alone.peers.push_back({"self", this_host_name(), this_host_key()});
    alone.connections.resize(1);
    return alone;
  }
  const HostPort coordinator = parse_host_port(options.coordinator, "coordinator");
  const Clock::time_point deadline = Clock::now() + options.timeout;
  return options.rank == 0 ? serve_rendezvous(options, coordinator, deadline)
                           : join_rendezvous(options, coordinator, deadline);
}

}  // namespace reshard::tcp_detail
