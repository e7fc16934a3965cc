// Bindings of export (a framework-layout checkpoint or sharded arrays to a
// Hugging Face model, PEFT adapter or merged model, through a tensor map) and
// import (a Hugging Face folder into the framework layout, the map run
// backwards), both collective over a transport. reshard/pipelines.py gives
// them Python's keywords.
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "places.h"
#include "reshard/pipelines/export_model.h"
#include "reshard/pipelines/import_model.h"
#include "transport_scope.h"

namespace reshard::python {
namespace {

ExportKind export_kind(const std::string& kind) {
  if (kind == "model") return ExportKind::kModel;
  if (kind == "adapter") return ExportKind::kAdapterOnly;
  if (kind == "merged") return ExportKind::kMergedModel;
  throw Error(ErrorCode::kInvalidArgument, "unknown export kind '" + kind + "' (expected 'model', 'adapter' or 'merged')");
}


// A map given by preset name, file path or JSON text ('{' first).
TensorMap tensor_map_from(const std::string& map) {
  if (!map.empty() && map.front() == '{') return parse_tensor_map(map, "map");
  return load_tensor_map(map);
}

std::string kind_name(ExportKind kind) {
  switch (kind) {
    case ExportKind::kModel: return "model";
    case ExportKind::kAdapterOnly: return "adapter";
    case ExportKind::kMergedModel: return "merged";
  }
  return "model";
}

ExportResult export_from_checkpoint(const std::filesystem::path& checkpoint, const std::filesystem::path& out,
                                    const std::string& map, const ExportOptions& options, Transport* transport) {
  const storage::Location source = place(checkpoint, "source");
  const storage::Location where = place(out, "out");
  const TensorMap tensor_map = tensor_map_from(map);
  return run_collective(transport,
                        [&](Transport& t) { return export_checkpoint(source, where, tensor_map, t, options); });
}

ExportResult export_from_arrays(const std::vector<std::string>& names, const std::vector<ShardedArray>& arrays,
                                const std::filesystem::path& out, const std::string& map, const ExportOptions& options,
                                Transport* transport) {
  const storage::Location where = place(out, "out");
  if (names.size() != arrays.size()) throw Error(ErrorCode::kInvalidArgument, "as many names as arrays");
  std::vector<NamedArray> named;
  for (size_t i = 0; i < arrays.size(); ++i) named.push_back(NamedArray{names[i], arrays[i]});
  const TensorMap tensor_map = tensor_map_from(map);
  const Topology topology = arrays.empty() ? Topology::uniform(1, 1) : arrays.front().topology();
  return with_transport(transport, topology,
                        [&](Transport& t) { return export_arrays(named, where, tensor_map, t, options); });
}

// A Python exception raised by a source's read, as the export's Error (what
// the other processes are told): a failed read that says its Python type.
Error read_error(const nb::python_error& error) {
  const std::string type = nb::cast<std::string>(nb::handle(error.type()).attr("__name__"));
  return Error(ErrorCode::kIo, type + ": " + nb::cast<std::string>(nb::str(error.value())));
}

// `read(source, starts, stops, buffer)` fills the writable memoryview
// `buffer` (valid during the call only) with that box of tensor `source`.
// The export calls it from its threads, each taking the GIL for the call.
// Where it raised on this process, that exception is raised again when the
// export fails (its Python class kept, the export's context as a note); the
// other processes raise PeerFailedError with its text.
ExportResult export_from_source(const std::vector<std::tuple<std::string, std::string, std::vector<uint64_t>>>& specs,
                                const nb::callable& read, const std::filesystem::path& out, const std::string& map,
                                const ExportOptions& options, Transport* transport) {
  const storage::Location where = place(out, "out");
  TensorSource source;
  for (const auto& [name, dtype, shape] : specs) source.specs.push_back({name, dtype_from_string(dtype), shape});
  nb::object raised;  // the first exception `read` raised here; set and read with the GIL held
  // A handle, not an owning object: the argument outlives the export, and
  // copies of the function are made without the GIL.
  source.read = [function = nb::handle(read), &raised](size_t index, const Box& box, std::span<std::byte> bytes) {
    nb::gil_scoped_acquire acquire;
    nb::list starts;
    nb::list stops;
    for (size_t d = 0; d < box.rank(); ++d) {
      starts.append(box.origin()[d]);
      stops.append(box.origin()[d] + box.shape()[d]);
    }
    nb::object view = nb::steal(PyMemoryView_FromMemory(reinterpret_cast<char*>(bytes.data()),
                                                        static_cast<Py_ssize_t>(bytes.size()), PyBUF_WRITE));
    if (!view.is_valid()) throw nb::python_error();
    try {
      function(index, nb::tuple(starts), nb::tuple(stops), view);
    } catch (nb::python_error& error) {
      if (!raised.is_valid()) raised = nb::borrow(error.value());
      throw read_error(error);
    }
    // The bytes are the export's after the call: a view the callback kept
    // now fails instead of reaching them (an array it made over the view
    // blocks the release, and must not outlive the call either).
    if (PyObject_CallMethod(view.ptr(), "release", nullptr) == nullptr) PyErr_Clear();
  };
  const TensorMap tensor_map = tensor_map_from(map);
  try {
    return run_collective(transport,
                          [&](Transport& t) { return export_source(source, where, tensor_map, t, options); });
  } catch (const Error& e) {
    if (!raised.is_valid() || e.code() == ErrorCode::kPeerFailed) throw;
    if (nb::hasattr(raised, "add_note")) raised.attr("add_note")(std::string(e.what()));
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(raised.ptr())), raised.ptr());
    throw nb::python_error();
  }
}

