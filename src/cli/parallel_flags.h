// --tensor-parallel N and --context-parallel N (EngineOptions::tensor_parallel, context_parallel;
// docs/design/tensor-parallel.md, context-parallel.md), the same flags in `generate`, `serve` and
// `forward`: registered once here.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

namespace mosaic::cli {

// A rank count from 1 to 64, 1 by default.
inline CLI::Option* add_rank_count_flag(CLI::App* c, const char* name, int64_t& ranks, const char* help) {
  return c->add_option(name, ranks, help)->check(CLI::Range(int64_t{1}, int64_t{64}))->default_str("1");
}

inline CLI::Option* add_tensor_parallel_flag(CLI::App* c, int64_t& ranks) {
  return add_rank_count_flag(c, "--tensor-parallel", ranks,
                             "Split the model over N ranks: attention heads, FFN columns and the vocabulary (on the CPU "
                             "the ranks are threads; --budget is then each rank's)");
}

inline CLI::Option* add_context_parallel_flag(CLI::App* c, int64_t& ranks) {
  return add_rank_count_flag(c, "--context-parallel", ranks,
                             "Split each step's rows over N ranks, every rank holding the model and gathering every "
                             "rank's keys and values (on the CPU the ranks are threads; --budget is then each rank's; "
                             "no KV cache)");
}

}  // namespace mosaic::cli
