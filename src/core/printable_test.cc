#include "core/printable.h"

#include <gtest/gtest.h>

namespace mosaic {
namespace {

TEST(Printable, KeepsWellFormedUtf8) {
  EXPECT_EQ(printable(std::string_view("models/caf\xC3\xA9 \xE4\xBD\xA0 \xF0\x9F\x8D\x95")),
            "models/caf\xC3\xA9 \xE4\xBD\xA0 \xF0\x9F\x8D\x95");
}

TEST(Printable, EscapesIllFormedBytesAndControlCharacters) {
  EXPECT_EQ(printable(std::string_view("T\xff/config.json")), "T\\xFF/config.json");
  EXPECT_EQ(printable(std::string_view("a\nb\tc\x7f")), "a\\x0Ab\\x09c\\x7F");
  EXPECT_EQ(printable(std::string_view("\xE4\xBD")), "\\xE4\\xBD");    // truncated sequence
  EXPECT_EQ(printable(std::string_view("\xC0\xAF")), "\\xC0\\xAF");    // overlong '/'
  EXPECT_EQ(printable(std::string_view("\xED\xA0\x80")), "\\xED\\xA0\\x80");  // surrogate
  EXPECT_EQ(printable(std::string_view("\0x", 2)), "\\x00x");
}

TEST(Printable, PathsUseTheirNativeBytes) {
  EXPECT_EQ(printable_path(std::filesystem::path("dir\xff/model.safetensors")), "dir\\xFF/model.safetensors");
}

}  // namespace
}  // namespace mosaic
