// reshard.inspect and reshard.verify: what a .safetensors file, a Hugging Face
// or PEFT folder or a reshard checkpoint holds, and a full read-back of it, as
// the command line's `inspect --json` and `verify` (the same readers), given to
// Python as dicts rather than printed; and what killed writers left beside a
// path, which both commands point out.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "places.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/formats/model_files.h"
#include "reshard/formats/tensor_stream.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/store.h"

namespace reshard::python {
namespace {

namespace fs = std::filesystem;

nb::object metadata_dict(const std::optional<safetensors::Metadata>& metadata) {
  if (!metadata) return nb::none();
  nb::dict out;
  for (const auto& [key, value] : *metadata) out[nb::str(key.c_str())] = nb::str(value.c_str());
  return out;
}

nb::dict inspect_checkpoint(const checkpoint::Reader& reader) {
  const checkpoint::Manifest& manifest = reader.manifest();
  nb::list tensors;
  for (const checkpoint::TensorEntry& tensor : manifest.tensors) {
    nb::list chunks;
    for (const checkpoint::Chunk& chunk : tensor.chunks) {
      nb::dict entry;
      entry["box"] = box_to_slices(chunk.box);
      entry["file"] = chunk.file;
      entry["offset"] = chunk.offset;
      entry["length"] = chunk.length;
      chunks.append(entry);
    }
    nb::dict entry;
    entry["name"] = tensor.name;
    entry["dtype"] = std::string(dtype_name(tensor.dtype));
    entry["shape"] = shape_to_python(tensor.shape);
    entry["bytes"] = checkpoint::dense_bytes(tensor.dtype, tensor.shape);
    entry["layout"] = tensor.layout;
    entry["chunks"] = chunks;
    tensors.append(entry);
  }
  nb::dict out;
  out["format"] = "checkpoint";
  out["version"] = manifest.version();
  out["metadata"] = metadata_dict(manifest.metadata);
  out["tensors"] = tensors;
  return out;
}

nb::dict inspect_model(const ModelFiles& model) {
  const TensorCatalog& catalog = model.catalog;
  nb::list tensors;
  for (const TensorCatalog::Entry& entry : catalog.tensors()) {
    const safetensors::TensorInfo& info = *entry.info;
    nb::dict tensor;
    tensor["name"] = info.name;
    tensor["dtype"] = std::string(dtype_name(info.dtype));
    tensor["shape"] = dims_to_python(info.shape);
    tensor["bytes"] = info.byte_size();
    tensor["file"] = catalog.file_name(entry.file);
    tensors.append(tensor);
  }
  nb::dict out;
  out["format"] = std::string(model_format_name(model.format));
  out["metadata"] = metadata_dict(catalog.metadata());
  out["tensors"] = tensors;
  return out;
}

// The checkpoint at `where` (a local folder or a prefix in a store), if it is one.
std::optional<checkpoint::Reader> open_checkpoint(const storage::Location& where) {
  if (checkpoint::is_checkpoint(where)) return checkpoint::Reader::open(where);
  return std::nullopt;
}

nb::dict inspect(const fs::path& path) {
  const storage::Location where = place(path, "path");
  if (const std::optional<checkpoint::Reader> reader = open_checkpoint(where)) {
    return inspect_checkpoint(*reader);
  }
  return inspect_model(open_model_files(where, safetensors::ReadMode::kPread));
}

// Every chunk read back against its checksums, or every tensor's bytes read;
// the first damage is the reader's typed error naming file, tensor and chunk.
nb::dict verify(const fs::path& path) {
  const storage::Location where = place(path, "path");
  nb::dict out;
  if (const std::optional<checkpoint::Reader> found = open_checkpoint(where)) {
    const checkpoint::Reader& reader = *found;
    const checkpoint::Manifest& manifest = reader.manifest();
    {
      nb::gil_scoped_release release;
      std::vector<std::byte> bytes;
      for (const checkpoint::TensorEntry& tensor : manifest.tensors) {
        for (size_t c = 0; c < tensor.chunks.size(); ++c) {
          bytes.resize(static_cast<size_t>(tensor.chunks[c].length));
          reader.read_chunk(tensor, c, bytes);
        }
      }
    }
    out["format"] = "checkpoint";
    out["files"] = manifest.files.size();
    out["tensors"] = manifest.tensors.size();
    out["bytes"] = manifest.total_bytes();
    return out;
  }
  const ModelFiles model = open_model_files(where, safetensors::ReadMode::kPread);
  const TensorCatalog& catalog = model.catalog;
  {
    nb::gil_scoped_release release;
    for (const TensorCatalog::Entry& entry : catalog.tensors()) {
      try {
        stream_tensor(catalog.file_of(entry), *entry.info, entry.info->dtype, [](std::span<const std::byte>) {});
      } catch (const Error& e) {
        throw e.with_context(fmt::format("{}: tensor '{}'", catalog.file_name(entry.file), entry.info->name));
      }
    }
  }
  out["format"] = std::string(model_format_name(model.format));
  out["files"] = catalog.files().size();
  out["tensors"] = catalog.tensors().size();
  out["bytes"] = catalog.total_bytes();
  return out;
}

// The staging a killed writer left beside a local path, a store's unfinished
// uploads under it (Store::unfinished_uploads). Best effort, as the command
// line's note: a store that refuses the listing gives none.
std::vector<std::string> unfinished_uploads(const fs::path& path) {
  const storage::Location where = place(path, "path");
  try {
    return storage::open_store(where)->unfinished_uploads(where);
  } catch (const Error&) {
    return {};  // only a note: never what makes the call fail
  }
}

}  // namespace

void bind_inspect_verify(nb::module_& m) {
  m.def("_inspect", &inspect, nb::arg("path"),
        nb::sig("def _inspect(path: str | os.PathLike) -> dict[str, typing.Any]"),
        "What a file, folder or checkpoint (local, or s3:// and gs://) holds, as `reshard inspect --json`\n"
        "(without hashes).");
  m.def("_verify", &verify, nb::arg("path"),
        nb::sig("def _verify(path: str | os.PathLike) -> dict[str, typing.Any]"),
        "Reads everything back as `reshard verify` does; the first damage raises its typed error.");
  m.def("_unfinished_uploads", &unfinished_uploads, nb::arg("path"),
        nb::sig("def _unfinished_uploads(path: str | os.PathLike) -> list[str]"),
        "What killed writers left beside `path` (staging, unfinished uploads), as `inspect --json`'s\n"
        "\"unfinished_uploads\"; none where the store refuses the listing.");
}

}  // namespace reshard::python
