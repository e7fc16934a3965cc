// `reshard plan`: print the transfers that move an array between two layouts.
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/layout_options.h"
#include "job/job.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"
#include "reshard/layout/parse.h"
#include "reshard/plan/planner.h"

namespace reshard::cli {

using job::job_peer_paths;
using job::job_transport;
using job::job_world;
using job::with_job_hosts;

namespace {

constexpr const char* kHelp =
    "Print the transfer plan that moves an array between two layouts: which source device sends\n"
    "which box to which target device, and how many bytes stay on a device, stay in a process,\n"
    "or cross processes. Stage 0 brings each element a process lacks into it once; stage 1\n"
    "copies it inside the process to the other devices that need it (fan out).\n"
    "With --hosts H the P processes sit on H hosts (consecutive runs of P/H, as mpirun fills\n"
    "slots): each element a host lacks crosses into it once (stage 0), and stage 2 copies it\n"
    "between the host's processes (host relay); the bytes are counted per level (same device,\n"
    "same process, same host, cross host) beside the fewest that must cross into each host.\n"
    "Run under mpirun, it also says how bytes travel between the job's processes: by a single\n"
    "kernel copy between processes of one host, or through MPI and why (another host, single\n"
    "copy turned off, the attach refused); with --json as \"paths\", row r for rank r.\n"
    "\n"
    "Example (the same 4x4 mesh in two device orders, 4 processes of 4 devices):\n"
    "  reshard plan --shape 32,8,4096 --dtype f32 \\\n"
    "      --src-mesh data=4,model=4 --src-devices 0,4,8,12,1,5,9,13,2,6,10,14,3,7,11,15 \\\n"
    "      --src-spec 'data,None,model' \\\n"
    "      --dst-mesh data=4,model=4 --dst-devices 0,1,4,5,2,3,6,7,8,9,12,13,10,11,14,15 \\\n"
    "      --dst-spec 'data,None,model' --processes 4 --json\n"
    "  reshard plan --shape 64,1024 --dtype bf16 --src-mesh d=8 --src-spec d \\\n"
    "      --dst-mesh d=8 --dst-spec None --processes 4 --hosts 2\n"
    "  mpirun -np 4 reshard plan --shape 1024 --dtype f32 --src-mesh d=4 --src-spec d \\\n"
    "      --dst-mesh d=4 --dst-spec None --json";

struct PlanFlags {
  std::string shape;
  std::string dtype;
  LayoutFlags src{"src-"};
  LayoutFlags dst{"dst-"};
  JobFlags job;
  bool uneven = false;
  bool json = false;
  std::string max_rows = "64";
  std::string hosts;  // empty: each process a host of its own
};

// --hosts H: the processes in consecutive runs of P / H per host.
Topology with_hosts_flag(const Topology& topology, const std::string& flag) {
  int64_t hosts = 0;
  try {
    hosts = parse_count(flag, "host count");
  } catch (const Error& e) {
    throw e.with_context("--hosts");
  }
  if (hosts < 1 || hosts > topology.num_processes() || topology.num_processes() % hosts != 0) {
    throw Error(ErrorCode::kParse, fmt::format("--hosts: {} processes cannot be split evenly over {} hosts",
                                               topology.num_processes(), hosts));
  }
  return topology.with_uniform_hosts(static_cast<int>(hosts));
}

PlanKey key_from_flags(const PlanFlags& flags) {
  Shape shape = shape_from_flag(flags.shape);
  const DType dtype = dtype_from_flag(flags.dtype);
  NamedSharding src = sharding_from_flags(flags.src, flags.uneven);
  NamedSharding dst = sharding_from_flags(flags.dst, flags.uneven);
  Topology topology = topology_from_flags(flags.job, {&src.mesh(), &dst.mesh()}, job_world().size);
  // --hosts, else under mpirun the hosts the ranks really run on.
  topology = flags.hosts.empty() ? with_job_hosts(topology) : with_hosts_flag(topology, flags.hosts);
  return PlanKey{std::move(shape), dtype, std::move(src), std::move(dst), std::move(topology)};
}

// Layout errors (rank, divisibility) concern one side's flags: say which.
Plan plan_from_key(const PlanKey& key) {
  try {
    key.src.validate(key.shape);
  } catch (const Error& e) {
    throw e.with_context("--src-spec");
  }
  try {
    key.dst.validate(key.shape);
  } catch (const Error& e) {
    throw e.with_context("--dst-spec");
  }
  Plan plan = make_plan(key);
  plan.validate();
  return plan;
}

nlohmann::ordered_json plan_json(const Plan& plan) {
  const PlanStats& s = plan.stats();
  nlohmann::ordered_json out = {{"bytes_total", s.bytes_total},
                                {"bytes_same_device", s.bytes_same_device},
                                {"bytes_same_process", s.bytes_same_process},
                                {"bytes_cross_process", s.bytes_cross_process},
                                {"bytes_fan_out", s.bytes_fan_out},
                                {"max_process_send_bytes", s.max_process_send_bytes}};
  nlohmann::ordered_json transfers = nlohmann::ordered_json::array();
  for (const Transfer& t : plan.transfers()) {
    nlohmann::ordered_json box = nlohmann::ordered_json::array();
    for (size_t d = 0; d < t.box.rank(); ++d) box.push_back({t.box.interval(d).begin, t.box.interval(d).end});
    const uint64_t bytes = dtype_byte_size(plan.key().dtype, static_cast<uint64_t>(t.box.volume()));
    transfers.push_back({{"stage", t.stage}, {"src", t.src}, {"dst", t.dst}, {"box", box}, {"bytes", bytes}});
  }
  out["transfers"] = std::move(transfers);
  return out;
}

// Whether a job's real hosts have levels to tell apart: some host with
// several processes, in a job of several hosts (of one, every byte stays).
bool reports_hosts(const Topology& topology) { return topology.hosts_shared() && topology.num_hosts() > 1; }

// The bytes per level of a plan over hosts (--hosts), and the per-host bound.
void add_host_levels(nlohmann::ordered_json& out, const Plan& plan) {
  const PlanStats& s = plan.stats();
  const Topology& topology = plan.key().topology;
  std::vector<int> host_of_process;
  for (int p = 0; p < topology.num_processes(); ++p) host_of_process.push_back(topology.host_of_process(p));
  out["hosts"] = topology.num_hosts();
  out["host_of_process"] = host_of_process;
  out["bytes_same_host"] = s.bytes_cross_process - s.bytes_cross_host;
  out["bytes_cross_host"] = s.bytes_cross_host;
  out["bytes_host_relay"] = s.bytes_host_relay;
  out["min_bytes_into_hosts"] = min_bytes_into_hosts(plan.key());
}

std::string_view kind_of(const Transfer& t, const Topology& topology) {
  if (t.stage == 1) return "fan out";
  if (t.stage == 2) return "host relay";
  if (t.src == t.dst) return "same device";
  const int from = topology.process_of(t.src);
  const int to = topology.process_of(t.dst);
  if (from == to) return "same process";
  if (!topology.hosts_shared()) return "cross process";
  return topology.host_of_process(from) == topology.host_of_process(to) ? "same host" : "cross host";
}

std::string percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? "" : fmt::format("  ({:.1f}%)", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

void print_host_levels(const Plan& plan) {
  const PlanStats& s = plan.stats();
  const Topology& topology = plan.key().topology;
  const std::vector<uint64_t> minimum = min_bytes_into_hosts(plan.key());
  uint64_t least = 0;
  for (uint64_t bytes : minimum) least += bytes;
  const uint64_t same_host = s.bytes_cross_process - s.bytes_cross_host;
  std::cout << fmt::format("\nby level, {} processes on {} hosts\n", topology.num_processes(), topology.num_hosts());
  std::cout << fmt::format("  same host, cross process {:>14}{}\n", same_host, percent(same_host, s.bytes_total));
  std::cout << fmt::format("  cross host               {:>14}{}  (the fewest possible: {})\n", s.bytes_cross_host,
                           percent(s.bytes_cross_host, s.bytes_total), least);
  std::cout << fmt::format("  host relay (stage 2)     {:>14}{}\n", s.bytes_host_relay,
                           percent(s.bytes_host_relay, s.bytes_total));
  std::cout << fmt::format("  fewest into each host    {}\n", fmt::join(minimum, ", "));
}

void print_text(const Plan& plan, int64_t max_rows, bool host_levels) {
  const PlanKey& key = plan.key();
  const Topology& topology = key.topology;
  std::cout << fmt::format("plan for {}[{}] over {} devices in {} process{}\n", dtype_name(key.dtype),
                           fmt::join(key.shape, ", "), topology.num_devices(), topology.num_processes(),
                           topology.num_processes() == 1 ? "" : "es");
  std::cout << fmt::format("  from {}\n  to   {}\n\n", key.src.to_string(), key.dst.to_string());
  std::cout << fmt::format("  {:>6}  {:>5}  {:>5}  {:>5}  {:>9}  {:<13}  {:<28}  {:>12}\n", "#", "stage", "src", "dst",
                           "processes", "kind", "box", "bytes");
  const std::vector<Transfer>& transfers = plan.transfers();
  for (size_t i = 0; i < transfers.size(); ++i) {
    if (max_rows > 0 && i == static_cast<size_t>(max_rows)) {
      std::cout << fmt::format("  ... {} more transfers (--max-rows 0 shows all, --json lists them)\n",
                               transfers.size() - i);
      break;
    }
    const Transfer& t = transfers[i];
    const std::string processes = fmt::format("{} -> {}", topology.process_of(t.src), topology.process_of(t.dst));
    std::cout << fmt::format("  {:>6}  {:>5}  {:>5}  {:>5}  {:>9}  {:<13}  {:<28}  {:>12}\n", i, t.stage, t.src, t.dst,
                             processes, kind_of(t, topology), t.box.to_string(),
                             dtype_byte_size(key.dtype, static_cast<uint64_t>(t.box.volume())));
  }
  const PlanStats& s = plan.stats();
  std::cout << fmt::format("\n{} transfers\n", transfers.size());
  std::cout << fmt::format("  bytes total              {:>14}\n", s.bytes_total);
  std::cout << fmt::format("  same device              {:>14}{}\n", s.bytes_same_device,
                           percent(s.bytes_same_device, s.bytes_total));
  std::cout << fmt::format("  same process             {:>14}{}\n", s.bytes_same_process,
                           percent(s.bytes_same_process, s.bytes_total));
  std::cout << fmt::format("  cross process            {:>14}{}\n", s.bytes_cross_process,
                           percent(s.bytes_cross_process, s.bytes_total));
  std::cout << fmt::format("  fan out (stage 1)        {:>14}{}\n", s.bytes_fan_out,
                           percent(s.bytes_fan_out, s.bytes_total));
  std::cout << fmt::format("  most sent by one process {:>14}\n", s.max_process_send_bytes);
  if (host_levels) print_host_levels(plan);
}

// Under mpirun, every rank's path to every rank (job_peer_paths), gathered at
// each rank: row r is rank r's. Collective. Empty for a job of one process.
std::vector<std::vector<std::string>> gather_peer_paths() {
  if (job_world().size == 1) return {};
  std::string mine;
  for (const std::string& path : job_peer_paths()) mine += path + '\n';
  std::vector<std::vector<std::string>> rows;
  for (const std::vector<std::byte>& bytes : job_transport().all_gather(std::as_bytes(std::span(mine)))) {
    std::vector<std::string>& row = rows.emplace_back();
    const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1) {
      row.push_back(text.substr(at, end - at));
    }
  }
  return rows;
}

void print_paths_text(const std::vector<std::vector<std::string>>& paths) {
  if (paths.empty()) return;
  std::cout << "\npaths between this job's processes (row: from rank; column: to rank)\n";
  for (size_t from = 0; from < paths.size(); ++from) {
    std::cout << fmt::format("  rank {:>4}: {}\n", from, fmt::join(paths[from], " | "));
  }
}

void run_plan(const PlanFlags& flags) {
  const int64_t max_rows = [&] {
    try {
      return parse_count(flags.max_rows, "row count");
    } catch (const Error& e) {
      throw e.with_context("--max-rows");
    }
  }();
  // Under mpirun every rank plans (so a bad layout fails on each); rank 0 prints.
  const Plan plan = plan_from_key(key_from_flags(flags));
  const std::vector<std::vector<std::string>> paths = gather_peer_paths();
  const bool host_levels = !flags.hosts.empty() || reports_hosts(plan.key().topology);
  if (job_world().rank != 0) return;
  if (flags.json) {
    nlohmann::ordered_json out = plan_json(plan);
    if (host_levels) add_host_levels(out, plan);
    if (!paths.empty()) out["paths"] = paths;
    std::cout << out.dump() << "\n";
  } else {
    print_text(plan, max_rows, host_levels);
    print_paths_text(paths);
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", kHelp);
  auto flags = std::make_shared<PlanFlags>();
  cmd->add_option("--shape", flags->shape, "Global shape, e.g. 32,8,4096")->required();
  cmd->add_option("--dtype", flags->dtype, "Element type (safetensors name, any case: f32, bf16, i32, ...)")
      ->required();
  add_layout_flags(*cmd, flags->src, "source");
  add_layout_flags(*cmd, flags->dst, "target");
  add_job_flags(*cmd, flags->job);
  cmd->add_flag("--uneven", flags->uneven, "Allow dimensions not divisible by their shard count (both layouts)");
  cmd->add_flag("--json", flags->json, "Print the plan as one JSON document");
  cmd->add_option("--hosts", flags->hosts,
                  "Hosts the processes sit on (dividing their count; consecutive runs of processes per host): "
                  "plan each element into a host once, and count the bytes per level");
  cmd->add_option("--max-rows", flags->max_rows, "Transfers listed in text output (0: all)")->capture_default_str();
  cmd->callback([flags] { run_plan(*flags); });
}

}  // namespace reshard::cli
