// --tensor-parallel N and --context-parallel N (EngineOptions::tensor_parallel, context_parallel;
// docs/design/tensor-parallel.md, context-parallel.md), the same flags in `generate`, `serve` and
// `forward`: registered once here.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

namespace mosaic::cli {

inline CLI::Option* add_tensor_parallel_flag(CLI::App* c, int64_t& ranks) {
  return c
      ->add_option("--tensor-parallel", ranks,
                   "Split the model over N ranks: attention heads, FFN columns and the vocabulary (on the CPU the "
                   "ranks are threads; --budget is then each rank's)")
      ->check(CLI::Range(int64_t{1}, int64_t{64}))
      ->default_str("1");
}

inline CLI::Option* add_context_parallel_flag(CLI::App* c, int64_t& ranks) {
  return c
      ->add_option("--context-parallel", ranks,
                   "Split each step's rows over N ranks, every rank holding the model and gathering every rank's "
                   "keys and values (on the CPU the ranks are threads; --budget is then each rank's; no KV cache)")
      ->check(CLI::Range(int64_t{1}, int64_t{64}))
      ->default_str("1");
}

}  // namespace mosaic::cli
