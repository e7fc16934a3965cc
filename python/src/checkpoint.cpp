// Bindings of reshard checkpoints: save (blocking, or staged with a handle to
// wait on), restore onto any layout (by name, any subset) and restore into
// arrays the caller allocated. All collective over a transport (None: one
// process). reshard/checkpoint.py gives them Python's names and mappings.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "places.h"
#include "reshard/pipelines/checkpoint_restore.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "transport_scope.h"

namespace reshard::python {
namespace {

using MetadataItems = std::vector<std::pair<std::string, std::string>>;

std::vector<NamedArray> named_arrays(const std::vector<std::string>& names, const std::vector<ShardedArray>& arrays) {
  if (names.size() != arrays.size()) {
    throw Error(ErrorCode::kInvalidArgument, std::to_string(names.size()) + " names for " +
                                                 std::to_string(arrays.size()) + " arrays");
  }
  std::vector<NamedArray> out;
  out.reserve(arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) out.push_back(NamedArray{names[i], arrays[i]});
  return out;
}

// The topology the operation runs in: the arrays' (one process when there are none).
Topology topology_of(const std::vector<NamedArray>& arrays) {
  return arrays.empty() ? Topology::uniform(1, 1) : arrays.front().array.topology();
}

SaveResult save(const std::filesystem::path& path, const std::vector<std::string>& names,
               const std::vector<ShardedArray>& arrays, const SaveOptions& options, Transport* transport) {
  const storage::Location where = place(path, "path");
  const std::vector<NamedArray> named = named_arrays(names, arrays);
  return with_transport(transport, topology_of(named),
                        [&](Transport& t) { return save_checkpoint(named, where, t, options); });
}

// An asynchronous save as Python holds it: the handle, and the one-process
// group it runs on when the caller gave no transport (which must outlive the
// handle's background work, so it is destroyed after the handle).
class PendingSave {
 public:
  PendingSave() = default;
  PendingSave(const PendingSave&) = delete;
  PendingSave& operator=(const PendingSave&) = delete;
  // Waits for the background work (its errors are lost: call wait()), without the GIL.
  ~PendingSave() {
    if (waited_ || !nb::is_alive()) return;
    nb::gil_scoped_release release;
    handle_ = SaveHandle();
  }

  static std::unique_ptr<PendingSave> start(const storage::Location& where, const std::vector<NamedArray>& named,
                                            const SaveOptions& options, Transport* transport) {
    auto pending = std::make_unique<PendingSave>();
    const Topology topology = topology_of(named);
    if (transport == nullptr) {
      check_one_process(topology);
      pending->group_ = std::make_unique<InProcessGroup>(1);
      transport = &pending->group_->transport(0);
    } else {
      check_transport_fits(*transport, topology);
    }
    nb::gil_scoped_release release;
    pending->handle_ = save_checkpoint_async(named, where, *transport, options);
    return pending;
  }

  SaveResult wait() {
    if (waited_) throw Error(ErrorCode::kInvalidArgument, "wait() was already called on this save");
    waited_ = true;
    nb::gil_scoped_release release;
    return handle_.wait();
  }
  bool ready() const { return waited_ || handle_.ready(); }

