// `reshard show` run as a subprocess: the golden cases through --json, the
// picture and table, and every kind of malformed flag.
#include <cstdint>
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/support/run_on_terminal.h"
#include "cli/support/run_reshard.h"
#include "support/golden_sharding.h"

namespace reshard::testing {
namespace {

using Args = std::vector<std::string>;
using Json = nlohmann::ordered_json;

const std::string kPermuted = "0,4,8,12,1,5,9,13,2,6,10,14,3,7,11,15";
const Args kExample = {"show", "--mesh", "data=4,model=4", "--devices", kPermuted, "--spec", "None,data",
                       "--shape", "8,4096"};

// The lines of `text` with every space removed: "│ CPU 0 │" -> "│CPU0│".
std::vector<std::string> squeezed_lines(const std::string& text) {
  std::vector<std::string> lines(1);
  for (char c : text) {
    if (c == '\n') {
      lines.emplace_back();
    } else if (c != ' ') {
      lines.back() += c;
    }
  }
  return lines;
}

// Whether some line of `text`, spaces removed, is exactly `squeezed`.
bool has_line(const std::string& text, const std::string& squeezed) {
  const std::vector<std::string> lines = squeezed_lines(text);
  return std::find(lines.begin(), lines.end(), squeezed) != lines.end();
}

Args with(Args args, const Args& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Runs a command that must succeed and print one JSON document (and nothing else).
Json run_json(const Args& args) {
  const CommandResult r = run_reshard(with(args, {"--json"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  try {
    return Json::parse(r.out);  // throws on anything after the document but whitespace
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not one JSON document: " << e.what() << "\n" << r.out;
    return Json();
  }
}

// A failure must be a clean exit 1 or 2 with "error: ..." naming the problem.
::testing::AssertionResult fails_cleanly(const Args& args, std::set<int> codes,
                                         const std::vector<std::string>& mentions) {
  const CommandResult r = run_reshard(args);
  const std::string command = fmt::format("reshard {}", fmt::join(args, " "));
  if (!codes.count(r.exit_code)) {
    return ::testing::AssertionFailure() << command << " exited " << r.exit_code << ": " << r.err;
  }
  if (r.err.rfind("error: ", 0) != 0) return ::testing::AssertionFailure() << command << " said: " << r.err;
  for (const std::string& m : mentions) {
    if (r.err.find(m) == std::string::npos) {
      return ::testing::AssertionFailure() << command << ": stderr lacks '" << m << "': " << r.err;
    }
  }
  if (!r.out.empty()) return ::testing::AssertionFailure() << command << " printed to stdout: " << r.out;
  return ::testing::AssertionSuccess();
}

Args golden_args(const GoldenCase& c, const std::string& spec) {
  Args args = {"show", "--mesh", c.mesh_flag(), "--devices", c.devices_flag(), "--spec", spec,
               "--shape", c.shape_flag()};
  if (c.uneven) args.push_back("--uneven");
  return args;
}

class GoldenShow : public ::testing::TestWithParam<GoldenCase> {};

// What the error message must name for each error class.
std::vector<std::string> error_mentions(const GoldenCase& c) {
  if (c.error == "indivisible") return {"divisible"};
  if (c.error == "duplicate_axis") return {"duplicate", "--spec"};
  if (c.error == "unknown_axis") return {"'" + c.spec.front().front() + "'", "--spec"};
  if (c.error == "rank") return {"rank", "--spec"};
  return {};
}

TEST_P(GoldenShow, JsonMatchesJax) {
  const GoldenCase& c = GetParam();
  for (const std::string& spec : {c.spec_flag(), c.spec_jax()}) {
    SCOPED_TRACE(spec);
    if (!c.error.empty()) {
      EXPECT_TRUE(fails_cleanly(with(golden_args(c, spec), {"--json"}), {1}, error_mentions(c)));
      continue;
    }
    const Json j = run_json(golden_args(c, spec));
    ASSERT_TRUE(j.is_object());
    std::vector<std::string> keys;
    for (const auto& [key, value] : j.items()) keys.push_back(key);
    EXPECT_EQ(keys, (std::vector<std::string>{"shape", "shard_shape", "fully_replicated", "devices"}));
    EXPECT_EQ(j.at("shape").get<std::vector<int64_t>>(), c.shape);
    if (c.uneven) {
      EXPECT_TRUE(j.at("shard_shape").is_null());
    } else {
      EXPECT_EQ(j.at("shard_shape").get<std::vector<int64_t>>(), *c.shard_shape);
    }
    int64_t max_replica = 0;
    for (const GoldenDevice& d : c.expected) max_replica = std::max(max_replica, d.replica);
    // Fully replicated exactly when every device holds the same slice.
    EXPECT_EQ(j.at("fully_replicated").get<bool>(), max_replica + 1 == static_cast<int64_t>(c.expected.size()));
    const Json& devices = j.at("devices");
    ASSERT_EQ(devices.size(), c.expected.size());
    for (size_t i = 0; i < c.expected.size(); ++i) {
      const Json& d = devices[i];
      std::vector<std::string> device_keys;
      for (const auto& [key, value] : d.items()) device_keys.push_back(key);
      EXPECT_EQ(device_keys, (std::vector<std::string>{"id", "process", "index", "replica"}));
      EXPECT_EQ(d.at("id").get<int64_t>(), c.expected[i].id);
      EXPECT_EQ(d.at("process").get<int64_t>(), 0);  // one process by default
      EXPECT_EQ((d.at("index").get<std::vector<std::pair<int64_t, int64_t>>>()), c.expected[i].index);
      EXPECT_EQ(d.at("replica").get<int64_t>(), c.expected[i].replica);
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& param) { return param.param.name; }

INSTANTIATE_TEST_SUITE_P(Cases, GoldenShow, ::testing::ValuesIn(golden_sharding_cases()), case_name);

TEST(Show, TheExampleAsJson) {
  const Json j = run_json(kExample);
  EXPECT_EQ(j.at("shard_shape"), Json({8, 1024}));
  EXPECT_FALSE(j.at("fully_replicated").get<bool>());
  const std::vector<int64_t> ids = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
  ASSERT_EQ(j.at("devices").size(), 16u);
  for (size_t i = 0; i < 16; ++i) {
    const Json& d = j.at("devices")[i];
    const auto chunk = static_cast<int64_t>(i / 4);  // `data` is the first mesh axis
    EXPECT_EQ(d.at("id").get<int64_t>(), ids[i]);
    EXPECT_EQ(d.at("index"), Json({{0, 8}, {chunk * 1024, chunk * 1024 + 1024}}));
    EXPECT_EQ(d.at("replica").get<int64_t>(), static_cast<int64_t>(i % 4));
  }
}

TEST(Show, ProcessesFollowTheFloorRule) {
  const Json four = run_json(with(kExample, {"--processes", "4"}));
  for (const Json& d : four.at("devices")) EXPECT_EQ(d.at("process").get<int64_t>(), d.at("id").get<int64_t>() / 4);
  const Json spread = run_json(with(kExample, {"--num-devices", "64", "--processes", "8"}));
  for (const Json& d : spread.at("devices")) {
    EXPECT_EQ(d.at("process").get<int64_t>(), d.at("id").get<int64_t>() / 8);
  }
}

TEST(Show, TheExampleAsPictureAndTable) {
  const CommandResult r = run_reshard(kExample);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "ANSI escapes on a pipe";
  // One block per distinct slice, left to right, labelled with its devices.
  const size_t a = r.out.find("CPU 0,4,8,12"), b = r.out.find("CPU 1,5,9,13");
  const size_t c = r.out.find("CPU 2,6,10,14"), d = r.out.find("CPU 3,7,11,15");
  ASSERT_NE(a, std::string::npos) << r.out;
  ASSERT_NE(d, std::string::npos) << r.out;
  EXPECT_TRUE(a < b && b < c && c < d) << r.out;
  EXPECT_NE(r.out.find("┌"), std::string::npos);
  EXPECT_NE(r.out.find("┘"), std::string::npos);
  // The table: device, process, slice, replica for every device, in mesh order.
  EXPECT_TRUE(has_line(r.out, "deviceprocessslicereplica")) << r.out;
  EXPECT_TRUE(has_line(r.out, "40[0:8,0:1024]1")) << r.out;  // device 4, process 0, replica 1
  EXPECT_TRUE(has_line(r.out, "150[0:8,3072:4096]3")) << r.out;
}

// The widths of the blocks on a picture's top border, in columns.
std::vector<size_t> top_border_widths(const std::string& out) {
  const size_t start = out.find("┌");
  const size_t end = out.find("┐", start);
  std::vector<size_t> widths(1, 0);
  for (size_t i = start + std::string("┌").size(); i < end;) {
    if (out.compare(i, std::string("┬").size(), "┬") == 0) {
      widths.push_back(0);
      i += std::string("┬").size();
    } else {
      ++widths.back();
      i += std::string("─").size();
    }
  }
  return widths;
}

TEST(Show, BlocksAreSizedInProportion) {
  const CommandResult r = run_reshard({"show", "--mesh", "x=4", "--spec", "x", "--shape", "10", "--uneven"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<size_t> widths = top_border_widths(r.out);
  ASSERT_EQ(widths.size(), 4u) << r.out;
  // Slices of 3, 3, 3 and 1 elements.
  EXPECT_EQ(widths[0], widths[1]);
  EXPECT_EQ(widths[1], widths[2]);
  EXPECT_GT(widths[0], 2 * widths[3]);
  EXPECT_NE(r.out.find("[9:10]"), std::string::npos);
}

TEST(Show, TwoDimensionalPictureIsAGrid) {
  const CommandResult r = run_reshard({"show", "--mesh", "x=2,y=2", "--spec", "x,y", "--shape", "4,4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has_line(r.out, "│CPU0│CPU1│")) << r.out;
  EXPECT_TRUE(has_line(r.out, "│CPU2│CPU3│")) << r.out;
  EXPECT_NE(r.out.find("├"), std::string::npos);  // a line between the rows
  EXPECT_LT(r.out.find("CPU 1"), r.out.find("CPU 2"));
}

TEST(Show, ReplicatedArrayIsOneBlockWithEveryDevice) {
  const CommandResult r = run_reshard({"show", "--mesh", "x=4", "--spec", "", "--shape", "6,6"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("CPU 0,1,2,3"), std::string::npos) << r.out;
  EXPECT_EQ(top_border_widths(r.out).size(), 1u);
}

// The seed's [32, 8, 4096] array: its two split dimensions drawn as a grid,
// the whole one named in the caption; then the table as for any rank.
TEST(Show, HigherRanksDrawTheirSplitDimensions) {
  const CommandResult r =
      run_reshard({"show", "--mesh", "data=2,model=4", "--spec", "None,data,model", "--shape", "32,8,4096"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\n[32, 8, 4096]: dim 0 (32) whole; rows: dim 1 split 2, columns: dim 2 split 4\n┌"),
            std::string::npos) << r.out;
  EXPECT_EQ(top_border_widths(r.out).size(), 4u) << r.out;
  EXPECT_LT(r.out.find("CPU 3"), r.out.find("├"));  // devices 0-3 on the first row, 4-7 on the second
  EXPECT_GT(r.out.find("CPU 4"), r.out.find("├"));
  EXPECT_NE(r.out.find("[0:32, 4:8, 3072:4096]"), std::string::npos) << r.out;
  const CommandResult grids =
      run_reshard({"show", "--mesh", "x=2,y=2,z=2", "--spec", "x,y,None,z", "--shape", "4,4,3,8"});
  ASSERT_EQ(grids.exit_code, 0) << grids.err;
  EXPECT_NE(grids.out.find("dim 2 (3) whole; grids: dim 0 split 2; rows: dim 1 split 2, columns: dim 3 split 2\n"
                           "dim 0 [0:2]\n┌"), std::string::npos) << grids.out;
  EXPECT_NE(grids.out.find("dim 0 [2:4]\n┌"), std::string::npos) << grids.out;
}

TEST(Show, ScalarsWork) {
  const Json j = run_json({"show", "--mesh", "x=2", "--spec", "P()", "--shape", ""});
  EXPECT_EQ(j.at("shape"), Json::array());
  EXPECT_EQ(j.at("shard_shape"), Json::array());
  EXPECT_TRUE(j.at("fully_replicated").get<bool>());
  EXPECT_EQ(j.at("devices")[1].at("replica"), 1);
  EXPECT_EQ(j.at("devices")[1].at("index"), Json::array());
  const CommandResult r = run_reshard({"show", "--mesh", "x=2", "--spec", "P()", "--shape", ""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[]: a scalar\n┌"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CPU 0,1"), std::string::npos) << r.out;
}

TEST(Show, ColourOnlyOnATerminal) {
  const CommandResult tty = run_reshard_on_terminal(kExample);
  ASSERT_EQ(tty.exit_code, 0) << tty.err;
  EXPECT_NE(tty.out.find("\x1b[48;5;"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("CPU 0,4,8,12"), std::string::npos);
  const CommandResult pipe = run_reshard(kExample);
  EXPECT_EQ(pipe.out.find('\x1b'), std::string::npos);
  // JSON is for programs: plain even on a terminal.
  const CommandResult json = run_reshard_on_terminal(with(kExample, {"--json"}));
  EXPECT_EQ(json.out.find('\x1b'), std::string::npos);
}

TEST(Show, LargeMeshesStillShowTheTable) {
  const CommandResult r = run_reshard({"show", "--mesh", "a=64,b=64", "--spec", "a,b", "--shape", "4096,4096"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("too many blocks"), std::string::npos);
  EXPECT_NE(r.out.find("[4032:4096, 4032:4096]"), std::string::npos);
}

TEST(Show, HugeDimensionsNeitherOverflowNorCrash) {
  const Json j = run_json({"show", "--mesh", "x=2", "--spec", "x", "--shape", "9223372036854775807", "--uneven"});
  EXPECT_EQ(j.at("devices")[0].at("index"), Json({{0, int64_t{1} << 62}}));
  EXPECT_EQ(j.at("devices")[1].at("index"), Json({{int64_t{1} << 62, INT64_MAX}}));
  const CommandResult r = run_reshard({"show", "--mesh", "x=4", "--spec", "x", "--shape", "4000000000000,4000000000000"});
  EXPECT_EQ(r.exit_code, 0) << r.err;  // 1.6e25 elements: more than int64 counts, still a valid layout
  EXPECT_NE(r.out.find("[3000000000000:4000000000000, 0:4000000000000]"), std::string::npos) << r.out;
}

TEST(Show, HelpExplainsWithExamples) {
  const CommandResult r = run_reshard({"show", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word : {"--mesh", "--devices", "--spec", "--shape", "--uneven", "--json", "--num-devices",
                           "--processes", "Examples", "reshard show --mesh data=4,model=4"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << word;
  }
}

const Args kMesh4 = {"show", "--mesh", "x=4", "--spec", "x", "--shape", "8"};

Args replace(Args args, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) {
      args[i + 1] = value;
      return args;
    }
  }
  return with(args, {flag, value});
}

TEST(ShowErrors, MalformedMesh) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"", {"--mesh"}},
      {"x", {"--mesh", "'x'"}},
      {"x=", {"--mesh"}},
      {"=4", {"--mesh"}},
      {"x=0", {"--mesh", "size 0"}},
      {"x=-4", {"--mesh", "-4"}},
      {"x=four", {"--mesh", "'four'"}},
      {"x=4;y=2", {"--mesh"}},
      {"x=99999999999999999999", {"--mesh", "99999999999999999999"}},
      {"x=4294967296,y=4294967296", {"--mesh"}},  // the product overflows int64
      {"x=100000,y=100000", {"--mesh"}},           // 10^10 devices
      {"x=2,x=2", {"--mesh", "'x'"}},
  };
  for (const auto& [mesh, mentions] : cases) {
    EXPECT_TRUE(fails_cleanly(replace(kMesh4, "--mesh", mesh), {1, 2}, mentions)) << mesh;
  }
}

TEST(ShowErrors, MalformedDevices) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"0,1,1,2", {"--devices", "1", "twice"}},
      {"0,1,2", {"--devices", "4", "3"}},
      {"0,1,2,3,4", {"--devices", "5"}},
      {"0,a,2,3", {"--devices", "'a'"}},
      {"0,-1,2,3", {"--devices", "-1"}},
      {"0,,2,3", {"--devices"}},
      {"0,1,2,99999999999999999999", {"--devices", "99999999999999999999"}},
      {"0,1,2,5000000", {"--devices", "5000000"}},
      {"0,1,2,3.5", {"--devices", "3.5"}},
  };
  for (const auto& [devices, mentions] : cases) {
    EXPECT_TRUE(fails_cleanly(with(kMesh4, {"--devices", devices}), {1, 2}, mentions)) << devices;
  }
}

TEST(ShowErrors, MalformedSpec) {
  const std::vector<std::tuple<std::string, int, std::vector<std::string>>> cases = {
      {"z", 1, {"--spec", "'z'"}},
      {"x,x", 1, {"--spec", "`x`"}},
      {"((x))", 1, {"--spec", "tuple inside a tuple"}},
      {"P('x'", 2, {"--spec", "P('x'"}},
      {"x;y", 2, {"--spec"}},
      {"x,None", 1, {"--spec", "rank"}},
      {"(x,None)", 2, {"--spec"}},
  };
  for (const auto& [spec, code, mentions] : cases) {
    EXPECT_TRUE(fails_cleanly(replace(kMesh4, "--spec", spec), {code}, mentions)) << spec;
  }
  EXPECT_TRUE(fails_cleanly(replace(kMesh4, "--shape", "6"), {1}, {"dimension 0", "divisible by 4", "6"}));
}

TEST(ShowErrors, MalformedShape) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"8,-1", {"--shape", "-1"}},
      {"8,a", {"--shape", "'a'"}},
      {"8,,4", {"--shape"}},
      {"99999999999999999999", {"--shape", "99999999999999999999"}},
      {"8x4", {"--shape", "8x4"}},
  };
  for (const auto& [shape, mentions] : cases) {
    EXPECT_TRUE(fails_cleanly(replace(kMesh4, "--shape", shape), {1, 2}, mentions)) << shape;
  }
  // --shape=-8: a negative size must not be read as another flag either.
  EXPECT_TRUE(fails_cleanly({"show", "--mesh", "x=4", "--spec", "x", "--shape=-8"}, {1, 2}, {"--shape"}));
}

TEST(ShowErrors, BadJobFlags) {
  EXPECT_TRUE(fails_cleanly(with(kMesh4, {"--num-devices", "2"}), {1, 2}, {"--num-devices", "3"}));
  EXPECT_TRUE(fails_cleanly(with(kMesh4, {"--num-devices", "x"}), {1, 2}, {"--num-devices"}));
  EXPECT_TRUE(fails_cleanly(with(kMesh4, {"--num-devices", "99999999999999999999"}), {1, 2}, {"--num-devices"}));
  EXPECT_TRUE(fails_cleanly(with(kMesh4, {"--processes", "3"}), {1, 2}, {"--processes", "3"}));
  EXPECT_TRUE(fails_cleanly(with(kMesh4, {"--processes", "0"}), {1, 2}, {"--processes"}));
  EXPECT_TRUE(fails_cleanly(with(kMesh4, {"--processes", "8"}), {1, 2}, {"--processes"}));
}

TEST(ShowErrors, UsageErrorsExitTwo) {
  EXPECT_TRUE(fails_cleanly({"show", "--spec", "x", "--shape", "8"}, {2}, {"--mesh"}));
  EXPECT_TRUE(fails_cleanly({"show", "--mesh", "x=4", "--spec", "x"}, {2}, {"--shape"}));
  EXPECT_TRUE(fails_cleanly(with(kMesh4, {"--bogus"}), {2}, {"--bogus"}));
}

}  // namespace
}  // namespace reshard::testing
