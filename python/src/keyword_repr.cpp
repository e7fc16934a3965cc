// keyword_repr: an options object's repr as the call that makes it.
#include <string>

#include "bindings.h"

namespace reshard::python {

std::string keyword_repr(nb::handle self, std::initializer_list<const char*> fields) {
  std::string out = nb::cast<std::string>(self.type().attr("__name__")) + "(";
  const char* separator = "";
  for (const char* field : fields) {
    out += separator;
    out += field;
    out += "=";
    out += nb::cast<std::string>(nb::repr(self.attr(field)));
    separator = ", ";
  }
  return out + ")";
}

}  // namespace reshard::python
