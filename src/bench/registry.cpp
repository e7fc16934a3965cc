#include "bench/benchmarks.h"

#include "job/job.h"

namespace reshard::bench {

using job::job_world;

BenchReport run_reshard_benchmark();  // src/bench/reshard.cpp
BenchReport run_io_benchmark();       // src/bench/io.cpp
BenchReport run_plan_benchmark();     // src/bench/plan.cpp
BenchReport run_checkpoint_benchmark();  // src/bench/checkpoint.cpp
BenchReport run_export_benchmark();      // src/bench/export.cpp
BenchReport run_storage_benchmark();     // src/bench/storage.cpp
#if RESHARD_WITH_MPI
BenchReport run_reshard_mpi_benchmark();  // src/bench/mpi/reshard_mpi.cpp
#endif

std::vector<BenchmarkEntry> all_benchmarks() {
  std::vector<BenchmarkEntry> entries;
  entries.push_back({"reshard", "a 1 GiB reshard between two layouts beside memcpy, 2 threads", run_reshard_benchmark});
  entries.push_back({"io", "safetensors: write 2 GiB, open 10,000 tensors, read every tensor, beside plain system calls",
                     run_io_benchmark});
  entries.push_back({"plan", "plan time: 1 tensor over 4096 devices, a 1000-tensor model over 256, beside all-pairs",
                     run_plan_benchmark});
  entries.push_back({"checkpoint",
                     "save 2 GiB from every process beside plain write(), async save blocking time, restore onto "
                     "another layout beside the saved one",
                     run_checkpoint_benchmark});
  entries.push_back({"export", "merge-lora: 256 MiB merged at rank 8, in memory and as files, beside memcpy",
                     run_export_benchmark});
  entries.push_back({"storage",
                     "export 1 GiB in 300 tensors to a local S3 server from 4 processes beside boto3's multipart "
                     "upload, the Levanter way (gather, process 0 uploads) and a local export "
                     "(python/bench/bench_storage.py, with the project's .venv)",
                     run_storage_benchmark});
#if RESHARD_WITH_MPI
  // Under mpirun with several ranks, `reshard` measures a reshard across them.
  for (BenchmarkEntry& entry : entries) {
    if (entry.name == "reshard" && job_world().size > 1) {
      entry = {"reshard", "a 1 GiB reshard across the job's processes beside MPI_Alltoallv", run_reshard_mpi_benchmark};
    }
  }
#endif
  return entries;
}

}  // namespace reshard::bench
