// The one way Mosaic parses JSON from a file a user gave it (config.json, safetensors headers,
// the shard index, tokenizer.json): nlohmann-json's SAX parser feeding a DOM builder that
//   1. refuses nesting deeper than a limit, counted as containers are opened, before the value
//      exists (nlohmann's parser is iterative, but dump(), copy and == on the result recurse:
//      100,000 nested brackets overflowed the stack);
//   2. refuses a NUL byte (nlohmann's lexer reads one as the end of the input, so "{}\0junk"
//      was accepted as "{}");
//   3. optionally refuses a key that appears twice in one object (otherwise the last one wins,
//      as with Python's json);
// and turns every parse failure into a mosaic::Error naming the source.
// Unlike nlohmann's parser callback, building the DOM is linear in the number of values (the
// callback parser rescans each object for discarded members as a nested object closes).
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace mosaic {

// Deeper than any file Mosaic reads (a tokenizer.json nests about 5 levels), shallow enough that
// recursion over the parsed value is harmless.
inline constexpr int kJsonMaxDepth = 64;

struct JsonParseOptions {
  // What the text is, inside `source`, for messages: "" for a whole file, else e.g.
  // "safetensors header" ("<source>: safetensors header is not valid JSON: ...").
  std::string_view what;
  int max_depth = kJsonMaxDepth;
  bool refuse_duplicate_keys = false;
};

// Parses `text`; throws mosaic::Error "<source>: ..." for invalid JSON, too deep a nesting, a NUL
// byte, or (when asked) a duplicate key.
nlohmann::json parse_json(std::string_view text, std::string_view source,
                          const JsonParseOptions& options = {});

}  // namespace mosaic
