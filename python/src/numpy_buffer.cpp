// Buffers shared with numpy both ways, without a copy: a numpy array's memory
// adopted as a reshard Buffer, and a Buffer's bytes handed out as a numpy
// array. Whoever lives longer keeps the other's memory alive.
#include <memory>

#include <nanobind/ndarray.h>

#include "bindings.h"
#include "reshard/layout/error.h"

namespace reshard::python {
namespace {

// Holds a buffer export of the Python object (so numpy can neither free nor
// resize its memory) and releases it with the GIL held, from whichever thread
// drops the last copy of the Buffer (a transfer's worker, say). After the
// interpreter has shut down there is nothing left to release.
struct PythonBufferOwner {
  Py_buffer view{};
  PythonBufferOwner() = default;
  PythonBufferOwner(const PythonBufferOwner&) = delete;
  PythonBufferOwner& operator=(const PythonBufferOwner&) = delete;
  ~PythonBufferOwner() {
    if (view.obj == nullptr || !nb::is_alive()) return;
    nb::gil_scoped_acquire gil;
    PyBuffer_Release(&view);
  }
};

using WritableNumpy = nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>>;
using ReadOnlyNumpy = nb::ndarray<nb::numpy, const uint8_t, nb::ndim<1>>;

}  // namespace

Buffer adopt_python_buffer(nb::handle object) {
  auto owner = std::make_shared<PythonBufferOwner>();
  bool writable = true;
  if (PyObject_GetBuffer(object.ptr(), &owner->view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) {
    PyErr_Clear();  // not writable (or not contiguous, which the read-only request reports)
    writable = false;
    if (PyObject_GetBuffer(object.ptr(), &owner->view, PyBUF_C_CONTIGUOUS) != 0) {
      owner->view.obj = nullptr;
      PyErr_Clear();
      throw Error(ErrorCode::kInvalidArgument, "a shard's memory must be a C-contiguous buffer, got a " +
                                                   std::string(Py_TYPE(object.ptr())->tp_name));
    }
  }
  auto* data = static_cast<std::byte*>(owner->view.buf);
  const auto size = static_cast<size_t>(owner->view.len);
  if (writable) return Buffer::adopt({data, size}, std::move(owner));
  return Buffer::adopt_read_only({data, size}, std::move(owner));
}

nb::object buffer_to_numpy(const Buffer& buffer) {
  auto* copy = new Buffer(buffer);
  nb::capsule owner(copy, [](void* p) noexcept { delete static_cast<Buffer*>(p); });
  const size_t shape[1] = {copy->size()};
  const Buffer& read = *copy;
  if (copy->writable()) {
    return nb::cast(WritableNumpy(reinterpret_cast<uint8_t*>(copy->data()), 1, shape, owner));
  }
  return nb::cast(ReadOnlyNumpy(reinterpret_cast<const uint8_t*>(read.data()), 1, shape, owner));
}

}  // namespace reshard::python
