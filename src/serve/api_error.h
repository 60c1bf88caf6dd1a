// An error answered to an HTTP client as an OpenAI-style error object:
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature", "code": null}}
// Thrown by request parsing and admission; the HTTP layer turns it into the response.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace mosaic::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, std::string message, std::string param = {}, std::string code = {})
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}

  int status;          // HTTP status: 400, 429, 500, 503
  std::string type;    // "invalid_request_error", "rate_limit_error", "server_error"
  std::string param;   // the request field at fault; empty: none
  std::string code;    // a machine-readable reason ("model_not_found", "queue_full", ...); may be empty
};

// A 400 naming the field at fault.
template <typename... Args>
[[noreturn]] void bad_request(const std::string& param, fmt::format_string<Args...> format, Args&&... args) {
  throw ApiError(400, "invalid_request_error", fmt::format(format, std::forward<Args>(args)...), param);
}

}  // namespace mosaic::serve
