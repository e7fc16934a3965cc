#include "cli/app.h"
#include "cli/job.h"

int main(int argc, char** argv) { return reshard::cli::finish_job(reshard::cli::run(argc, argv)); }
