// Binding of Hugging Face folder reading: a model (one file, or an index and
// its files) or a PEFT adapter, validated together at open. Tensor bytes are
// read through the folder's SafetensorsFile objects (reshard/hf.py).
#include <filesystem>
#include <string>
#include <vector>

#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "places.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/layout/error.h"

namespace reshard::python {
namespace {

const char* kind_name(HfFolderKind kind) {
  switch (kind) {
    case HfFolderKind::kSingleFile: return "single_file";
    case HfFolderKind::kIndexed: return "indexed";
    case HfFolderKind::kPeftAdapter: return "peft_adapter";
  }
  return "single_file";
}

safetensors::ReadMode folder_read_mode(const std::string& mode) {
  if (mode == "mmap") return safetensors::ReadMode::kMmap;
  if (mode == "pread") return safetensors::ReadMode::kPread;
  throw Error(ErrorCode::kInvalidArgument, "unknown read mode '" + mode + "' (expected 'mmap' or 'pread')");
}

}  // namespace

void bind_hf_folder(nb::module_& m) {
  nb::class_<HfFolder>(m, "HfFolder", "An open, validated Hugging Face folder (use reshard.hf.open_folder).")
      .def_static("open", [](const std::filesystem::path& folder, const std::string& mode) {
        const storage::Location where = place(folder, "path");
        const safetensors::ReadMode read = folder_read_mode(mode);
        nb::gil_scoped_release release;
        return HfFolder::open(where, read);
      }, nb::arg("folder"), nb::arg("mode") = "mmap",
         "Opens every file of `folder` (a local folder, or an s3:// or gs:// prefix) and checks them\n"
         "against the index, if any.")
      .def_prop_ro("kind", [](const HfFolder& f) { return kind_name(f.kind); },
                   "'single_file', 'indexed' or 'peft_adapter'.")
      .def_prop_ro("folder", [](const HfFolder& f) { return f.folder.str(); }, "The folder's path, or its URL.")
      .def_prop_ro("files", [](const HfFolder& f) {
        return std::vector<safetensors::File>(f.catalog.files().begin(), f.catalog.files().end());
      }, "The open safetensors files, in file order.")
      .def_prop_ro("file_names", [](const HfFolder& f) {
        std::vector<std::string> names;
        for (size_t i = 0; i < f.catalog.files().size(); ++i) names.push_back(f.catalog.file_name(i));
        return names;
      }, "The files' names relative to the folder.")
      .def_prop_ro("tensor_files", [](const HfFolder& f) {
        nb::dict out;
        for (const TensorCatalog::Entry& e : f.catalog.tensors()) out[e.info->name.c_str()] = e.file;
        return out;
      }, nb::for_getter(nb::sig("def tensor_files(self) -> dict[str, int]")),
         "{tensor name: index into files}, in source order (file by file, data order within each).")
      .def_prop_ro("metadata", [](const HfFolder& f) -> nb::object {
        const auto metadata = f.catalog.metadata();
        if (!metadata) return nb::none();
        nb::dict out;
        for (const auto& [key, value] : *metadata) out[key.c_str()] = value;
        return out;
      }, nb::for_getter(nb::sig("def metadata(self) -> dict[str, str] | None")),
         "The files' __metadata__ merged in file order (first value wins), or None.");
}

}  // namespace reshard::python
