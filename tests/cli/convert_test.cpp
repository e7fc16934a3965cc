// `reshard convert`: byte-identical round trips, transformers' split and index,
// bit-exact casts that leave integers alone, usage errors, and atomic output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/support/run_reshard.h"
#include "layout/float_convert.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/formats/safetensors_writer.h"
#include "support/seed.h"

namespace reshard {

using layout_detail::bf16_to_f32;
using layout_detail::f16_to_f32;
using layout_detail::f32_to_bf16;

namespace {

namespace fs = std::filesystem;
using testing::run_reshard;
using testing::TempFolder;

struct OwnedTensor {
  safetensors::TensorSpec spec;
  std::vector<std::byte> bytes;
};

std::vector<std::byte> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<std::byte> bytes(n);
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::byte& b : bytes) b = static_cast<std::byte>(byte(rng));
  return bytes;
}

// Every kind of tensor a model file holds: floats to cast, integers and bools
// to leave alone, a scalar, a zero-size tensor, a unicode name.
std::vector<OwnedTensor> model_tensors(std::mt19937_64& rng) {
  const std::vector<safetensors::TensorSpec> specs = {
      {"model.embed_tokens.weight", DType::kF32, {6, 5}}, {"model.layers.0.mlp.w", DType::kF16, {7}},
      {"model.layers.0.attn.w", DType::kBF16, {2, 3}},    {"model.layers.1.ids", DType::kI32, {4}},
      {"model.layers.1.mask", DType::kBool, {3}},         {"model.bytes", DType::kU8, {10}},
      {"model.precise", DType::kF64, {2}},                {"model.scale", DType::kF32, {}},
      {"model.empty", DType::kF32, {0, 4}},               {"model.n\xc3\xa4me", DType::kF32, {3}},
  };
  std::vector<OwnedTensor> tensors;
  for (const auto& spec : specs) {
    uint64_t elements = 1;
    for (const uint64_t d : spec.shape) elements *= d;
    tensors.push_back({spec, random_bytes(rng, static_cast<size_t>(elements) * static_cast<size_t>(dtype_bits(spec.dtype)) / 8)});
  }
  return tensors;
}

void write_tensors(const fs::path& path, const std::vector<OwnedTensor>& tensors) {
  std::vector<safetensors::TensorData> data;
  for (const OwnedTensor& tensor : tensors) data.push_back({tensor.spec, tensor.bytes});
  safetensors::write_file(path, data);
}

std::vector<std::string> folder_listing(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Every stderr line a warning: progress is for terminals only, and these runs write to files.
bool only_warnings(const std::string& err) {
  for (size_t at = 0; at < err.size(); at = err.find('\n', at) + 1) {
    if (err.compare(at, 9, "warning: ") != 0) return false;
    if (err.find('\n', at) == std::string::npos) break;
  }
  return true;
}

void expect_ok(const testing::CommandResult& result) {
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_TRUE(only_warnings(result.err)) << result.err;
}

// Success with one warning on stderr: a folder that transformers cannot load as it is.
void expect_ok_warning(const testing::CommandResult& result, std::string_view why) {
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_TRUE(result.err.starts_with("warning: ")) << result.err;
  EXPECT_NE(result.err.find(why), std::string::npos) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
}

TEST(ConvertCommand, FileToFolderToFileIsByteIdentical) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  write_tensors(dir / "src.safetensors", model_tensors(rng));
  expect_ok_warning(run_reshard({"convert", (dir / "src.safetensors").string(), (dir / "hf").string(),
                                 "--max-shard-size", "64"}),
                    "is a single .safetensors file: the folder gets no config.json");
  const std::vector<std::string> listing = folder_listing(dir / "hf");
  EXPECT_GT(listing.size(), 3u);
  EXPECT_TRUE(std::find(listing.begin(), listing.end(), "model.safetensors.index.json") != listing.end());
  expect_ok(run_reshard({"verify", (dir / "hf").string()}));

  expect_ok(run_reshard({"convert", (dir / "hf").string(), (dir / "back.safetensors").string()}));
  EXPECT_EQ(testing::read_bytes(dir / "back.safetensors"), testing::read_bytes(dir / "src.safetensors"));

  // Folder to folder, split differently, and back again.
  expect_ok_warning(run_reshard({"convert", (dir / "hf").string(), (dir / "hf2").string(), "--max-shard-size", "1kB"}),
                    "has no config.json");
  EXPECT_EQ(folder_listing(dir / "hf2"), std::vector<std::string>{"model.safetensors"});
  expect_ok(run_reshard({"convert", (dir / "hf2").string(), (dir / "back2.safetensors").string()}));
  EXPECT_EQ(testing::read_bytes(dir / "back2.safetensors"), testing::read_bytes(dir / "src.safetensors"));
}

