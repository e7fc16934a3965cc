// reshard::Error becomes a Python exception of the class registered for its
// code (reshard/errors.py defines them: ValueError subclasses for bad
// layouts and arguments, OSError for I/O), with the C++ message unchanged.
#include <array>
#include <string>

#include "bindings.h"
#include "reshard/layout/error.h"

namespace reshard::python {
namespace {

constexpr size_t kNumCodes = static_cast<size_t>(ErrorCode::kInvalidConfig) + 1;  // the last code

// Borrowed forever once registered: exception classes live as long as the
// interpreter, and a static nb::object would be released after it is gone.
std::array<PyObject*, kNumCodes> error_classes{};

void register_error_classes(nb::dict classes) {
  for (size_t i = 0; i < kNumCodes; ++i) {
    const std::string name(error_code_name(static_cast<ErrorCode>(i)));
    if (!classes.contains(name.c_str())) {
      throw nb::key_error(("no exception class for error code " + name).c_str());
    }
    nb::object cls = classes[name.c_str()];
    Py_XDECREF(error_classes[i]);
    error_classes[i] = cls.release().ptr();
  }
}

nb::list error_code_names() {
  nb::list names;
  for (size_t i = 0; i < kNumCodes; ++i) names.append(nb::str(error_code_name(static_cast<ErrorCode>(i)).data()));
  return names;
}

void translate(const std::exception_ptr& error, void*) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    PyObject* cls = error_classes[static_cast<size_t>(e.code())];
    PyErr_SetString(cls != nullptr ? cls : PyExc_RuntimeError, e.what());
  }
}

}  // namespace

void bind_errors(nb::module_& m) {
  nb::register_exception_translator(translate);
  m.def("_register_error_classes", &register_error_classes, nb::arg("classes"),
        nb::sig("def _register_error_classes(classes: dict[str, type[Exception]]) -> None"),
        "Installs the Python class raised for each error code name (done by reshard.errors).");
  m.def("_error_code_names", &error_code_names, nb::sig("def _error_code_names() -> list[str]"), "Every error code name, in the C++ enum's order.");
}

}  // namespace reshard::python
