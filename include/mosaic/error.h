// The exception every Mosaic API throws for bad input: one line naming the file, field or value
// that is wrong and what was expected.
#pragma once

#include <stdexcept>
#include <string>

namespace mosaic {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace mosaic