 private:
  std::unique_ptr<InProcessGroup> group_;
  SaveHandle handle_;
  bool waited_ = false;
};

std::unique_ptr<PendingSave> save_async(const std::filesystem::path& path, const std::vector<std::string>& names,
                                        const std::vector<ShardedArray>& arrays, const SaveOptions& options,
                                        Transport* transport) {
  const storage::Location where = place(path, "path");
  const std::vector<NamedArray> named = named_arrays(names, arrays);
  return PendingSave::start(where, named, options, transport);
}

std::pair<std::vector<ShardedArray>, RestoreResult> restore(const std::filesystem::path& path,
                                                           const std::vector<std::string>& names,
                                                           const std::vector<NamedSharding>& shardings,
                                                           const Topology& topology, const RestoreOptions& options,
                                                           Transport* transport) {
  const storage::Location where = place(path, "path");
  if (names.size() != shardings.size()) {
    throw Error(ErrorCode::kInvalidArgument, std::to_string(names.size()) + " names for " +
                                                 std::to_string(shardings.size()) + " shardings");
  }
  std::vector<RestoreTarget> targets;
  targets.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) targets.push_back(RestoreTarget{names[i], shardings[i], topology});
  RestoreResult result =
      with_transport(transport, topology, [&](Transport& t) { return restore_checkpoint(where, targets, t, options); });
  std::vector<ShardedArray> arrays;
  arrays.reserve(result.arrays.size());
  for (NamedArray& named : result.arrays) arrays.push_back(std::move(named.array));
  result.arrays.clear();  // Python gets them as a list; the result keeps the counts
  return {std::move(arrays), std::move(result)};
}

RestoreResult restore_into(const std::filesystem::path& path, const std::vector<std::string>& names,
                          const std::vector<ShardedArray>& arrays, const RestoreOptions& options,
                          Transport* transport) {
  const storage::Location where = place(path, "path");
  std::vector<NamedArray> named = named_arrays(names, arrays);  // copies share the arrays' buffers
  for (const NamedArray& array : named) array.array.check_writable();
  return with_transport(transport, topology_of(named),
                        [&](Transport& t) { return restore_checkpoint_into(where, named, t, options); });
}

// The type save_checkpoint takes its folder as: storage::Location once checkpoints
// are saved to stores, std::filesystem::path while only to local folders.
template <typename R, typename Arrays, typename Path, typename... Rest>
std::remove_cvref_t<Path> save_path_type(R (*)(Arrays, Path, Rest...));
using SavePath = decltype(save_path_type(&save_checkpoint));

// Refuses, before anything is read, a place save_checkpoint cannot write.
void check_save_path(const std::filesystem::path& path, const std::string& argument) {
  const storage::Location where = place(path, argument.c_str());
  [[maybe_unused]] const SavePath checked = where;
}

void bind_stats(nb::module_& m) {
  nb::class_<SaveResult>(m, "SaveResult", "What this process did in a save.")
      .def_ro("chunks_written", &SaveResult::chunks_written, "Chunks this process wrote.")
      .def_ro("bytes_written", &SaveResult::bytes_written, "Chunk bytes this process wrote.")
      .def_ro("waves", &SaveResult::waves, "Staging waves (asynchronous saves).")
      .def_ro("peak_staged_bytes", &SaveResult::peak_staged_bytes,
              "Asynchronous saves: the most bytes this process held staged in host memory at once.")
      .def("__repr__", [](const SaveResult& s) {
        return fmt::format("SaveResult(chunks_written={}, bytes_written={}, waves={}, peak_staged_bytes={})",
                           s.chunks_written, s.bytes_written, s.waves, s.peak_staged_bytes);
      });
  nb::class_<RestoreResult>(m, "RestoreResult", "What this process read in a restore.")
      .def_ro("header_bytes_read", &RestoreResult::header_bytes_read, "The manifest and data files' headers.")
      .def_ro("data_bytes_read", &RestoreResult::data_bytes_read, "Chunk bytes.")
      .def("__repr__", [](const RestoreResult& s) {
        return "RestoreResult(header_bytes_read=" + std::to_string(s.header_bytes_read) +
               ", data_bytes_read=" + std::to_string(s.data_bytes_read) + ")";
      });
}

std::optional<MetadataItems> metadata_items(const SaveOptions& o) {
  if (!o.metadata) return std::nullopt;
  return MetadataItems(o.metadata->begin(), o.metadata->end());
}

// SaveOptions and RestoreOptions, made by keyword only: their fields are the
// Python keywords of save/save_async and restore/restore_into, each with the
// C++ default.
void bind_options(nb::module_& m) {
  nb::class_<SaveOptions>(m, "SaveOptions", "How a checkpoint is saved (keywords only).")
      .def("__init__",
           [](SaveOptions* self, std::optional<MetadataItems> metadata, bool replace, uint64_t staging_bytes,
              uint64_t checksum_block_bytes) {
             SaveOptions* options = new (self) SaveOptions();
             if (metadata) options->metadata = safetensors::Metadata(metadata->begin(), metadata->end());
             options->replace = replace;
             options->staging_bytes = staging_bytes;
             options->checksum_block_bytes = checksum_block_bytes;
           },
           nb::kw_only(), nb::arg("metadata").none() = nb::none(), nb::arg("replace") = false,
           nb::arg("staging_bytes") = SaveOptions{}.staging_bytes,
           nb::arg("checksum_block_bytes") = SaveOptions{}.checksum_block_bytes)
      .def_prop_ro("metadata", &metadata_items, "The manifest's own (key, value) pairs; None: none.")
      .def_ro("replace", &SaveOptions::replace, "Replace a checkpoint already at the path.")
      .def_ro("staging_bytes", &SaveOptions::staging_bytes, "save_async: host memory its staging may hold.")
      .def_ro("checksum_block_bytes", &SaveOptions::checksum_block_bytes,
              "Bytes per checksum block of a chunk; 0: one checksum per chunk (format version 1).")
      .def("__repr__", [](nb::handle self) {
        return keyword_repr(self, {"metadata", "replace", "staging_bytes", "checksum_block_bytes"});
      });
  nb::class_<RestoreOptions>(m, "RestoreOptions", "How a checkpoint is restored (keywords only).")
      .def("__init__",
           [](RestoreOptions* self, bool verify_checksums) {
             new (self) RestoreOptions{.verify_checksums = verify_checksums};
           },
           nb::kw_only(), nb::arg("verify_checksums") = RestoreOptions{}.verify_checksums)
      .def_ro("verify_checksums", &RestoreOptions::verify_checksums,
              "Verify the checksums of the blocks read (off: only the bytes needed are read, damage unseen).")
      .def("__repr__", [](nb::handle self) { return keyword_repr(self, {"verify_checksums"}); });
}

}  // namespace