// A file rewritten as a file keeps its metadata exactly, absent included, as
// the reference's serialization tests expect; folders get "format": "pt",
// which transformers needs.
TEST(ConvertCommand, ARewriteKeepsTheSourceMetadataExactly) {
  TempFolder dir;
  const std::vector<std::byte> bytes(12, std::byte{7});
  const safetensors::TensorData tensor{{"w", DType::kF32, {3}}, bytes};
  const std::vector<std::optional<safetensors::Metadata>> cases = {
      std::nullopt, safetensors::Metadata{}, safetensors::Metadata{{"step", "7"}},
      safetensors::Metadata{{"format", "np"}, {"x", "y"}}};
  for (size_t i = 0; i < cases.size(); ++i) {
    const fs::path src = dir / fmt::format("src{}.safetensors", i);
    const fs::path out = dir / fmt::format("out{}.safetensors", i);
    safetensors::write_file(src, std::span(&tensor, 1), cases[i]);
    expect_ok(run_reshard({"convert", src.string(), out.string()}));
    EXPECT_EQ(testing::read_bytes(out), testing::read_bytes(src)) << i;
    const fs::path folder = dir / fmt::format("hf{}", i);
    expect_ok(run_reshard({"convert", src.string(), folder.string()}));
    const auto metadata = safetensors::File::open(folder / "model.safetensors").metadata();
    ASSERT_TRUE(metadata.has_value());
    const auto format = std::find_if(metadata->begin(), metadata->end(),
                                     [](const auto& kv) { return kv.first == "format"; });
    ASSERT_NE(format, metadata->end());
    EXPECT_EQ(format->second, i == 3 ? "np" : "pt");
  }
}

// The reference accepts zero-element tensors with dimensions past 2^63; a
// rewrite keeps them, and inspect prints them as they are.
TEST(ConvertCommand, HugeZeroElementDimensionsRoundTrip) {
  TempFolder dir;
  const safetensors::TensorData tensor{{"e", DType::kF32, {0, UINT64_MAX}}, {}};
  safetensors::write_file(dir / "src.safetensors", std::span(&tensor, 1), std::nullopt);
  expect_ok(run_reshard({"convert", (dir / "src.safetensors").string(), (dir / "out.safetensors").string()}));
  EXPECT_EQ(testing::read_bytes(dir / "out.safetensors"), testing::read_bytes(dir / "src.safetensors"));
  const auto inspect = run_reshard({"inspect", (dir / "src.safetensors").string(), "--json"});
  EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("18446744073709551615"), std::string::npos) << inspect.out;
  EXPECT_EQ(inspect.out.find("-1"), std::string::npos) << inspect.out;
}

