// Stop sequences (OpenAI's `stop`) on committed text: the answer ends before the first place any
// of them occurs. A diffusion step commits positions anywhere in the generated span, so only the
// committed contiguous prefix is text that can no longer change: a stop string found there ends
// the request at once (StopWatcher, checked by the scheduler after each step), and a stream holds
// back the prefix's tail that may still grow into a stop string (held_back).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "serve/text_stream.h"

namespace mosaic::serve {

// Where the earliest occurrence of any of `stops` begins in `text`, if one does.
std::optional<size_t> find_stop(std::string_view text, std::span<const std::string> stops);

// The length of the longest tail of `text` that is the beginning (not all) of a stop string: text
// a stream must not send yet, since the next committed tokens may complete the stop string.
size_t held_back(std::string_view text, std::span<const std::string> stops);

// Watches a request's committed prefix step by step (the ids of its generated region) and says
// once a stop string is in it.
class StopWatcher {
 public:
  StopWatcher(std::vector<std::string> stops, CommittedTextStream prefix);
  bool stopped(std::span<const int32_t> output_ids);

 private:
  std::vector<std::string> stops_;
  CommittedTextStream prefix_;
};

}  // namespace mosaic::serve
