// The log line of one tuned GEMM shape (gemm_tuning.h). Host C++ apart from the .cu files: fmt
// is not for nvcc's front end.
#include <string>

#include "backend/cuda/gemm_tuning.h"
#include "core/log.h"

namespace mosaic::cuda {

void log_tuning(const GemmTuningRecord& record) {
  if (log_level() < LogLevel::info) return;
  const std::string shape = fmt::format("m={} n={} k={} {}{}{}", record.m, record.n, record.k,
                                        record.c_dtype == DType::f32 ? "f32" : "bf16",
                                        record.bias ? " bias" : "", record.accumulate ? " +C" : "");
  if (!record.timed) {
    log(LogLevel::info, "gemm tuning: {}: the reference kept untimed (one call {:.3f} ms)", shape,
        record.reference_call_ms);
    return;
  }
  std::string times;
  for (size_t i = 0; i < record.ms.size(); ++i) {
    times += i == record.chosen ? " [" : " ";
    times += !record.ran[i]         ? std::string("-")
             : !record.same_bits[i] ? std::string("differs")
                                    : fmt::format("{:.3f}", record.ms[i]);
    if (i == record.chosen) times += "]";
  }
  const std::string outcome =
      record.chosen == 0 ? std::string("the heuristic's first kept")
                         : fmt::format("{:.1f} % faster than the heuristic's first",
                                       100.0 * (1.0 - record.ms[record.chosen] / record.ms[0]));
  log(LogLevel::info, "gemm tuning: {}: ms per candidate{} ({}; tuning took {:.0f} ms)", shape,
      times, outcome, record.tuning_ms);
}

}  // namespace mosaic::cuda