TEST(ConvertCommand, SplitsAndIndexesAsTransformers) {
  TempFolder dir;
  // Same dtype, so source (data) order is by name: a b c d e of 30 30 50 100 20 bytes.
  std::vector<OwnedTensor> tensors;
  for (const auto& [name, size] : std::vector<std::pair<std::string, int64_t>>{
           {"a", 30}, {"b", 30}, {"c", 50}, {"d", 100}, {"e", 20}}) {
    tensors.push_back({{name, DType::kU8, {static_cast<uint64_t>(size)}}, std::vector<std::byte>(static_cast<size_t>(size))});
  }
  write_tensors(dir / "src.safetensors", tensors);
  expect_ok(run_reshard({"convert", (dir / "src.safetensors").string(), (dir / "hf").string(),
                         "--max-shard-size", "60"}));
  // a+b fill 60 exactly; c starts a file; d (over the limit) gets its own, ahead
  // of c's still-open file; e does not fit beside c. Bytes as Python's
  // json.dumps(index, indent=2, sort_keys=True) + "\n" writes them.
  const std::string expected =
      "{\n"
      "  \"metadata\": {\n"
      "    \"total_parameters\": 230,\n"
      "    \"total_size\": 230\n"
      "  },\n"
      "  \"weight_map\": {\n"
      "    \"a\": \"model-00001-of-00004.safetensors\",\n"
      "    \"b\": \"model-00001-of-00004.safetensors\",\n"
      "    \"c\": \"model-00003-of-00004.safetensors\",\n"
      "    \"d\": \"model-00002-of-00004.safetensors\",\n"
      "    \"e\": \"model-00004-of-00004.safetensors\"\n"
      "  }\n"
      "}\n";
  EXPECT_EQ(testing::read_bytes(dir / "hf" / "model.safetensors.index.json"), expected);
  EXPECT_EQ(folder_listing(dir / "hf"),
            (std::vector<std::string>{"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                                      "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors",
                                      "model.safetensors.index.json"}));
  const auto first = safetensors::File::open(dir / "hf" / "model-00001-of-00004.safetensors");
  EXPECT_EQ(first.tensors().size(), 2u);
  ASSERT_TRUE(first.metadata().has_value());
  EXPECT_EQ(*first.metadata(), (safetensors::Metadata{{"format", "pt"}}));
}

uint16_t half_at(std::span<const std::byte> bytes, size_t i) {
  uint16_t value = 0;
  std::memcpy(&value, bytes.data() + 2 * i, 2);
  return value;
}

float float_at(std::span<const std::byte> bytes, size_t i) {
  float value = 0;
  std::memcpy(&value, bytes.data() + 4 * i, 4);
  return value;
}

TEST(ConvertCommand, DtypeCastsFloatsBitExactlyAndLeavesTheRestAlone) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  const std::vector<OwnedTensor> tensors = model_tensors(rng);
  write_tensors(dir / "src.safetensors", tensors);
  expect_ok(run_reshard({"convert", (dir / "src.safetensors").string(), (dir / "bf16.safetensors").string(),
                         "--dtype", "BF16"}));
  const auto out = safetensors::File::open(dir / "bf16.safetensors");
  for (const OwnedTensor& tensor : tensors) {
    const safetensors::TensorInfo& info = out.tensor(tensor.spec.name);
    EXPECT_EQ(info.shape, tensor.spec.shape) << info.name;
    std::vector<std::byte> bytes(info.byte_size());
    out.read(info, bytes);
    const size_t count = static_cast<size_t>(info.elements());
    switch (tensor.spec.dtype) {
      case DType::kF32:
        ASSERT_EQ(info.dtype, DType::kBF16) << info.name;
        for (size_t i = 0; i < count; ++i) EXPECT_EQ(half_at(bytes, i), f32_to_bf16(float_at(tensor.bytes, i)));
        break;
      case DType::kF16:
        ASSERT_EQ(info.dtype, DType::kBF16) << info.name;
        for (size_t i = 0; i < count; ++i) {
          EXPECT_EQ(half_at(bytes, i), f32_to_bf16(f16_to_f32(half_at(tensor.bytes, i))));
        }
        break;
      default:  // BF16 already, integers, bool, F64: untouched
        EXPECT_EQ(info.dtype, tensor.spec.dtype) << info.name;
        EXPECT_EQ(bytes, tensor.bytes) << info.name;
    }
  }
}

TEST(ConvertCommand, WideningToF32IsExact) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  const std::vector<std::byte> bytes = random_bytes(rng, 64);
  write_tensors(dir / "src.safetensors", {{{"w", DType::kBF16, {32}}, bytes}});
  expect_ok(run_reshard({"convert", (dir / "src.safetensors").string(), (dir / "hf").string(), "--dtype", "f32"}));
  const auto out = safetensors::File::open(dir / "hf" / "model.safetensors");
  std::vector<std::byte> wide(128);
  out.read(out.tensor("w"), wide);
  for (size_t i = 0; i < 32; ++i) {
    const float want = bf16_to_f32(half_at(bytes, i));
    const float got = float_at(wide, i);
    EXPECT_EQ(std::memcmp(&want, &got, 4), 0) << i;
  }
}

