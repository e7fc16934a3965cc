// `reshard show`: which device holds which slice of an array, as a picture,
// a table, or JSON.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/layout_options.h"
#include "job/job.h"
#include "reshard/layout/error.h"
#include "reshard/layout/sharding_picture.h"

namespace reshard::cli {

using job::job_world;

namespace {

constexpr const char* kHelp =
    "Show which device holds which slice of an array: a picture of the blocks (as\n"
    "jax.debug.visualize_array_sharding draws 1-D and 2-D shapes; for other ranks the split\n"
    "dimensions, with a caption naming the whole ones; coloured on a terminal), then a table\n"
    "of device, process, slice and replica id. --json prints the same as JSON.\n"
    "\n"
    "Examples:\n"
    "  reshard show --mesh data=4,model=4 --devices 0,4,8,12,1,5,9,13,2,6,10,14,3,7,11,15 \\\n"
    "      --spec 'None,data' --shape 8,4096\n"
    "  reshard show --mesh x=4,y=2 --spec \"P(('x', 'y'),)\" --shape 8,2 --json\n"
    "  reshard show --mesh x=4 --spec x --shape 10 --uneven\n"
    "  reshard show --mesh data=8 --spec data --shape 64,64 --processes 2";

struct ShowFlags {
  std::string shape;
  LayoutFlags layout;
  JobFlags job;
  bool uneven = false;
  bool json = false;
};

// Everything show prints, computed once.
struct Layout {
  Shape shape;
  NamedSharding sharding;
  Topology topology = Topology::uniform(1, 1);
  std::vector<Box> boxes;        // per logical device
  std::vector<int64_t> replicas;  // per logical device
  std::optional<Shape> shard_shape;
};

Layout layout_from_flags(const ShowFlags& flags) {
  Layout layout;
  layout.shape = shape_from_flag(flags.shape);
  layout.sharding = sharding_from_flags(flags.layout, flags.uneven);
  layout.topology = topology_from_flags(flags.job, {&layout.sharding.mesh()}, job_world().size);
  try {
    layout.sharding.validate(layout.shape);
  } catch (const Error& e) {
    throw e.with_context("--spec");
  }
  layout.boxes = layout.sharding.index_domains(layout.shape);
  layout.replicas = layout.sharding.replica_ids(layout.shape);
  layout.shard_shape = layout.sharding.shard_shape(layout.shape);
  return layout;
}

nlohmann::ordered_json layout_json(const Layout& layout) {
  const std::vector<DeviceId>& ids = layout.sharding.mesh().devices();
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    nlohmann::ordered_json index = nlohmann::ordered_json::array();
    for (size_t d = 0; d < layout.boxes[i].rank(); ++d) {
      index.push_back({layout.boxes[i].interval(d).begin, layout.boxes[i].interval(d).end});
    }
    devices.push_back({{"id", ids[i]},
                       {"process", layout.topology.process_of(ids[i])},
                       {"index", std::move(index)},
                       {"replica", layout.replicas[i]}});
  }
  nlohmann::ordered_json out;
  out["shape"] = layout.shape;
  out["shard_shape"] = layout.shard_shape ? nlohmann::ordered_json(*layout.shard_shape) : nlohmann::ordered_json();
  out["fully_replicated"] = layout.sharding.is_fully_replicated();
  out["devices"] = std::move(devices);
  return out;
}

// Colour only for a person at a terminal (and not for one who asked for none).
bool want_color() {
  const char* term = std::getenv("TERM");
  return isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr &&
         !(term != nullptr && std::string_view(term) == "dumb");
}

// Python's tuple repr, as JAX prints shapes: "(8, 4096)", "(10,)", "()".
std::string shape_text(const Shape& shape) {
  return fmt::format("({}{})", fmt::join(shape, ", "), shape.size() == 1 ? "," : "");
}

std::string why_no_picture(const Shape& shape, const std::vector<Box>& boxes) {
  if (Box::whole(shape).empty()) return "(the array is empty: nothing to draw)";
  return fmt::format("(too many blocks to draw across {} devices; see the table)", boxes.size());
}

void print_summary(const Layout& layout) {
  std::cout << fmt::format("{} on shape {}\n", layout.sharding.to_string(), shape_text(layout.shape));
  const int64_t devices = layout.sharding.mesh().size();
  // Copies of each slice; devices with an empty slice (uneven mode) hold nothing to copy.
  int64_t copies = 0;
  int64_t empty = 0;
  for (size_t i = 0; i < layout.boxes.size(); ++i) {
    if (layout.boxes[i].empty()) {
      ++empty;
    } else {
      copies = std::max(copies, layout.replicas[i] + 1);
    }
  }
  std::string line = layout.shard_shape ? fmt::format("shard shape {}", shape_text(*layout.shard_shape))
                                        : std::string("uneven shards");
  line += fmt::format("; {} device{} in {} process{}", devices, devices == 1 ? "" : "s",
                      layout.topology.num_processes(), layout.topology.num_processes() == 1 ? "" : "es");
  if (copies > 0) line += fmt::format("; each slice on {} device{}", copies, copies == 1 ? "" : "s");
  if (empty > 0) line += fmt::format("; {} device{} hold{} an empty slice", empty, empty == 1 ? "" : "s",
                                     empty == 1 ? "s" : "");
  std::cout << line << "\n\n";
}

void print_table(const Layout& layout) {
  const std::vector<DeviceId>& ids = layout.sharding.mesh().devices();
  std::vector<std::string> slices;
  size_t slice_width = std::string_view("slice").size();
  for (const Box& box : layout.boxes) {
    slices.push_back(box.to_string());
    slice_width = std::max(slice_width, slices.back().size());
  }
  std::cout << fmt::format("{:>6}  {:>7}  {:<{}}  {:>7}\n", "device", "process", "slice", slice_width, "replica");
  for (size_t i = 0; i < ids.size(); ++i) {
    std::cout << fmt::format("{:>6}  {:>7}  {:<{}}  {:>7}\n", ids[i], layout.topology.process_of(ids[i]), slices[i],
                             slice_width, layout.replicas[i]);
  }
}

void run_show(const ShowFlags& flags) {
  // Under mpirun every rank checks the flags (so each fails alike); rank 0 prints.
  const Layout layout = layout_from_flags(flags);
  if (job_world().rank != 0) return;
  if (flags.json) {
    std::cout << layout_json(layout).dump() << "\n";
    return;
  }
  print_summary(layout);
  const std::optional<std::string> picture =
      draw_sharding(layout.shape, layout.boxes, layout.sharding.mesh().devices(), {.color = want_color()});
  std::cout << (picture ? *picture : why_no_picture(layout.shape, layout.boxes) + "\n") << "\n";
  print_table(layout);
}

}  // namespace

void add_show_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("show", kHelp);
  auto flags = std::make_shared<ShowFlags>();
  add_layout_flags(*cmd, flags->layout, "array");
  cmd->add_option("--shape", flags->shape, "Global shape of the array, e.g. 8,4096 (empty for a scalar)")
      ->required();
  cmd->add_flag("--uneven", flags->uneven,
                "Allow dimensions that do not divide: chunks of ceil(size / n), the last ones short or empty");
  cmd->add_flag("--json", flags->json, "Print one JSON document on stdout instead of the picture and table");
  add_job_flags(*cmd, flags->job);
  cmd->callback([flags] { run_show(*flags); });
}

}  // namespace reshard::cli
