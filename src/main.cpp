#include "reshard/cli/app.h"

int main(int argc, char** argv) { return reshard::cli::run(argc, argv); }
