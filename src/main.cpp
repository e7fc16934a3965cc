#include "cli/app.h"
#include "job/job.h"

int main(int argc, char** argv) { return reshard::job::finish_job(reshard::cli::run(argc, argv)); }
