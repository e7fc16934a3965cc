// `reshard plan`: its JSON contract against the library, and its errors.
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/support/run_reshard.h"
#include "reshard/layout/parse.h"
#include "reshard/plan/planner.h"

namespace reshard {
namespace {

using testing::CommandResult;

// Runs `reshard plan` with `args` given as one space-separated string (no
// argument here contains a space), plus `extra` arguments verbatim.
CommandResult run_plan(const std::string& args, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {"plan"};
  std::istringstream words(args);
  for (std::string word; words >> word;) argv.push_back(word);
  argv.insert(argv.end(), extra.begin(), extra.end());
  return testing::run_reshard(argv);
}

constexpr const char* kSeedSrcDevices = "0,4,8,12,1,5,9,13,2,6,10,14,3,7,11,15";
constexpr const char* kSeedDstDevices = "0,1,4,5,2,3,6,7,8,9,12,13,10,11,14,15";

NamedSharding sharding_of(const std::string& mesh, const std::string& devices, const std::string& spec,
                          bool uneven = false) {
  std::vector<MeshAxis> axes = parse_mesh_axes(mesh);
  Mesh m = devices.empty() ? Mesh::with_default_order(axes) : Mesh(axes, parse_device_list(devices));
  return NamedSharding(std::move(m), PartitionSpec::parse(spec), MemoryKind::kDevice, uneven);
}

// Checks the document has exactly the documented shape and matches `plan`.
void expect_json_matches(const nlohmann::json& doc, const Plan& plan) {
  const PlanStats& s = plan.stats();
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc.size(), 7u) << doc.dump();
  EXPECT_EQ(doc.at("bytes_total").get<uint64_t>(), s.bytes_total);
  EXPECT_EQ(doc.at("bytes_same_device").get<uint64_t>(), s.bytes_same_device);
  EXPECT_EQ(doc.at("bytes_same_process").get<uint64_t>(), s.bytes_same_process);
  EXPECT_EQ(doc.at("bytes_cross_process").get<uint64_t>(), s.bytes_cross_process);
  EXPECT_EQ(doc.at("bytes_fan_out").get<uint64_t>(), s.bytes_fan_out);
  EXPECT_EQ(doc.at("max_process_send_bytes").get<uint64_t>(), s.max_process_send_bytes);
  const nlohmann::json& transfers = doc.at("transfers");
  ASSERT_EQ(transfers.size(), plan.transfers().size());
  uint64_t sum = 0;
  for (size_t i = 0; i < transfers.size(); ++i) {
    const nlohmann::json& t = transfers[i];
    const Transfer& expected = plan.transfers()[i];
    EXPECT_EQ(t.size(), 5u) << t.dump();
    EXPECT_EQ(t.at("stage").get<int>(), expected.stage);
    EXPECT_EQ(t.at("src").get<DeviceId>(), expected.src);
    EXPECT_EQ(t.at("dst").get<DeviceId>(), expected.dst);
    std::vector<Interval> box;
    for (const nlohmann::json& range : t.at("box")) {
      ASSERT_EQ(range.size(), 2u);
      box.push_back({range[0].get<int64_t>(), range[1].get<int64_t>()});
    }
    EXPECT_EQ(Box::from_intervals(box), expected.box) << i;
    const uint64_t bytes = t.at("bytes").get<uint64_t>();
    EXPECT_EQ(bytes, dtype_byte_size(plan.key().dtype, static_cast<uint64_t>(expected.box.volume())));
    sum += bytes;
  }
  EXPECT_EQ(sum, s.bytes_total);
}

TEST(PlanCli, SeedScenarioJsonMatchesTheLibrary) {
  const CommandResult r = run_plan(std::string("--shape 32,8,4096 --dtype f32 --src-mesh data=4,model=4 ") +
                               "--src-devices " + kSeedSrcDevices + " --src-spec data,None,model " +
                               "--dst-mesh data=4,model=4 --dst-devices " + kSeedDstDevices +
                               " --dst-spec data,None,model --processes 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const PlanKey key{{32, 8, 4096}, DType::kF32, sharding_of("data=4,model=4", kSeedSrcDevices, "data,None,model"),
                    sharding_of("data=4,model=4", kSeedDstDevices, "data,None,model"), Topology::uniform(16, 4)};
  expect_json_matches(nlohmann::json::parse(r.out), make_plan(key));
  EXPECT_EQ(nlohmann::json::parse(r.out).at("bytes_cross_process"), 12u * 8 * 8 * 1024 * 4);
}

// The seed's replicated target: each process's four devices want everything;
// the remote quarter-shards cross into each process once and fan out there.
TEST(PlanCli, ReplicatedTargetJsonHasBothStages) {
  const CommandResult r = run_plan(std::string("--shape 32,8,4096 --dtype f32 --src-mesh data=4,model=4 ") +
                                       "--src-devices " + kSeedSrcDevices + " --src-spec data,None,model " +
                                       "--dst-mesh data=4,model=4 --processes 4 --json",
                                   {"--dst-spec", ""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const PlanKey key{{32, 8, 4096}, DType::kF32, sharding_of("data=4,model=4", kSeedSrcDevices, "data,None,model"),
                    sharding_of("data=4,model=4", "", ""), Topology::uniform(16, 4)};
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  expect_json_matches(doc, make_plan(key));
  EXPECT_EQ(doc.at("bytes_cross_process"), 12u << 20);
  EXPECT_EQ(doc.at("bytes_fan_out"), 36u << 20);
  int stage_one = 0;
  for (const nlohmann::json& t : doc.at("transfers")) stage_one += t.at("stage").get<int>() == 1;
  EXPECT_GT(stage_one, 0);
  EXPECT_EQ(doc.at("transfers").back().at("stage"), 1);
}

// The seed's replicated target over 4 processes on 2 hosts: each host takes
// the half it lacks once (not once per process), and the levels add up.
TEST(PlanCli, HostsCountEachLevelAndCrossEachHostOnce) {
  const CommandResult r = run_plan(std::string("--shape 32,8,4096 --dtype f32 --src-mesh data=4,model=4 ") +
                                       "--src-devices " + kSeedSrcDevices + " --src-spec data,None,model " +
                                       "--dst-mesh data=4,model=4 --processes 4 --hosts 2 --json",
                                   {"--dst-spec", ""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const PlanKey key{{32, 8, 4096}, DType::kF32, sharding_of("data=4,model=4", kSeedSrcDevices, "data,None,model"),
                    sharding_of("data=4,model=4", "", ""), Topology::uniform(16, 4).with_uniform_hosts(2)};
  const Plan plan = make_plan(key);
  nlohmann::json doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("hosts"), 2);
  EXPECT_EQ(doc.at("host_of_process"), nlohmann::json::parse("[0, 0, 1, 1]"));
  // Each host's source devices hold half of the 4 MiB array: it lacks 2 MiB,
  // which crosses once (a plan blind to hosts takes it into both processes).
  EXPECT_EQ(doc.at("min_bytes_into_hosts"), nlohmann::json::parse("[2097152, 2097152]"));
  EXPECT_EQ(doc.at("bytes_cross_host"), 4u << 20);
  EXPECT_EQ(doc.at("bytes_cross_host").get<uint64_t>() + doc.at("bytes_same_host").get<uint64_t>(),
            doc.at("bytes_cross_process").get<uint64_t>());
  EXPECT_EQ(doc.at("bytes_host_relay").get<uint64_t>(), plan.stats().bytes_host_relay);
  EXPECT_GT(plan.stats().bytes_host_relay, 0u);
  for (const char* field : {"hosts", "host_of_process", "bytes_same_host", "bytes_cross_host", "bytes_host_relay",
                            "min_bytes_into_hosts"}) {
    doc.erase(field);
  }
  expect_json_matches(doc, plan);  // the rest as without hosts
  const CommandResult text = run_plan(std::string("--shape 32,8,4096 --dtype f32 --src-mesh data=4,model=4 ") +
                                          "--src-spec data,None,model --dst-mesh data=4,model=4 --processes 4 --hosts 2",
                                      {"--dst-spec", ""});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("by level, 4 processes on 2 hosts"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("host relay"), std::string::npos) << text.out;
  const CommandResult uneven = run_plan("--shape 8 --dtype f32 --src-mesh d=4 --src-spec d --dst-mesh d=4 "
                                        "--dst-spec d --processes 4 --hosts 3");
  EXPECT_NE(uneven.exit_code, 0);
  EXPECT_NE(uneven.err.find("--hosts: 4 processes cannot be split evenly over 3 hosts"), std::string::npos)
      << uneven.err;
}

TEST(PlanCli, DefaultsToOneProcessAndTheLargestDeviceUsed) {
  const CommandResult r = run_plan("--shape 8,6 --dtype bf16 --src-mesh x=2,y=3 --src-devices 5,0,3,1,4,2 --src-spec x "
                                   "--dst-mesh a=4 --dst-devices 7,6,1,0 --json",
                                   {"--dst-spec", "P(None, None)"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const PlanKey key{{8, 6}, DType::kBF16, sharding_of("x=2,y=3", "5,0,3,1,4,2", "x"),
                    sharding_of("a=4", "7,6,1,0", ""), Topology::uniform(8, 1)};
  expect_json_matches(nlohmann::json::parse(r.out), make_plan(key));
}

TEST(PlanCli, NumDevicesAndProcessesSetTheTopology) {
  const CommandResult r = run_plan("--shape 8 --dtype i32 --src-mesh x=4 --dst-mesh y=2 --dst-devices 6,7 "
                                   "--dst-spec y --num-devices 12 --processes 3 --json",
                                   {"--src-spec", ""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const PlanKey key{{8}, DType::kI32, sharding_of("x=4", "", ""), sharding_of("y=2", "6,7", "y"),
                    Topology::uniform(12, 3)};
  const Plan plan = make_plan(key);
  ASSERT_GT(plan.stats().bytes_cross_process, 0u);
  expect_json_matches(nlohmann::json::parse(r.out), plan);
}

TEST(PlanCli, UnevenAppliesToBothLayouts) {
  const CommandResult r = run_plan("--shape 7,3 --dtype f16 --src-mesh x=4 --src-spec x --dst-mesh y=2,z=3 "
                                   "--dst-spec y,z --uneven --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const PlanKey key{{7, 3}, DType::kF16, sharding_of("x=4", "", "x", true), sharding_of("y=2,z=3", "", "y,z", true),
                    Topology::uniform(6, 1)};
  expect_json_matches(nlohmann::json::parse(r.out), make_plan(key));
}

// The first line of `text` that contains `label` (empty if none).
std::string line_with(const std::string& text, const std::string& label) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find(label) != std::string::npos && line.find('[') == std::string::npos) return line;
  }
  return "";
}

TEST(PlanCli, TextOutputListsTransfersAndStats) {
  const CommandResult r = run_plan(std::string("--shape 32,8,4096 --dtype f32 --src-mesh data=4,model=4 ") +
                               "--src-devices " + kSeedSrcDevices + " --src-spec data,None,model " +
                               "--dst-mesh data=4,model=4 --dst-devices " + kSeedDstDevices +
                               " --dst-spec data,None,model --processes 4 --max-rows 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[0:8, 0:8, 1024:2048]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("13 more transfers"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("16 transfers"), std::string::npos) << r.out;
  EXPECT_NE(line_with(r.out, "cross process ").find("3145728  (75.0%)"), std::string::npos) << r.out;
  EXPECT_NE(line_with(r.out, "most sent by one process").find("1048576"), std::string::npos) << r.out;
  EXPECT_NE(line_with(r.out, "fan out (stage 1)").find(" 0"), std::string::npos) << r.out;
}

TEST(PlanCli, TextOutputShowsStagesAndFanOut) {
  const CommandResult r = run_plan("--shape 8,4 --dtype f32 --src-mesh x=2 --src-devices 0,1 --src-spec x "
                                   "--dst-mesh y=2 --dst-devices 2,3 --processes 2 --max-rows 0",
                                   {"--dst-spec", ""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Devices 0,1 are process 0 and 2,3 process 1: all 128 bytes cross into
  // device 2, and device 3 copies them from it.
  EXPECT_NE(r.out.find("stage"), std::string::npos) << r.out;
  EXPECT_NE(line_with(r.out, "fan out (stage 1)").find("128  (50.0%)"), std::string::npos) << r.out;
  EXPECT_NE(line_with(r.out, "cross process ").find("128  (50.0%)"), std::string::npos) << r.out;
  std::istringstream lines(r.out);
  int fan_out_rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("fan out ") != std::string::npos && line.find('[') != std::string::npos) {
      ++fan_out_rows;
      EXPECT_NE(line.find("    1      2      3"), std::string::npos) << line;
    }
  }
  EXPECT_EQ(fan_out_rows, 2) << r.out;
}

TEST(PlanCli, HelpHasAnExample) {
  const CommandResult r = run_plan("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Example"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--src-devices"), std::string::npos) << r.out;
}

struct BadFlags {
  std::string args;
  int exit_code;
  std::string names;  // the flag the message must name
};

TEST(PlanCli, BadFlagsFailWithAMessageNamingTheFlag) {
  const std::string ok_src = "--src-mesh x=4 --src-spec x";
  const std::string ok_dst = "--dst-mesh y=2 --dst-spec y";
  const std::string ok = "--shape 8,4 --dtype f32 " + ok_src + " " + ok_dst;
  const BadFlags cases[] = {
      {"--shape 8,a --dtype f32 " + ok_src + " " + ok_dst, 2, "--shape"},
      {"--shape 8,4 --dtype f33 " + ok_src + " " + ok_dst, 2, "--dtype"},
      {"--shape 8,4 --dtype f32 --src-mesh x4 --src-spec x " + ok_dst, 2, "--src-mesh"},
      {"--shape 8,4 --dtype f32 --src-mesh x=4 --src-devices 0,1,q,3 --src-spec x " + ok_dst, 2, "--src-devices"},
      {"--shape 8,4 --dtype f32 " + ok_src + " --dst-mesh y=2 --dst-spec (y", 2, "--dst-spec"},
      {"--shape 8,4 --dtype f32 " + ok_src + " --dst-mesh y=0 --dst-spec y", 2, "--dst-mesh"},
      {ok + " --processes 3", 2, "--processes"},
      {ok + " --processes 0", 2, "--processes"},
      {ok + " --num-devices 2", 2, "--num-devices"},
      {ok + " --num-devices many", 2, "--num-devices"},
      {"--shape 8,4 --dtype f32 " + ok_src, 2, "--dst-mesh"},
      {"--shape 8,4 --dtype f32 " + ok_src + " --dst-mesh y=2 --dst-spec z", 1, "--dst-spec"},
      {"--shape 6,4 --dtype f32 " + ok_src + " " + ok_dst, 1, "--src-spec"},
      {"--shape 8,4 --dtype f32 --src-mesh x=4 --src-devices 0,1,2 --src-spec x " + ok_dst, 1, "--src-devices"},
  };
  for (const BadFlags& c : cases) {
    const CommandResult r = run_plan(c.args + " --json");
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.names), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace reshard
