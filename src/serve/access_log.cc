#include "serve/access_log.h"

#include <fmt/format.h>

namespace mosaic::serve {
namespace {

constexpr size_t kMaxValue = 256;

}  // namespace

std::string logfmt_value(std::string_view value) {
  const bool cut = value.size() > kMaxValue;
  value = value.substr(0, kMaxValue);
  bool plain = !value.empty();
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f || c == '"' || c == '=' || c == '\\') plain = false;
  }
  if (plain && !cut) return std::string(value);
  std::string out = "\"";
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') out += {'\\', c};
    else if (byte < 0x20 || byte >= 0x7f) out += fmt::format("\\x{:02x}", byte);
    else out += c;
  }
  if (cut) out += "...";
  return out + "\"";
}

std::string access_log_line(const AccessRecord& record) {
  std::string line = fmt::format("access request_id={} method={} path={} status={}", logfmt_value(record.request_id),
                                 logfmt_value(record.method), logfmt_value(record.path), record.status);
  if (!record.remote.empty()) line += fmt::format(" remote={}", logfmt_value(record.remote));
  if (record.usage) {
    const GenerationUsage& u = *record.usage;
    line += fmt::format(" prompt_tokens={} completion_tokens={} steps={}", u.prompt_tokens, u.completion_tokens, u.steps);
    if (!u.finish_reason.empty()) line += fmt::format(" finish_reason={}", logfmt_value(u.finish_reason));
    line += fmt::format(" queue_s={:.4f}", u.queue_s);
  }
  line += fmt::format(" total_s={:.4f}", record.total_s);
  return line;
}

}  // namespace mosaic::serve
