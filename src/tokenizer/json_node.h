// A JSON value that knows where it sits: which file and which field. Every part of the tokenizer
// reads its piece of tokenizer.json through it, so a bad value is reported in one line as
//   <file>: field 'pre_tokenizer.pretokenizers[0].pattern': <what was expected>
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"

namespace mosaic::tokenizer {

class JsonNode {
 public:
  // `origin` names the file (or other source) in messages and must outlive the node.
  JsonNode(const nlohmann::json& value, const std::string& origin, std::string path = "");

  const nlohmann::json& json() const { return *value_; }
  const std::string& path() const { return path_; }
  const std::string& origin() const { return *origin_; }
  bool is_null() const { return value_->is_null(); }

  // A member; a missing member reads as null (HF treats absent and null alike).
  JsonNode operator[](std::string_view key) const;
  // An array element; fails unless this is an array with that many elements.
  JsonNode operator[](size_t index) const;
  // Number of elements; fails unless this is an array.
  size_t array_size() const;

  // Typed reads that fail with the field's name when the type is wrong.
  std::string_view as_string() const;
  bool as_bool() const;
  int64_t as_int() const;
  void expect_object() const;

  // A boolean member that may be absent or null.
  bool bool_or(std::string_view key, bool fallback) const;

  template <typename... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    mosaic::fail("{}: field '{}': {}", *origin_, path_.empty() ? "(root)" : path_,
                 fmt::format(format, std::forward<Args>(args)...));
  }

 private:
  const nlohmann::json* value_;
  const std::string* origin_;
  std::string path_;
};

}  // namespace mosaic::tokenizer
