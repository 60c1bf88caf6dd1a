// One run of query rows and the run of key/value rows they attend to. Packed batches, query
// chunks and candidate-only rows are all lists of these; graph and kernels share the type.
#pragma once

#include <cstdint>

namespace mosaic {

struct AttentionSegment {
  int64_t q_begin = 0, q_count = 0;    // rows of q / out
  int64_t kv_begin = 0, kv_count = 0;  // rows of k / v
};

}  // namespace mosaic
