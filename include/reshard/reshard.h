// reshard: everything a program calls, in one header (the MPI transport has its own: reshard/mpi.h).
#pragma once

// Layouts: dtypes, boxes, devices and topologies, meshes, partition specs, shardings
// and their pictures; typed errors.
#include "reshard/layout/best_effort.h"
#include "reshard/layout/box.h"
#include "reshard/layout/dtype.h"
#include "reshard/layout/error.h"
#include "reshard/layout/mesh.h"
#include "reshard/layout/parse.h"
#include "reshard/layout/partition_spec.h"
#include "reshard/layout/sharding.h"
#include "reshard/layout/sharding_picture.h"
#include "reshard/layout/topology.h"

// Plans: the transfers between two layouts, and their cache.
#include "reshard/plan/plan.h"
#include "reshard/plan/plan_cache.h"
#include "reshard/plan/planner.h"

// Execution: buffers, sharded arrays, transports, and the operations over them.
#include "reshard/execute/buffer.h"
#include "reshard/execute/cached_memory.h"
#include "reshard/execute/executor.h"
#include "reshard/execute/fast_paths.h"
#include "reshard/execute/host_array.h"
#include "reshard/execute/in_process_transport.h"
#include "reshard/execute/operations.h"
#include "reshard/execute/sharded_array.h"
#include "reshard/execute/tcp_transport.h"
#include "reshard/execute/transport.h"
#include "reshard/execute/transport_calls.h"

// Storage: local files and object stores.
#include "reshard/storage/location.h"
#include "reshard/storage/object_writer.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/part_writer.h"
#include "reshard/storage/pending_uploads.h"
#include "reshard/storage/storage_error.h"
#include "reshard/storage/store.h"

// Files: safetensors, Hugging Face folders, reshard checkpoints.
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/formats/file_rules.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/model_files.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/formats/tensor_catalog.h"

// Pipelines: checkpoints saved and restored on any layout, Hugging Face folders
// converted, imported into a framework's layout and exported from it through
// tensor maps, PEFT adapters exported and merged.
#include "reshard/pipelines/checkpoint_restore.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "reshard/pipelines/convert.h"
#include "reshard/pipelines/export_model.h"
#include "reshard/pipelines/import_model.h"
#include "reshard/pipelines/layout_rules.h"
#include "reshard/pipelines/lora_config.h"
#include "reshard/pipelines/merge_lora.h"
#include "reshard/pipelines/named_array.h"
#include "reshard/pipelines/peft_adapter.h"
#include "reshard/pipelines/tensor_map.h"
