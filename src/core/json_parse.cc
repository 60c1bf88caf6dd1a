#include "core/json_parse.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/printable.h"

namespace mosaic {
namespace {

using nlohmann::json;

// The start of every message: "<source>:" for a whole file, "<source>: <what> is" for a part.
std::string subject(std::string_view source, std::string_view what) {
  return what.empty() ? fmt::format("{}:", source) : fmt::format("{}: {} is", source, what);
}

// Builds the DOM from nlohmann's SAX events (the json_sax interface), with the checks of
// json_parse.h. Every value lands in its parent directly: an array element by emplace_back, an
// object member in the slot its key made.
class BoundedDomBuilder {
 public:
  BoundedDomBuilder(json& root, std::string_view source, const JsonParseOptions& options)
      : root_(root), source_(source), options_(options) {}

  bool null() { return add(nullptr); }
  bool boolean(bool value) { return add(value); }
  bool number_integer(json::number_integer_t value) { return add(value); }
  bool number_unsigned(json::number_unsigned_t value) { return add(value); }
  bool number_float(json::number_float_t value, const json::string_t&) { return add(value); }
  bool string(json::string_t& value) { return add(std::move(value)); }
  bool binary(json::binary_t& value) { return add(json::binary(std::move(value))); }

  bool start_object(std::size_t) { return open(json::value_t::object); }
  bool start_array(std::size_t) { return open(json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& name) {
    json::object_t& object = open_.back()->get_ref<json::object_t&>();
    if (options_.refuse_duplicate_keys && object.contains(name))
      fail("{}: {}key {} appears twice in one object", source_,
           options_.what.empty() ? "" : fmt::format("{}: ", options_.what), printable(json(name).dump()));
    member_ = &object[name];
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) {
    fail("{} not valid JSON: {}", subject(source_, options_.what), printable(error.what()));
  }

 private:
  template <typename Value>
  bool add(Value&& value) {
    place(json(std::forward<Value>(value)));
    return true;
  }

  json* place(json&& value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      auto& elements = parent.get_ref<json::array_t&>();
      elements.push_back(std::move(value));
      return &elements.back();
    }
    *member_ = std::move(value);
    return member_;
  }

  bool open(json::value_t type) {
    // open_ holds the containers around this one; checked before the new one exists.
    if (static_cast<int>(open_.size()) >= options_.max_depth)
      fail("{} nested deeper than {} levels, the limit for JSON that Mosaic reads",
           subject(source_, options_.what), options_.max_depth);
    open_.push_back(place(json(type)));
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  json& root_;
  std::string_view source_;
  const JsonParseOptions& options_;
  std::vector<json*> open_;   // the containers being filled, outermost first
  json* member_ = nullptr;    // the slot the last key made in the innermost object
};

}  // namespace

json parse_json(std::string_view text, std::string_view source, const JsonParseOptions& options) {
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    fail("{} not valid JSON: a NUL byte at offset {} (JSON text cannot hold one)", subject(source, options.what),
         nul);
  json root;
  BoundedDomBuilder builder(root, source, options);
  json::sax_parse(text, &builder);
  return root;
}

}  // namespace mosaic
