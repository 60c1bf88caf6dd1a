// Each `mosaic <command>` registers its options on the shared CLI11 app and returns the action
// to run when that subcommand was chosen.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace mosaic::cli {

using Action = std::function<int()>;

Action register_bench(CLI::App& app);
Action register_forward(CLI::App& app);
Action register_generate(CLI::App& app);
Action register_make_test_model(CLI::App& app);
Action register_info(CLI::App& app);
Action register_plan(CLI::App& app);
Action register_serve(CLI::App& app);

}  // namespace mosaic::cli
