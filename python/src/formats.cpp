// Bindings of safetensors reading and writing. Tensor bytes cross as 1-D
// uint8 numpy arrays (reshard/safetensors.py views them as the tensor's dtype
// and shape): in mmap mode a read-only view into the mapping, owned by a copy
// of the open file so the mapping outlives every view.
#include <filesystem>
#include <string>
#include <vector>

#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "places.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/error.h"

namespace reshard::python {
namespace {

namespace st = reshard::safetensors;

using Bytes = nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using ReadOnlyBytes = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using NumpyView = nb::ndarray<nb::numpy, const uint8_t, nb::ndim<1>>;

st::ReadMode read_mode(const std::string& mode) {
  if (mode == "mmap") return st::ReadMode::kMmap;
  if (mode == "pread") return st::ReadMode::kPread;
  throw Error(ErrorCode::kInvalidArgument, "unknown read mode '" + mode + "' (expected 'mmap' or 'pread')");
}

std::span<std::byte> as_bytes(Bytes& out) {
  return {reinterpret_cast<std::byte*>(out.data()), out.size()};
}

NumpyView view(const st::File& file, const std::string& name) {
  const std::span<const std::byte> bytes = file.view(file.tensor(name));
  // The capsule owns a copy of the file (which shares the mapping).
  nb::capsule owner(new st::File(file), [](void* p) noexcept { delete static_cast<st::File*>(p); });
  const size_t shape[1] = {bytes.size()};
  return NumpyView(reinterpret_cast<const uint8_t*>(bytes.data()), 1, shape, owner);
}

void read_into(const st::File& file, const std::string& name, Bytes out) {
  const st::TensorInfo& tensor = file.tensor(name);
  nb::gil_scoped_release release;
  file.read(tensor, as_bytes(out));
}

void read_box_into(const st::File& file, const std::string& name, const Box& box, Bytes out) {
  const st::TensorInfo& tensor = file.tensor(name);
  nb::gil_scoped_release release;
  file.read_box(tensor, box, as_bytes(out));
}

nb::object metadata_to_python(const std::optional<st::Metadata>& metadata) {
  if (!metadata) return nb::none();
  nb::dict out;
  for (const auto& [key, value] : *metadata) out[key.c_str()] = value;
  return out;
}

using TensorEntry = std::tuple<std::string, std::string, nb::object, ReadOnlyBytes>;

void write_file(const std::filesystem::path& path, const std::vector<TensorEntry>& tensors,
                std::optional<std::vector<std::pair<std::string, std::string>>> metadata) {
  const storage::Location where = place(path, "filename");
  std::vector<st::TensorData> data;
  data.reserve(tensors.size());
  for (const auto& [name, dtype, shape, bytes] : tensors) {
    data.push_back({st::TensorSpec{name, dtype_from_string(dtype), st::dims_of(shape_from_python(shape))},
                    {reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}});
  }
  nb::gil_scoped_release release;
  st::write_file(where, data, std::move(metadata));
}

void bind_tensor_info(nb::module_& m) {
  nb::class_<st::TensorInfo>(m, "TensorInfo", "One tensor entry of a safetensors header.")
      .def_ro("name", &st::TensorInfo::name, "The tensor's name.")
      .def_prop_ro("dtype", [](const st::TensorInfo& t) { return std::string(dtype_name(t.dtype)); },
                   "The safetensors dtype name ('F32', 'BF16', ...).")
      .def_prop_ro("shape", [](const st::TensorInfo& t) { return dims_to_python(t.shape); },
                   nb::for_getter(nb::sig("def shape(self) -> tuple[int, ...]")), "The tensor's shape.")
      .def_prop_ro("data_offsets", [](const st::TensorInfo& t) { return std::make_pair(t.begin, t.end); },
                   "(begin, end) byte offsets into the data buffer.")
      .def_prop_ro("nbytes", &st::TensorInfo::byte_size, "Bytes of the tensor's data.")
      .def("__repr__", [](const st::TensorInfo& t) {
        return "TensorInfo(name=" + nb::cast<std::string>(nb::repr(nb::str(t.name.c_str()))) + ", dtype=" +
               std::string(dtype_name(t.dtype)) + ", shape=" + nb::cast<std::string>(nb::repr(dims_to_python(t.shape))) +
               ")";
      });
}

}  // namespace

void bind_formats(nb::module_& m) {
  bind_tensor_info(m);
  nb::class_<st::File>(m, "SafetensorsFile",
                       "An open safetensors file whose whole header was validated at open.\n"
                       "Use reshard.safetensors.safe_open; this is the compiled half.")
      .def_static("open", [](const std::filesystem::path& path, const std::string& mode) {
        const storage::Location where = place(path, "path");
        const st::ReadMode read = read_mode(mode);
        nb::gil_scoped_release release;
        return st::File::open(where, read);
      }, nb::arg("path"), nb::arg("mode") = "mmap",
         "Opens and validates `path`, a local file or an s3:// or gs:// object ('mmap' maps a local\n"
         "file, 'pread' reads on demand; objects are read by byte ranges). Raises a FormatError\n"
         "subclass (InvalidHeaderJsonError, InvalidOffsetError...) for a malformed file, and\n"
         "ReshardIOError (a StorageError subclass for an object) when it cannot be read.")
      .def_prop_ro("path", [](const st::File& f) { return f.location().str(); },
                   "The file's path, or its URL (s3://BUCKET/KEY).")
      .def_prop_ro("mode", [](const st::File& f) { return f.mode() == st::ReadMode::kMmap ? "mmap" : "pread"; },
                   "'mmap' or 'pread'.")
      .def_prop_ro("tensors", [](const st::File& f) {
        return std::vector<st::TensorInfo>(f.tensors().begin(), f.tensors().end());
      }, "Every tensor entry, in the order of their bytes in the file.")
      .def_prop_ro("metadata", [](const st::File& f) { return metadata_to_python(f.metadata()); },
                   nb::for_getter(nb::sig("def metadata(self) -> dict[str, str] | None")), "`__metadata__` as a dict, or None when the file has none.")
      .def_prop_ro("data_start", [](const st::File& f) { return f.header().data_start(); },
                   "File offset of the data buffer (8 + header bytes).")
      .def("info", [](const st::File& f, const std::string& name) { return f.tensor(name); }, nb::arg("name"),
           "The entry of tensor `name` (MissingTensorError if absent).")
      .def("__contains__", [](const st::File& f, const std::string& name) { return f.find(name) != nullptr; })
      .def("_view", &view, nb::arg("name"), "Read-only uint8 view of a tensor's bytes in the mapping (mmap mode).")
      .def("_read_into", &read_into, nb::arg("name"), nb::arg("out"), "Copies a tensor's bytes into `out`.")
      .def("_read_box_into", &read_box_into, nb::arg("name"), nb::arg("box"), nb::arg("out"),
           "Copies the box of a tensor, dense row-major, into `out`.");

  bind_hf_folder(m);

  m.def("_write_safetensors", &write_file, nb::arg("path"), nb::arg("tensors"), nb::arg("metadata").none(),
        nb::sig("def _write_safetensors(path: str | os.PathLike, tensors: collections.abc.Sequence[tuple[str, str, tuple[int, ...], "
                "numpy.ndarray]], metadata: collections.abc.Sequence[tuple[str, str]] | None) -> None"),
        "Writes (name, dtype, shape, bytes) tensors as a safetensors file, atomically.");
}

}  // namespace reshard::python
