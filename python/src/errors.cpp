// reshard::Error becomes a Python exception of the class registered for its
// kind's name (reshard/errors.py defines them: ValueError subclasses for bad
// layouts and arguments, OSError for I/O, one class per file-format rule),
// with the C++ message unchanged and the kind's name as its `kind` (finer than
// the class where a layer names a case of its own, as kNoLoraConfig), so that
// Python decides by the kind, never by the message's text.
#include <string>
#include <unordered_map>
#include <vector>

#include "bindings.h"
#include "reshard/formats/file_rules.h"
#include "reshard/layout/error.h"
#include "reshard/storage/storage_error.h"

namespace reshard::python {
namespace {

// Every name an Error can carry: each generic code's, then each file rule's,
// then each of the storage layer's kinds.
std::vector<std::string_view> error_names() {
  std::vector<std::string_view> names;
  for (size_t i = 0; i < kErrorCodeCount; ++i) names.push_back(error_code_name(static_cast<ErrorCode>(i)));
  for (const ErrorKind& rule : file_rule::kAll) names.push_back(rule.name);
  for (const ErrorKind& kind : storage::kAll) names.push_back(kind.name);
  return names;
}

// Borrowed forever once registered: exception classes live as long as the
// interpreter, and a static nb::object would be released after it is gone.
std::unordered_map<std::string_view, PyObject*>& error_classes() {
  static auto* classes = new std::unordered_map<std::string_view, PyObject*>();
  return *classes;
}

void register_error_classes(nb::dict classes) {
  for (std::string_view name : error_names()) {
    const std::string key(name);
    if (!classes.contains(key.c_str())) throw nb::key_error(("no exception class for error " + key).c_str());
    nb::object cls = classes[key.c_str()];
    PyObject*& slot = error_classes()[name];
    Py_XDECREF(slot);
    slot = cls.release().ptr();
  }
}

nb::list error_code_names() {
  nb::list names;
  for (std::string_view name : error_names()) names.append(nb::str(name.data(), name.size()));
  return names;
}

void translate(const std::exception_ptr& error, void*) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    // A kind with no class of its own (a case one caller tells apart) is raised as its code's class.
    auto found = error_classes().find(e.name());
    if (found == error_classes().end()) found = error_classes().find(error_code_name(e.code()));
    PyObject* cls = found != error_classes().end() ? found->second : PyExc_RuntimeError;
    if (e.code() == ErrorCode::kTimeout || e.code() == ErrorCode::kPeerFailed) {
      after_transport_failure();
      after_tcp_failure();
    }
    PyObject* exception = PyObject_CallOneArg(cls, nb::str(e.what()).ptr());
    if (exception == nullptr) return;  // constructing it raised: that error stands
    if (PyObject_SetAttrString(exception, "kind", nb::str(e.name().data(), e.name().size()).ptr()) != 0) {
      Py_DECREF(exception);
      return;
    }
    PyErr_SetObject(cls, exception);
    Py_DECREF(exception);
  }
}

}  // namespace

void register_exit_handler_once(bool& armed, const char* module, const char* function) {
  if (armed) return;
  armed = true;
  try {
    nb::module_::import_("atexit").attr("register")(nb::module_::import_(module).attr(function));
  } catch (const nb::python_error&) {
    armed = false;  // tried again at the next failure; the error is not this one's to raise
  }
}

void bind_errors(nb::module_& m) {
  nb::register_exception_translator(translate);
  m.def("_register_error_classes", &register_error_classes, nb::arg("classes"),
        nb::sig("def _register_error_classes(classes: dict[str, type[Exception]]) -> None"),
        "Installs the Python class raised for each error name (done by reshard.errors).");
  m.def("_error_code_names", &error_code_names, nb::sig("def _error_code_names() -> list[str]"),
        "Every error name: the C++ codes' in their enum's order, then the file formats' rules, then the "
        "storage layer's kinds.");
}

}  // namespace reshard::python
