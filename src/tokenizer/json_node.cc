#include "tokenizer/json_node.h"

namespace mosaic::tokenizer {
namespace {

const nlohmann::json& null_json() {
  static const nlohmann::json null_value;
  return null_value;
}

const char* type_name(const nlohmann::json& value) { return value.type_name(); }

}  // namespace

JsonNode::JsonNode(const nlohmann::json& value, const std::string& origin, std::string path)
    : value_(&value), origin_(&origin), path_(std::move(path)) {}

JsonNode JsonNode::operator[](std::string_view key) const {
  std::string child_path = path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  if (!value_->is_object()) return JsonNode(null_json(), *origin_, std::move(child_path));
  const auto it = value_->find(key);
  if (it == value_->end()) return JsonNode(null_json(), *origin_, std::move(child_path));
  return JsonNode(*it, *origin_, std::move(child_path));
}

JsonNode JsonNode::operator[](size_t index) const {
  if (!value_->is_array()) fail("expected an array, found {}", type_name(*value_));
  if (index >= value_->size())
    fail("array has {} elements, index {} is missing", value_->size(), index);
  return JsonNode((*value_)[index], *origin_, fmt::format("{}[{}]", path_, index));
}

size_t JsonNode::array_size() const {
  if (!value_->is_array()) fail("expected an array, found {}", type_name(*value_));
  return value_->size();
}

std::string_view JsonNode::as_string() const {
  if (!value_->is_string()) fail("expected a string, found {}", type_name(*value_));
  return value_->get_ref<const std::string&>();
}

bool JsonNode::as_bool() const {
  if (!value_->is_boolean()) fail("expected true or false, found {}", type_name(*value_));
  return value_->get<bool>();
}

int64_t JsonNode::as_int() const {
  if (!value_->is_number_integer()) fail("expected an integer, found {}", type_name(*value_));
  return value_->get<int64_t>();
}

void JsonNode::expect_object() const {
  if (!value_->is_object()) fail("expected an object, found {}", type_name(*value_));
}

bool JsonNode::bool_or(std::string_view key, bool fallback) const {
  const JsonNode member = (*this)[key];
  return member.is_null() ? fallback : member.as_bool();
}

}  // namespace mosaic::tokenizer
