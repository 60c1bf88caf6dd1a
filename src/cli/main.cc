// mosaic: the command-line entry point. Subcommands live in cmd_*.cc.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "mosaic/error.h"

namespace {

constexpr const char* kVersion = "0.1.0";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Mosaic: memory-planned inference for masked diffusion language models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", kVersion);
  std::map<CLI::App*, mosaic::cli::Action> actions;
  auto add = [&](mosaic::cli::Action action) {
    actions.emplace(app.get_subcommands({}).back(), std::move(action));
  };
  add(mosaic::cli::register_bench(app));
  add(mosaic::cli::register_forward(app));
  add(mosaic::cli::register_generate(app));
  add(mosaic::cli::register_info(app));
  add(mosaic::cli::register_make_test_model(app));
  add(mosaic::cli::register_plan(app));
  add(mosaic::cli::register_serve(app));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : 2;  // usage errors: exit status 2, as getopt-style tools do
  }
  try {
    for (CLI::App* command : app.get_subcommands()) return actions.at(command)();
  } catch (const mosaic::Error& error) {
    std::fprintf(stderr, "mosaic: error: %s\n", error.what());
    return 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "mosaic: internal error: %s\n", error.what());
    return 3;
  }
  return 0;
}