std::optional<std::string> optional_dtype_name(const std::optional<DType>& dtype) {
  return dtype ? std::optional<std::string>(std::string(dtype_name(*dtype))) : std::nullopt;
}

// ExportOptions and ImportOptions, made by keyword only: their fields are the
// Python keywords of export and import, each with the C++ default.
void bind_export_import_options(nb::module_& m) {
  nb::class_<ExportOptions>(m, "ExportOptions", "What export writes and how (keywords only).")
      .def("__init__",
           [](ExportOptions* self, const std::string& kind, const std::optional<std::string>& dtype,
              uint64_t max_shard_size, const std::optional<std::filesystem::path>& base, std::optional<int> gather_to,
              bool replace, std::optional<std::string> hf_config_json,
              const std::optional<std::string>& lora_config_json, uint64_t part_bytes, uint32_t parts_in_flight) {
             ExportOptions* options = new (self) ExportOptions();
             options->kind = export_kind(kind);
             if (dtype) options->dtype = dtype_from_string(*dtype);
             options->max_shard_size = max_shard_size;
             options->base = optional_place(base, "base");
             options->gather_to = gather_to;
             options->replace = replace;
             options->hf_config_json = std::move(hf_config_json);
             if (lora_config_json) options->lora_config = parse_lora_config(*lora_config_json, "lora_config");
             options->part_bytes = part_bytes;
             options->parts_in_flight = parts_in_flight;
           },
           nb::kw_only(), nb::arg("kind") = "model", nb::arg("dtype").none() = nb::none(),
           nb::arg("max_shard_size") = kDefaultMaxShardSize, nb::arg("base").none() = nb::none(),
           nb::arg("gather_to").none() = nb::none(), nb::arg("replace") = false,
           nb::arg("hf_config_json").none() = nb::none(), nb::arg("lora_config_json").none() = nb::none(),
           nb::arg("part_bytes") = ExportOptions{}.part_bytes, nb::arg("parts_in_flight") = ExportOptions{}.parts_in_flight)
      .def_prop_ro("kind", [](const ExportOptions& o) { return kind_name(o.kind); }, "'model', 'adapter' or 'merged'.")
      .def_prop_ro("dtype", [](const ExportOptions& o) { return optional_dtype_name(o.dtype); },
                   "The float type F32/F16/BF16 outputs are cast to; None: kept.")
      .def_ro("max_shard_size", &ExportOptions::max_shard_size, "Largest weight file, in bytes.")
      .def_prop_ro("base", [](const ExportOptions& o) {
        return o.base ? std::optional<std::string>(o.base->str()) : std::nullopt;
      }, "The base model adapter keys are checked against.")
      .def_ro("gather_to", &ExportOptions::gather_to, "The one process that writes; None: every process.")
      .def_ro("replace", &ExportOptions::replace, "Write over an existing folder's weight files.")
      .def_ro("hf_config_json", &ExportOptions::hf_config_json, "config.json's text; None: the checkpoint's.")
      .def_prop_ro("has_lora_config", [](const ExportOptions& o) { return o.lora_config.has_value(); },
                   "Whether a LoRA config (adapter_config.json) was given.")
      .def_ro("part_bytes", &ExportOptions::part_bytes, "An object-store output's part size; 0: the store's.")
      .def_ro("parts_in_flight", &ExportOptions::parts_in_flight, "Parts uploaded at once per process.")
      .def("__repr__", [](nb::handle self) {
        return keyword_repr(self, {"kind", "dtype", "max_shard_size", "base", "gather_to", "replace", "hf_config_json",
                                   "part_bytes", "parts_in_flight"});
      });
  nb::class_<ImportOptions>(m, "ImportOptions", "How import reads and saves (keywords only).")
      .def("__init__",
           [](ImportOptions* self, const std::optional<std::string>& dtype, AxisSizes sizes,
              const std::optional<std::filesystem::path>& base, bool replace) {
             ImportOptions* options = new (self) ImportOptions();
             if (dtype) options->dtype = dtype_from_string(*dtype);
             options->sizes = std::move(sizes);
             options->base = optional_place(base, "base");
             options->replace = replace;
           },
           nb::kw_only(), nb::arg("dtype").none() = nb::none(), nb::arg("sizes") = AxisSizes{},
           nb::arg("base").none() = nb::none(), nb::arg("replace") = false)
      .def_prop_ro("dtype", [](const ImportOptions& o) { return optional_dtype_name(o.dtype); },
                   "The float type F32/F16/BF16 tensors are cast to; None: kept.")
      .def_ro("sizes", &ImportOptions::sizes, "Axis sizes the shapes alone do not give.")
      .def_prop_ro("base", [](const ImportOptions& o) {
        return o.base ? std::optional<std::string>(o.base->str()) : std::nullopt;
      }, "An adapter's base model, whose config.json gives the sizes.")
      .def_ro("replace", &ImportOptions::replace, "Replace a checkpoint already at the output path.")
      .def("__repr__", [](nb::handle self) { return keyword_repr(self, {"dtype", "sizes", "base", "replace"}); });
}

}  // namespace