TEST(ConvertCommand, UsageErrorsExitTwo) {
  TempFolder dir;
  write_tensors(dir / "src.safetensors", {{{"w", DType::kF32, {1}}, std::vector<std::byte>(4)}});
  const std::string src = (dir / "src.safetensors").string();
  const std::string dst = (dir / "out").string();
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"convert", src},
           {"convert", src, dst, "--max-shard-size", "5XB"},
           {"convert", src, dst, "--dtype", "i32"},
           {"convert", src, dst, "--dtype", "float128"},
           {"convert", src, (dir / "x.safetensors").string(), "--max-shard-size", "1GB"},
           {"convert", src, dst, "--mesh", "data=2"},
       }) {
    const auto result = run_reshard(args);
    EXPECT_EQ(result.exit_code, 2) << args.back() << ": " << result.err;
    EXPECT_EQ(result.err.rfind("error: ", 0), 0u) << result.err;
  }
  EXPECT_FALSE(fs::exists(dir / "out"));
  EXPECT_FALSE(fs::exists(dir / "x.safetensors"));
}

TEST(ConvertCommand, RefusesAnExistingDestinationUnlessForced) {
  TempFolder dir;
  write_tensors(dir / "src.safetensors", {{{"w", DType::kF32, {2}}, std::vector<std::byte>(8)}});
  const std::string src = (dir / "src.safetensors").string();
  testing::write_bytes(dir / "taken.safetensors", "precious");
  const auto refused = run_reshard({"convert", src, (dir / "taken.safetensors").string()});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  EXPECT_EQ(testing::read_bytes(dir / "taken.safetensors"), "precious");
  expect_ok(run_reshard({"convert", src, (dir / "taken.safetensors").string(), "--force"}));
  EXPECT_EQ(testing::read_bytes(dir / "taken.safetensors"), testing::read_bytes(dir / "src.safetensors"));

  // A model folder keeps its other files; old shards go.
  expect_ok(run_reshard({"convert", src, (dir / "hf").string(), "--max-shard-size", "4"}));
  testing::write_bytes(dir / "hf" / "config.json", "{}");
  EXPECT_EQ(run_reshard({"convert", src, (dir / "hf").string()}).exit_code, 1);
  expect_ok(run_reshard({"convert", src, (dir / "hf").string(), "--force"}));
  EXPECT_EQ(folder_listing(dir / "hf"), (std::vector<std::string>{"config.json", "model.safetensors"}));
}

TEST(ConvertCommand, FailureLeavesNothingAtTheDestination) {
  TempFolder dir;
  write_tensors(dir / "src.safetensors", {{{"a", DType::kU8, {1000}}, std::vector<std::byte>(1000)},
                                          {{"b", DType::kU8, {9500}}, std::vector<std::byte>(9500)},
                                          {{"c", DType::kU8, {1 << 20}}, std::vector<std::byte>(1 << 20)}});
  const std::vector<std::string> before = folder_listing(dir.path());
  // Files may not grow past 64 KiB: the folder's first shard (a) is written,
  // the second (c, 1 MiB) fails; so does the single file.
  const testing::RunLimits limits{64 << 10};
  for (const std::string dst : {"hf", "out.safetensors"}) {
    std::vector<std::string> args = {"convert", (dir / "src.safetensors").string(), (dir / dst).string()};
    if (dst == "hf") args.insert(args.end(), {"--max-shard-size", "10kB"});
    const auto result = run_reshard(args, limits);
    EXPECT_EQ(result.exit_code, 1) << dst << ": " << result.err;
    EXPECT_EQ(result.err.rfind("error: ", 0), 0u) << result.err;
    EXPECT_EQ(folder_listing(dir.path()), before) << dst;  // no output, no leftovers
  }
}

TEST(ConvertCommand, MissingSourceAndAdapterSourceFail) {
  TempFolder dir;
  const auto missing = run_reshard({"convert", (dir / "none.safetensors").string(), (dir / "out").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("none.safetensors"), std::string::npos);
  fs::create_directory(dir / "adapter");
  write_tensors(dir / "adapter" / "adapter_model.safetensors", {{{"w", DType::kF32, {1}}, std::vector<std::byte>(4)}});
  const auto adapter = run_reshard({"convert", (dir / "adapter").string(), (dir / "out").string()});
  EXPECT_EQ(adapter.exit_code, 1);
  EXPECT_NE(adapter.err.find("PEFT"), std::string::npos) << adapter.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
}

}  // namespace
}  // namespace reshard
