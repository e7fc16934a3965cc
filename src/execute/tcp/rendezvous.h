// The TCP transport's rendezvous: every rank reports to the coordinator (rank
// 0), which hands back the job's table (each rank's address and host, and the
// job token); then each pair of ranks connects once, the higher rank calling
// the lower, proving with the token that it belongs to the job.
#pragma once

#include <string>
#include <vector>

#include "execute/tcp/socket.h"
#include "reshard/execute/tcp_transport.h"

namespace reshard::tcp_detail {

// What the job knows of one of its processes.
struct PeerRecord {
  std::string address;    // "ip:port" its connections come from and go to
  std::string host_name;  // gethostname()
  std::string host_key;   // boot id and network namespace: equal on one host
};

struct JoinedJob {
  std::string token;
  std::vector<PeerRecord> peers;    // by rank
  std::vector<Socket> connections;  // by rank, connected and proven; this rank's own is invalid
};

// Collective over the job's processes; every step bounded by the options'
// timeout. Throws Error(kTimeout) naming the ranks that did not arrive (and
// the connections refused meanwhile), Error(kInvalidArgument) for bad options.
JoinedJob join_job(const TcpTransportOptions& options);

// This process's record fields.
std::string this_host_key();
std::string this_host_name();

}  // namespace reshard::tcp_detail
