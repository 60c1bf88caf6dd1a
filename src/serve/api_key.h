// `mosaic serve --api-key KEY` (or MOSAIC_API_KEY): requests carry `Authorization: Bearer KEY`,
// as OpenAI clients send it. The comparison takes the same time wherever the first wrong byte is,
// so the key cannot be guessed byte by byte from response times.
#pragma once

#include <string_view>

namespace mosaic::serve {

// Equal contents; the time taken depends on expected.size() only.
bool constant_time_equals(std::string_view given, std::string_view expected);

enum class KeyCheck { accepted, missing, wrong };

// `authorization` is the Authorization header's value (empty: no header). The scheme "Bearer" is
// matched without regard to case, as HTTP auth schemes are.
KeyCheck check_bearer_key(std::string_view authorization, std::string_view key);

}  // namespace mosaic::serve
