// `mosaic bench generate`: whole generations timed end to end, for each KV cache mode, on random
// prompts of the lengths given (docs/PERFORMANCE.md, cached decoding).
#pragma once

#include "cli/commands.h"

namespace mosaic::cli {

// Registers the subcommand on `bench`; the action runs it.
Action register_bench_generate(CLI::App& bench);

}  // namespace mosaic::cli
