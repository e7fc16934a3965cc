// `reshard demo`: the whole story on a small built-in model, checked bit for
// bit: a Llama with LoRA adapters sharded over 16 devices in a TPU slice's
// order, saved, restored on another cluster shape, exported to Hugging Face
// and PEFT files, merged, and imported back.
#pragma once

#include "demo/demo_steps.h"

namespace reshard::demo {

// The whole demo, run by every process of the job (src/job/job.h): under a
// launcher its ranks (a count dividing the 16 devices), alone 4 threads of
// this process. Rank 0 prints. Error(kInvalidArgument) "check failed: ..."
// when a result differs from the reference.
void run_demo(const DemoOptions& options);

}  // namespace reshard::demo
