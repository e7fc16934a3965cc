// reshard._core: the compiled half of the Python package `reshard`. The
// Python modules next to it give it Python's idiom (numpy dtypes, exception
// classes); this file only wires the layers' bindings together.
#include "bindings.h"

NB_MODULE(_core, m) {
  m.doc() = "reshard's C++ library: layouts, plans, safetensors files and sharded arrays";
  reshard::python::bind_errors(m);
  reshard::python::bind_places(m);
  reshard::python::bind_store_options(m);
  reshard::python::bind_layout(m);
  reshard::python::bind_plan(m);
  reshard::python::bind_formats(m);
  reshard::python::bind_inspect_verify(m);
  reshard::python::bind_execute(m);
  reshard::python::bind_pipelines(m);
  reshard::python::bind_mpi(m);
  reshard::python::bind_tcp(m);
  reshard::python::bind_agreement(m);
}