void bind_checkpoint(nb::module_& m) {
  bind_stats(m);
  bind_options(m);
  nb::class_<PendingSave>(m, "SaveHandle",
                          "An asynchronous save in progress: wait() for its result, ready() to poll.")
      .def("wait", &PendingSave::wait,
           "Blocks (without the GIL) until the save is committed everywhere, or raises its error. Once.")
      .def("ready", &PendingSave::ready, "Whether wait() would return at once.");

  m.def("_save_checkpoint", &save, nb::arg("path"), nb::arg("names"), nb::arg("arrays"), nb::kw_only(),
        nb::arg("options"), nb::arg("transport").none() = nb::none(),
        "Saves the arrays under their names as a checkpoint folder (collective).");
  m.def("_save_checkpoint_async", &save_async, nb::arg("path"), nb::arg("names"), nb::arg("arrays"),
        nb::kw_only(), nb::arg("options"), nb::arg("transport").none() = nb::none(), nb::keep_alive<0, 5>(),
        "Stages the arrays and saves them in the background; the handle keeps the transport alive.");
  m.def("_restore_checkpoint", &restore, nb::arg("path"), nb::arg("names"), nb::arg("shardings"),
        nb::arg("topology"), nb::kw_only(), nb::arg("options"), nb::arg("transport").none() = nb::none(),
        "The named tensors laid out by their shardings, and what was read (collective).");
  m.def("_check_save_path", &check_save_path, nb::arg("path"), nb::arg("argument"),
        "Raises the error a save to `path` would (a URL refused, a scheme reshard does not write), naming "
        "`argument`, before any work is done.");
  m.def("_restore_checkpoint_into", &restore_into, nb::arg("path"), nb::arg("names"), nb::arg("arrays"),
        nb::kw_only(), nb::arg("options"), nb::arg("transport").none() = nb::none(),
        "Fills the arrays' shards with the tensors of their names (collective).");
}

}  // namespace reshard::python
