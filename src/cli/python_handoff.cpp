#include "cli/python_handoff.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/app.h"
#include "reshard/storage/location.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/store.h"

namespace reshard::cli {
namespace {

namespace fs = std::filesystem;

// The commands' options that take no value; every other option takes the next argument.
const std::set<std::string_view> kValueless = {"--adapter-only", "--merge-lora", "--force", "--json", "--hash",
                                               "--help", "-h"};

std::optional<std::string> first_positional(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") return i + 1 < argc ? std::optional<std::string>(argv[i + 1]) : std::nullopt;
    if (!arg.starts_with("-")) return std::string(arg);
    if (!kValueless.contains(arg) && arg.find('=') == std::string_view::npos) ++i;
  }
  return std::nullopt;
}

bool exists(storage::Store& store, const storage::Location& object) { return store.stat(object).has_value(); }

std::optional<std::string> kind_from_listing(storage::Store& store, const storage::Location& folder) {
  for (const storage::ListEntry& entry : store.list(folder)) {
    const std::string_view name = entry.name;
    const std::string_view file = name.substr(name.rfind('/') + 1);
    if (file == "_METADATA") return "Orbax";
    if (file == "manifest.ocdbt" || file == ".zarray" || file == "zarr.json") return "JAX";
  }
  return std::nullopt;
}

std::string shell_quoted(std::string_view arg) {
  if (!arg.empty() && arg.find_first_of(" '\"\\$`") == std::string_view::npos) return std::string(arg);
  std::string out = "'";
  for (const char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The interpreter of the environment this binary is installed in (pip puts both in its bin folder).
std::optional<std::string> python_beside() {
  if (const char* chosen = std::getenv("RESHARD_PYTHON"); chosen != nullptr && *chosen != '\0') return chosen;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  for (const char* name : {"python3", "python"}) {
    const fs::path candidate = self.parent_path() / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> foreign_checkpoint_kind(const std::string& source) {
  if (source.ends_with(".safetensors")) return std::nullopt;
  try {
    const storage::Location folder = storage::Location::parse(source);
    // A store that does not answer is the command's to report, within its own --timeout: looked at briefly.
    storage::StoreOptions options;
    options.timeout = std::chrono::seconds(10);
    const std::shared_ptr<storage::Store> store = storage::open_store(folder, options);
    if (exists(*store, folder.child("manifest.json"))) return std::nullopt;
    if (exists(*store, folder.child("_METADATA"))) return "Orbax";
    if (exists(*store, folder.child("metadata.json"))) return "Levanter";
    if (exists(*store, folder.child("manifest.ocdbt"))) return "JAX";
    if (exists(*store, folder.child("config.json")) || exists(*store, folder.child("adapter_config.json"))) {
      return std::nullopt;
    }
    return kind_from_listing(*store, folder);
  } catch (const std::exception&) {
    return std::nullopt;  // not ours to report: the command itself names what is wrong with the source
  }
}

std::optional<int> hand_off_to_python(int argc, char** argv) {
  if (argc < 3) return std::nullopt;
  const std::string_view command = argv[1];
  if (command != "export" && command != "inspect" && command != "convert") return std::nullopt;
  const std::optional<std::string> source = first_positional(argc, argv);
  if (!source) return std::nullopt;
  const std::optional<std::string> kind = foreign_checkpoint_kind(*source);
  if (!kind) return std::nullopt;
  const std::optional<std::string> python = python_beside();
  std::vector<std::string> args = {python.value_or("python3"), "-m", "reshard.orbax"};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  if (python) {
    std::vector<char*> exec_args;
    for (std::string& arg : args) exec_args.push_back(arg.data());
    exec_args.push_back(nullptr);
    ::execv(python->c_str(), exec_args.data());
  }
  std::vector<std::string> shown;
  for (const std::string& arg : args) shown.push_back(shell_quoted(arg));
  const std::string line =
      fmt::format("error: {} is {} {} checkpoint, which the Python package reads (through TensorStore); {}: run\n  "
                  "{}\n(pip install reshard tensorstore; set RESHARD_PYTHON to the interpreter to use)\n",
                  *source, *kind == "Orbax" ? "an" : "a", *kind,
                  python ? fmt::format("starting {} failed", *python) : "no Python interpreter is installed beside reshard",
                  fmt::join(shown, " "));
  std::cerr << line << std::flush;
  return kExitUsage;
}

}  // namespace reshard::cli
