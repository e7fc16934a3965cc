// Which transport and rendezvous each launcher's environment chooses.
#include "execute/launcher_env.h"

#include <gtest/gtest.h>

#include <map>

#include "reshard/layout/error.h"

namespace reshard::execute_detail {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// `vars` with `name` set to `value` (erase and emplace: GCC 12 warns falsely,
// -Wrestrict, on assigning a literal to a map's string).
std::map<std::string, std::string> with(std::map<std::string, std::string> vars, const std::string& name,
                                        const std::string& value) {
  vars.erase(name);
  vars.emplace(name, value);
  return vars;
}

const std::map<std::string, std::string> kTorchrun = {
    {"RANK", "2"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};

TEST(LauncherEnv, NothingSetIsOneProcess) {
  LauncherChoice choice = choose_launcher(TransportKind::kAuto, true, env_of({}));
  EXPECT_EQ(choice.transport, TransportKind::kNone);
  EXPECT_EQ(choice.rendezvous, "single");
  EXPECT_EQ(choice.size, 1);
}

TEST(LauncherEnv, TorchrunIsTcpWithStoreAtMaster) {
  LauncherChoice choice = choose_launcher(TransportKind::kAuto, true, env_of(kTorchrun));
  EXPECT_EQ(choice.transport, TransportKind::kTcp);
  EXPECT_EQ(choice.rendezvous, "torchrun");
  EXPECT_EQ(choice.rank, 2);
  EXPECT_EQ(choice.size, 4);
  EXPECT_EQ(choice.coordinator, "10.0.0.1:29500");
}

// torchrun's agent holding its own store at MASTER_PORT: reshard meets on the
// next port; RESHARD_COORDINATOR overrides both.
TEST(LauncherEnv, TorchrunsAgentStoreKeepsItsPort) {
  auto vars = with(kTorchrun, "TORCHELASTIC_USE_AGENT_STORE", "True");
  EXPECT_EQ(choose_launcher(TransportKind::kAuto, true, env_of(vars)).coordinator, "10.0.0.1:29501");
  vars = with(vars, "RESHARD_COORDINATOR", "10.0.0.1:7000");
  EXPECT_EQ(choose_launcher(TransportKind::kAuto, true, env_of(vars)).coordinator, "10.0.0.1:7000");
  EXPECT_THROW(choose_launcher(TransportKind::kAuto, true, env_of(with(kTorchrun, "MASTER_PORT", "70000"))), Error);
}

TEST(LauncherEnv, MpiLauncherWinsWhenMpiIsBuilt) {
  auto vars = with(kTorchrun, "OMPI_COMM_WORLD_SIZE", "4");
  EXPECT_EQ(choose_launcher(TransportKind::kAuto, true, env_of(vars)).transport, TransportKind::kMpi);
  EXPECT_EQ(choose_launcher(TransportKind::kAuto, false, env_of(vars)).transport, TransportKind::kTcp);
  EXPECT_EQ(choose_launcher(TransportKind::kAuto, true, env_of({{"PMIX_RANK", "0"}})).rendezvous, "mpirun");
}

TEST(LauncherEnv, SlurmNeedsACoordinator) {
  std::map<std::string, std::string> vars = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}};
  EXPECT_EQ(choose_launcher(TransportKind::kAuto, false, env_of(vars)).transport, TransportKind::kNone);
  LauncherChoice choice =
      choose_launcher(TransportKind::kAuto, false, env_of(with(vars, "RESHARD_COORDINATOR", "node0:4000")));
  EXPECT_EQ(choice.rendezvous, "slurm");
  EXPECT_EQ(choice.rank, 1);
  EXPECT_EQ(choice.coordinator, "node0:4000");
}

TEST(LauncherEnv, ExplicitKinds) {
  EXPECT_EQ(choose_launcher(TransportKind::kNone, true, env_of(kTorchrun)).transport, TransportKind::kNone);
  EXPECT_EQ(choose_launcher(TransportKind::kMpi, true, env_of({})).transport, TransportKind::kMpi);
  EXPECT_THROW(choose_launcher(TransportKind::kMpi, false, env_of({})), Error);
  EXPECT_THROW(choose_launcher(TransportKind::kTcp, true, env_of({})), Error);
  std::map<std::string, std::string> own = {{"RESHARD_RANK", "0"}, {"RESHARD_SIZE", "3"}, {"RESHARD_COORDINATOR", "h:1"}};
  EXPECT_EQ(choose_launcher(TransportKind::kTcp, true, env_of(own)).rendezvous, "reshard");
}

TEST(LauncherEnv, BadRanksAreRefused) {
  for (const char* rank : {"4", "-1", "x", "99999999999999999999", "1 "}) {
    EXPECT_THROW(choose_launcher(TransportKind::kAuto, true, env_of(with(kTorchrun, "RANK", rank))), Error) << rank;
  }
}

TEST(LauncherEnv, KindNamesRoundTrip) {
  for (TransportKind kind : {TransportKind::kAuto, TransportKind::kMpi, TransportKind::kTcp, TransportKind::kNone}) {
    EXPECT_EQ(parse_transport_kind(transport_kind_name(kind)), kind);
  }
  EXPECT_THROW(parse_transport_kind("gloo"), Error);
}

}  // namespace
}  // namespace reshard::execute_detail
