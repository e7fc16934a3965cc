// The process's parallel uploads that are neither completed nor aborted, so
// that a process told to stop (SIGTERM from mpirun when a peer died, SIGINT
// from a user) can abort them before it goes: no part left billed forever.
// Entries are copies (store, object, layout, handle), never the upload
// objects themselves, so aborting needs nothing that another thread may be
// destroying at that moment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "reshard/storage/part_layout.h"
#include "reshard/storage/store.h"

namespace reshard::storage {

// Records `upload` (started or joined by this process) as pending, until the
// returned id is passed to forget_pending_upload.
uint64_t remember_pending_upload(std::shared_ptr<Store> store, const ParallelUpload& upload);
void forget_pending_upload(uint64_t id);

// Aborts every pending upload (joining each from its handle), once; returns
// how many. Safe to call from any thread, at any time, more than once.
size_t abort_pending_uploads() noexcept;

// Starts a thread that, on SIGTERM, SIGINT or SIGHUP, aborts the pending
// uploads and then ends the process by the same signal. For programs (the
// command line); a library caller keeps its own signal handling. Idempotent.
void abort_pending_uploads_on_termination();

}  // namespace reshard::storage
