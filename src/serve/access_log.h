// One line per answered request, on stderr through the project's logging:
//   mosaic [info] access request_id=req-… method=POST path=/v1/completions status=200
//       prompt_tokens=5 completion_tokens=16 steps=8 finish_reason=length queue_s=0.0012 total_s=0.1834
// key=value pairs (logfmt), so the lines can be grepped and parsed. The generation figures appear
// for generation requests only. A value with spaces, quotes or control characters is quoted
// and escaped, so a client's path or id cannot forge a line.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "serve/request_context.h"

namespace mosaic::serve {

struct AccessRecord {
  std::string_view request_id, method, path, remote;
  int status = 0;
  const GenerationUsage* usage = nullptr;
  double total_s = 0;
};

std::string access_log_line(const AccessRecord& record);
// A logfmt value: bare when it is plain, else quoted with \" \\ and \xHH escapes; at most 256 bytes kept.
std::string logfmt_value(std::string_view value);

}  // namespace mosaic::serve
