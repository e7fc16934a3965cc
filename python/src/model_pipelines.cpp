// Bindings of the whole-model pipelines: convert (a .safetensors file, a
// Hugging Face folder and a checkpoint, either way; collective over a
// transport) and merge_lora (a PEFT LoRA adapter into its base model).
// reshard/pipelines.py gives them Python's keywords.
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "places.h"
#include "reshard/layout/error.h"
#include "reshard/layout/parse.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "reshard/pipelines/convert.h"
#include "reshard/pipelines/merge_lora.h"
#include "transport_scope.h"

namespace reshard::python {

std::vector<LayoutRule> rules_from_python(nb::handle rules) {
  if (rules.is_none()) return {};
  if (nb::isinstance<nb::str>(rules)) return parse_layout_rules(nb::cast<std::string>(rules), "rules");
  std::vector<LayoutRule> out;
  size_t index = 0;
  for (nb::handle rule : nb::iter(rules)) {
    const std::string where = "rules[" + std::to_string(index++) + "]";
    if ((!nb::isinstance<nb::tuple>(rule) && !nb::isinstance<nb::list>(rule)) || nb::len(rule) != 2) {
      throw Error(ErrorCode::kInvalidArgument, where + ": expected a (pattern, PartitionSpec) pair");
    }
    const nb::object pattern = rule[0];
    const nb::object spec = rule[1];
    if (!nb::isinstance<nb::str>(pattern)) {
      throw Error(ErrorCode::kInvalidArgument, where + ": the pattern is a glob string");
    }
    out.push_back(LayoutRule{nb::cast<std::string>(pattern), spec_from_python(spec, where)});
  }
  return out;
}

namespace {

ConvertOutput output_from_string(const std::string& output) {
  if (output == "safetensors") return ConvertOutput::kSafetensorsFile;
  if (output == "hf") return ConvertOutput::kHfFolder;
  if (output == "checkpoint") return ConvertOutput::kCheckpoint;
  throw Error(ErrorCode::kInvalidArgument,
              "unknown output '" + output + "' (expected 'safetensors', 'hf' or 'checkpoint')");
}

std::optional<DType> optional_dtype(const std::optional<std::string>& dtype) {
  if (!dtype) return std::nullopt;
  return dtype_from_string(*dtype);
}

ConvertResult convert(const std::filesystem::path& src, const std::filesystem::path& dst, const ConvertOptions& options,
                      Transport* transport) {
  const storage::Location from = place(src, "src");
  const storage::Location to = place(dst, "dst");
  if (options.output == ConvertOutput::kCheckpoint && !options.layout) {
    throw Error(ErrorCode::kInvalidArgument, "a checkpoint output needs a mesh (and topology) to lay tensors out on");
  }
  if (options.output != ConvertOutput::kCheckpoint && options.layout) {
    throw Error(ErrorCode::kInvalidArgument, std::string("mesh, rules and best_effort lay out a checkpoint output, not ") +
                    (options.output == ConvertOutput::kHfFolder ? "a Hugging Face folder ('hf')" : "a .safetensors file ('safetensors')"));
  }
  if (options.layout) {
    return with_transport(transport, options.layout->topology,
                          [&](Transport& t) { return convert_model(from, to, t, options); });
  }
  return run_collective(transport, [&](Transport& t) { return convert_model(from, to, t, options); });
}

std::string output_name(ConvertOutput output) {
  switch (output) {
    case ConvertOutput::kSafetensorsFile: return "safetensors";
    case ConvertOutput::kHfFolder: return "hf";
    case ConvertOutput::kCheckpoint: return "checkpoint";
  }
  return "hf";
}

// CheckpointLayout and ConvertOptions, made by keyword only: their fields are
// the Python keywords of convert, each with the C++ default.
void bind_convert_options(nb::module_& m) {
  nb::class_<CheckpointLayout>(m, "CheckpointLayout", "How a checkpoint's tensors are laid out on a mesh (keywords only).")
      .def("__init__",
           [](CheckpointLayout* self, const Mesh& mesh, const Topology& topology, nb::handle rules,
              std::optional<std::string> best_effort_axis, bool strict) {
             // An axis the mesh lacks is the argument's mistake: said once, here, not per tensor.
             if (best_effort_axis && !mesh.axis_index(*best_effort_axis)) {
               throw Error(ErrorCode::kUnknownAxis, fmt::format("best_effort: the mesh {} has no axis '{}'",
                                                                mesh.to_string(), *best_effort_axis));
             }
             new (self) CheckpointLayout{mesh, topology, rules_from_python(rules), std::move(best_effort_axis), strict};
           },
           nb::kw_only(), nb::arg("mesh"), nb::arg("topology"), nb::arg("rules").none() = nb::none(),
           nb::arg("best_effort_axis").none() = nb::none(), nb::arg("strict") = false,
           nb::sig("def __init__(self, *, mesh: Mesh, topology: Topology, "
                   "rules: str | collections.abc.Sequence[tuple[str, PartitionSpec]] | None = None, "
                   "best_effort_axis: str | None = None, strict: bool = False) -> None"))
      .def_ro("mesh", &CheckpointLayout::mesh, "The mesh tensors are laid out on.")
      .def_ro("topology", &CheckpointLayout::topology, "Where the mesh's devices are.")
      .def_ro("best_effort_axis", &CheckpointLayout::best_effort_axis,
              "Shard the tensors no rule lays out over this axis, as far as it divides them.")
      .def_ro("strict", &CheckpointLayout::strict, "A matching rule that does not fit the rank is an error.")
      .def(
          "sharding_for",
          [](const CheckpointLayout& layout, const std::string& name, nb::handle shape) {
            return layout.sharding_for(name, shape_from_python(shape));
          },
          nb::arg("name"), nb::arg("shape"),
          nb::sig("def sharding_for(self, name: str, shape: collections.abc.Sequence[int]) -> NamedSharding"),
          "The first matching rule that fits the tensor's rank, else best effort, else replicated; errors name "
          "the tensor.");
  nb::class_<ConvertOptions>(m, "ConvertOptions", "What convert writes and how (keywords only).")
      .def("__init__",
           [](ConvertOptions* self, const std::string& output, const std::optional<std::string>& dtype,
              uint64_t max_shard_size, bool replace, std::optional<CheckpointLayout> layout) {
             ConvertOptions* options = new (self) ConvertOptions();
             options->output = output_from_string(output);
             options->dtype = optional_dtype(dtype);
             options->max_shard_size = max_shard_size;
             options->replace = replace;
             options->layout = std::move(layout);
           },
           nb::kw_only(), nb::arg("output"), nb::arg("dtype").none() = nb::none(),
           nb::arg("max_shard_size") = kDefaultMaxShardSize, nb::arg("replace") = false,
           nb::arg("layout").none() = nb::none())
      .def_prop_ro("output", [](const ConvertOptions& o) { return output_name(o.output); },
                   "'safetensors', 'hf' or 'checkpoint'.")
      .def_prop_ro("dtype", [](const ConvertOptions& o) {
        return o.dtype ? std::optional<std::string>(std::string(dtype_name(*o.dtype))) : std::nullopt;
      }, "The float type F32/F16/BF16 tensors are cast to; None: kept.")
      .def_ro("max_shard_size", &ConvertOptions::max_shard_size, "Largest file of a Hugging Face folder, in bytes.")
      .def_ro("replace", &ConvertOptions::replace, "Replace an existing destination.")
      .def_ro("layout", &ConvertOptions::layout, "A checkpoint output's layout (CheckpointLayout).")
      .def("__repr__", [](nb::handle self) {
        return keyword_repr(self, {"output", "dtype", "max_shard_size", "replace", "layout"});
      });
  m.def("_convert_output_for", [](const std::filesystem::path& dst, bool with_layout) {
    return output_name(convert_output_for(place(dst, "dst"), with_layout));
  }, nb::arg("dst"), nb::arg("with_layout"),
        "The output convert writes to `dst` when none is named: 'checkpoint' with a layout, else by `dst`.");
}

MergeLoraResult merge_lora(const std::filesystem::path& base, const std::filesystem::path& adapter,
                            const std::filesystem::path& out, const MergeLoraOptions& options) {
  const storage::Location base_place = place(base, "base");
  const storage::Location adapter_place = place(adapter, "adapter");
  const storage::Location out_place = place(out, "out");
  nb::gil_scoped_release release;
  return merge_lora_folder(base_place, adapter_place, out_place, options);
}

// MergeLoraOptions, made by keyword only: its fields are the Python keywords
// of merge_lora, each with the C++ default.
void bind_merge_lora_options(nb::module_& m) {
  nb::class_<MergeLoraOptions>(m, "MergeLoraOptions", "How merge_lora writes its output (keywords only).")
      .def("__init__",
           [](MergeLoraOptions* self, const std::optional<std::string>& dtype, uint64_t max_shard_size, bool replace,
              size_t block_bytes, int threads) {
             MergeLoraOptions* options = new (self) MergeLoraOptions();
             options->dtype = optional_dtype(dtype);
             options->max_shard_size = max_shard_size;
             options->replace = replace;
             options->block_bytes = block_bytes;
             options->threads = threads;
           },
           nb::kw_only(), nb::arg("dtype").none() = nb::none(), nb::arg("max_shard_size") = kDefaultMaxShardSize,
           nb::arg("replace") = false, nb::arg("block_bytes") = MergeLoraOptions{}.block_bytes,
           nb::arg("threads") = 0)
      .def_prop_ro("dtype", [](const MergeLoraOptions& o) {
        return o.dtype ? std::optional<std::string>(std::string(dtype_name(*o.dtype))) : std::nullopt;
      }, "The float type F32/F16/BF16 tensors are cast to after merging; None: kept.")
      .def_ro("max_shard_size", &MergeLoraOptions::max_shard_size, "Largest weight file, in bytes.")
      .def_ro("replace", &MergeLoraOptions::replace, "Write over an existing folder's weight files.")
      .def_ro("block_bytes", &MergeLoraOptions::block_bytes, "At most this much of a weight is merged at a time.")
      .def_ro("threads", &MergeLoraOptions::threads, "Merging threads per block; 0: every core.")
      .def("__repr__", [](nb::handle self) {
        return keyword_repr(self, {"dtype", "max_shard_size", "replace", "block_bytes", "threads"});
      });
}

}  // namespace

void bind_pipelines(nb::module_& m) {
  // The C++ options' defaults, so that the Python signatures show the same values.
  m.attr("DEFAULT_MAX_SHARD_SIZE") = kDefaultMaxShardSize;
  m.attr("DEFAULT_STAGING_BYTES") = kDefaultStagingBytes;
  m.attr("DEFAULT_MERGE_BLOCK_BYTES") = MergeLoraOptions{}.block_bytes;
  bind_checkpoint(m);
  bind_export_import(m);
  nb::class_<ConvertResult>(m, "ConvertResult", "What a conversion wrote.")
      .def_ro("files", &ConvertResult::files, "Files written (data files for a checkpoint).")
      .def_ro("tensors", &ConvertResult::tensors, "Tensors written.")
      .def_ro("bytes", &ConvertResult::bytes, "Tensor bytes of the output.")
      .def_ro("peak_staged_bytes", &ConvertResult::peak_staged_bytes,
              "A checkpoint output: the most bytes this process held staged at once.")
      .def_ro("carried", &ConvertResult::carried, "A folder output: the non-weight files written beside the weights.")
      .def_ro("warnings", &ConvertResult::warnings, "What the output lacks that its users will miss.")
      .def("__repr__", [](const ConvertResult& r) {
        return "ConvertResult(files=" + std::to_string(r.files) + ", tensors=" + std::to_string(r.tensors) +
               ", bytes=" + std::to_string(r.bytes) + ")";
      });
  nb::class_<MergeLoraResult>(m, "MergeLoraResult", "What a LoRA merge wrote.")
      .def_ro("tensors", &MergeLoraResult::tensors, "Tensors in the output.")
      .def_ro("merged", &MergeLoraResult::merged, "Weights a LoRA delta was added to.")
      .def_ro("files", &MergeLoraResult::files, "Weight files written.")
      .def_ro("bytes", &MergeLoraResult::bytes, "Tensor bytes written.")
      .def_ro("replaced", &MergeLoraResult::replaced,
              "Tensors taken whole from the adapter (modules_to_save, saved base layers).")
      .def_ro("carried", &MergeLoraResult::carried, "The base folder's non-weight files carried beside the weights.")
      .def_prop_ro("copied", [](const MergeLoraResult& s) {
        if (PyErr_WarnEx(PyExc_DeprecationWarning, "MergeLoraResult.copied is now .carried (as ConvertResult's)", 1) != 0) {
          throw nb::python_error();
        }
        return s.carried;
      }, "Deprecated: the old name of `carried` (ConvertResult's word for the same files); removed in the next release.")
      .def_ro("warnings", &MergeLoraResult::warnings, "What the output lacks that its users will miss.")
      .def("__repr__", [](const MergeLoraResult& s) {
        return "MergeLoraResult(tensors=" + std::to_string(s.tensors) + ", merged=" + std::to_string(s.merged) +
               ", files=" + std::to_string(s.files) + ", bytes=" + std::to_string(s.bytes) + ")";
      });

  bind_convert_options(m);
  m.def("_convert", &convert, nb::arg("src"), nb::arg("dst"), nb::arg("options"),
        nb::arg("transport").none() = nb::none(),
        "Converts between a .safetensors file, a Hugging Face folder and a checkpoint (collective).");
  m.def("_parse_byte_size", [](const std::string& text) { return parse_byte_size(text); }, nb::arg("text"),
        "Bytes in a size as the command line takes it ('5GB', '500MB', '1.5GiB'); ParseError otherwise.");
  bind_merge_lora_options(m);
  m.def("_merge_lora", &merge_lora, nb::arg("base"), nb::arg("adapter"), nb::arg("out"), nb::arg("options"),
        "Merges a PEFT LoRA adapter into its base model, writing a Hugging Face folder.");
}

}  // namespace reshard::python