void bind_export_import(nb::module_& m) {
  nb::class_<ExportTimes>(m, "ExportTimes",
                          "Where one process's export time went, in seconds. Writing runs on a thread of its own "
                          "beside reading and producing, so the phases overlap and need not add up to the total.")
      .def_ro("read", &ExportTimes::read, "Reading source bytes (a part of produce).")
      .def_ro("produce", &ExportTimes::produce, "Producing this process's blocks, reads included.")
      .def_ro("write", &ExportTimes::write, "Writing them at their offsets (or, gathering, on the writing process).")
      .def_ro("sync", &ExportTimes::sync, "Flushing this process's writes to storage, once per file.")
      .def_ro("commit", &ExportTimes::commit, "Agreeing with the peers, and committing the folder.")
      .def_ro("total", &ExportTimes::total, "The whole export.")
      .def("__repr__", [](const ExportTimes& t) {
        return fmt::format("ExportTimes(read={:.3f}, produce={:.3f}, write={:.3f}, sync={:.3f}, commit={:.3f}, "
                           "total={:.3f})", t.read, t.produce, t.write, t.sync, t.commit, t.total);
      });
  nb::class_<ExportResult>(m, "ExportResult", "What an export wrote.")
      .def_ro("tensors", &ExportResult::tensors, "Tensors in the output.")
      .def_ro("merged", &ExportResult::merged, "Weights a LoRA delta was merged into.")
      .def_ro("files", &ExportResult::files, "Weight files written.")
      .def_ro("bytes", &ExportResult::bytes, "Tensor bytes of the output.")
      .def_ro("bytes_written", &ExportResult::bytes_written, "Tensor bytes this process wrote.")
      .def_ro("seconds", &ExportResult::seconds, "Where this process's time went (ExportTimes).")
      .def_ro("wrote_config_json", &ExportResult::wrote_config_json,
              "Whether the folder got a config.json (transformers loads a model folder by it).")
      .def("__repr__", [](const ExportResult& r) {
        return "ExportResult(tensors=" + std::to_string(r.tensors) + ", merged=" + std::to_string(r.merged) +
               ", files=" + std::to_string(r.files) + ", bytes=" + std::to_string(r.bytes) +
               ", bytes_written=" + std::to_string(r.bytes_written) + ")";
      });
  nb::class_<ImportResult>(m, "ImportResult", "What an import produced.")
      .def_ro("tensors", &ImportResult::tensors, "Framework tensors produced.")
      .def_ro("bytes", &ImportResult::bytes, "Their bytes.")
      .def_ro("bytes_read", &ImportResult::bytes_read, "Source tensor bytes this process read.")
      .def_prop_ro("metadata", [](const ImportResult& r) {
        return std::map<std::string, std::string>(r.metadata.begin(), r.metadata.end());
      }, "The configs saved as checkpoint metadata (config.json, adapter_config.json).");

  bind_export_import_options(m);
  m.def("_export_checkpoint", &export_from_checkpoint, nb::arg("checkpoint"), nb::arg("out"), nb::arg("map"),
        nb::arg("options"), nb::arg("transport").none() = nb::none(),
        "Exports a framework-layout checkpoint through a tensor map (collective).");
  m.def("_export_arrays", &export_from_arrays, nb::arg("names"), nb::arg("arrays"), nb::arg("out"), nb::arg("map"),
        nb::arg("options"), nb::arg("transport").none() = nb::none(),
        "Exports sharded arrays through a tensor map (collective).");
  m.def("_export_source", &export_from_source, nb::arg("specs"), nb::arg("read"), nb::arg("out"), nb::arg("map"),
        nb::kw_only(), nb::arg("options"), nb::arg("transport").none() = nb::none(),
        "Exports tensors read through `read(source, starts, stops, buffer)` through a tensor map (collective):\n"
        "`specs` are (name, dtype, shape) of each source; `read` fills the writable memoryview `buffer` (valid\n"
        "during the call only) with that box of tensor `source`, dense, row-major, in its dtype. It is called\n"
        "from the export's threads, several at once, each holding the GIL; an exception it raises fails the\n"
        "export on every process: raised again here, PeerFailedError with its text on the others.");
  m.def("_import_arrays", [](const std::filesystem::path& hf_dir, const std::string& map,
                             const CheckpointLayout& layout, const ImportOptions& options, Transport* transport) {
    const storage::Location source = place(hf_dir, "hf_dir");
    const TensorMap tensor_map = tensor_map_from(map);
    ImportResult result = with_transport(
        transport, layout.topology, [&](Transport& t) { return import_arrays(source, tensor_map, layout, t, options); });
    std::vector<std::pair<std::string, ShardedArray>> out;
    for (NamedArray& a : result.arrays) out.emplace_back(std::move(a.name), std::move(a.array));
    result.arrays.clear();  // Python gets them as pairs; the result keeps the counts
    return std::make_pair(std::move(out), std::move(result));
  }, nb::arg("hf_dir"), nb::arg("map"), nb::arg("layout"), nb::arg("options"),
        nb::arg("transport").none() = nb::none(), "Imports a Hugging Face folder as sharded arrays (collective).");
  m.def("_import_checkpoint", [](const std::filesystem::path& hf_dir, const std::filesystem::path& checkpoint,
                                 const std::string& map, const CheckpointLayout& layout, const ImportOptions& options,
                                 Transport* transport) {
    const storage::Location source = place(hf_dir, "hf_dir");
    const storage::Location where = place(checkpoint, "checkpoint");
    const TensorMap tensor_map = tensor_map_from(map);
    return with_transport(transport, layout.topology, [&](Transport& t) {
      return import_checkpoint(source, where, tensor_map, layout, t, options);
    });
  }, nb::arg("hf_dir"), nb::arg("checkpoint"), nb::arg("map"), nb::arg("layout"), nb::arg("options"),
        nb::arg("transport").none() = nb::none(),
        "Imports a Hugging Face folder as a framework-layout checkpoint (collective).");
}

}  // namespace reshard::python
