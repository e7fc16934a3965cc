// Shared by the binding files of reshard._core: one bind_* per layer, and the
// conversions between Python values and layout types.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nanobind/nanobind.h>

#include "reshard/execute/buffer.h"
#include "reshard/layout/box.h"
#include "reshard/layout/sharding.h"
#include "reshard/pipelines/layout_rules.h"

namespace reshard::python {

namespace nb = nanobind;

void bind_errors(nb::module_& m);
// _parse_location (places.cpp): paths and URLs as the library parses them.
void bind_places(nb::module_& m);
// _set_store_options, _store_options (store_options.cpp): how object-store clients behave.
void bind_store_options(nb::module_& m);
void bind_layout(nb::module_& m);
// The layout layer's parts, which bind_layout calls in dependency order.
void bind_dtypes(nb::module_& m);
void bind_topology(nb::module_& m);
void bind_box(nb::module_& m);
void bind_mesh(nb::module_& m);
void bind_partition_spec(nb::module_& m);
void bind_named_sharding(nb::module_& m);
// NamedSharding.picture (layout_picture.cpp): draw_sharding with each argument
// type-checked, so that a wrong one is an InvalidArgumentError naming it.
nb::object sharding_picture(const NamedSharding& sharding, nb::handle global_shape, nb::handle labels,
                            nb::handle dtype, nb::handle platform, nb::handle color, nb::handle width);
void bind_plan(nb::module_& m);
void bind_formats(nb::module_& m);
void bind_hf_folder(nb::module_& m);
// reshard.inspect / reshard.verify (inspect_verify.cpp).
void bind_inspect_verify(nb::module_& m);
void bind_execute(nb::module_& m);
void bind_transport(nb::module_& m);
void bind_pipelines(nb::module_& m);
void bind_checkpoint(nb::module_& m);
void bind_export_import(nb::module_& m);
void bind_mpi(nb::module_& m);
void bind_tcp(nb::module_& m);
// _agreed (agreement.cpp): a Python collective call fails together, by the
// pipelines' agreement.
void bind_agreement(nb::module_& m);
// Called (GIL held, no Python error set) as a transport's timeout or peer
// failure becomes a Python exception: with MPI, arms reshard.mpi's exit that
// waits for no peer given up on (mpi.cpp).
void after_transport_failure();
// The same for the TCP transport: once it gave up on a peer, arms
// reshard._job_transport's exit, which waits for no such peer (tcp.cpp).
void after_tcp_failure();
// Registers `module`.`function` as an exit handler, once per `armed` flag:
// registered as a failure is raised, it runs before every handler registered
// earlier (jax.distributed's, which waits for every process). A registration
// that fails is tried again at the next failure (errors.cpp).
void register_exit_handler_once(bool& armed, const char* module, const char* function);

// Checkpoint layout rules given as a rules file's text or as (pattern,
// PartitionSpec) pairs; none for None.
std::vector<LayoutRule> rules_from_python(nb::handle rules);

// A Buffer over the bytes of a Python object exporting a C-contiguous buffer
// (a numpy array), without a copy: writable when the object is, read-only
// otherwise. The export, and so the object, lives as long as any copy of the
// Buffer. Error(kInvalidArgument) for anything else.
Buffer adopt_python_buffer(nb::handle object);
// A 1-D uint8 numpy array over `buffer`'s bytes, sharing them (read-only for
// a read-only buffer); it keeps the buffer alive.
nb::object buffer_to_numpy(const Buffer& buffer);

// A shape from any sequence of ints (a tuple, a list, a numpy shape).
Shape shape_from_python(nb::handle sequence);
nb::tuple shape_to_python(const Shape& shape);
// A safetensors header's dimensions (unsigned, up to 2^64 - 1) as a tuple of ints.
nb::tuple dims_to_python(std::span<const uint64_t> dims);

// JAX's index form of a slice: a tuple of Python slices, `slice(None)` for a
// dimension the sharding does not split (num_chunks[d] == 1), as
// jax.sharding.NamedSharding.devices_indices_map returns.
nb::tuple box_to_index(const Box& box, const std::vector<int64_t>& num_chunks);

// A partition spec from reshard's PartitionSpec, JAX's (jax.sharding.PartitionSpec: the same entries) or any
// tuple or list of entries; Error(kInvalidArgument) naming `argument` for anything else (a str, a number).
PartitionSpec spec_from_python(nb::handle spec, std::string_view argument);

// A hash equal for specs that compare equal (trailing Nones dropped).
size_t spec_hash(const PartitionSpec& spec);

// A tuple of slice(begin, end) per dimension: a box as numpy indexes it.
nb::tuple box_to_slices(const Box& box);

// An options object's repr as the keyword call that makes it, from its
// properties `fields` (its keywords): "ExportOptions(kind='model', ...)"
// (keyword_repr.cpp).
std::string keyword_repr(nb::handle self, std::initializer_list<const char*> fields);

}  // namespace reshard::python
