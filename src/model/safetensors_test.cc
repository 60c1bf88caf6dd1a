#include "model/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "core/error.h"

namespace mosaic {
namespace {

using ::testing::HasSubstr;

std::vector<std::byte> file_with_header(const std::string& header_json, size_t data_bytes,
                                        uint64_t declared_length = UINT64_MAX) {
  const uint64_t length = declared_length == UINT64_MAX ? header_json.size() : declared_length;
  std::vector<std::byte> file(8 + header_json.size() + data_bytes, std::byte{0});
  for (int i = 0; i < 8; ++i) file[i] = static_cast<std::byte>((length >> (8 * i)) & 0xff);
  std::memcpy(file.data() + 8, header_json.data(), header_json.size());
  return file;
}

std::string error_of(const std::vector<std::byte>& file) {
  try {
    parse_safetensors(file, "w.safetensors");
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(Safetensors, ParsesAWellFormedFile) {
  const auto file = file_with_header(
      R"({"__metadata__": {"format": "pt"},
          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
          "a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
          "empty": {"dtype": "F16", "shape": [0, 3], "data_offsets": [12, 12]}})",
      12);
  const SafetensorsHeader header = parse_safetensors(file, "w.safetensors");
  ASSERT_EQ(header.tensors.size(), 3u);
  EXPECT_EQ(header.metadata.at("format"), "pt");
  EXPECT_EQ(header.tensors[0].name, "a");  // data order
  EXPECT_EQ(header.tensors[0].dtype, DType::bf16);
  EXPECT_EQ(header.tensors[0].offset, header.data_offset);
  EXPECT_EQ(header.tensors[1].name, "b");
  EXPECT_EQ(header.tensors[1].offset, header.data_offset + 4);
  EXPECT_EQ(header.tensors[1].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(header.tensors[2].elements(), 0);
}

TEST(Safetensors, LayoutRoundTrips) {
  const std::vector<SafetensorsTensorSpec> specs = {
      {"x", DType::bf16, {3, 5}}, {"y", DType::f32, {7}}, {"z", DType::f16, {1, 1, 1}}};
  const SafetensorsLayout layout = layout_safetensors(specs, {{"format", "pt"}});
  EXPECT_EQ(layout.header.size() % 8, 0u);
  std::vector<std::byte> file(layout.file_bytes);
  std::memcpy(file.data(), layout.header.data(), layout.header.size());
  const SafetensorsHeader header = parse_safetensors(file, "w.safetensors");
  ASSERT_EQ(header.tensors.size(), 3u);
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(header.tensors[i].name, specs[i].name);
    EXPECT_EQ(header.tensors[i].shape, specs[i].shape);
    EXPECT_EQ(header.tensors[i].offset, layout.offsets[i]);
  }
}

TEST(Safetensors, TooShort) {
  EXPECT_THAT(error_of(std::vector<std::byte>(5)),
              HasSubstr("w.safetensors: file is 5 bytes, too short"));
}

TEST(Safetensors, HeaderLengthBeyondFile) {
  EXPECT_THAT(error_of(file_with_header("{}", 0, 1000)),
              HasSubstr("header length 1000 extends beyond the end of the file"));
  EXPECT_THAT(error_of(file_with_header("{}", 0, UINT64_MAX - 1)), HasSubstr("extends beyond"));
}

TEST(Safetensors, HeaderNotJson) {
  EXPECT_THAT(error_of(file_with_header("{\"a\": [1, 2", 0)), HasSubstr("header is not valid JSON"));
  EXPECT_THAT(error_of(file_with_header("[1, 2]", 0)), HasSubstr("header is not a JSON object"));
}

TEST(Safetensors, DuplicateNames) {
  EXPECT_THAT(error_of(file_with_header(
                  R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                      "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                  8)),
              HasSubstr("w.safetensors: safetensors header: key \"a\" appears twice in one object"));
}

TEST(Safetensors, UnknownDtype) {
  EXPECT_THAT(error_of(file_with_header(R"({"w": {"dtype": "F12", "shape": [1], "data_offsets": [0, 2]}})", 2)),
              HasSubstr("tensor 'w': unknown dtype 'F12'"));
}

TEST(Safetensors, DataOutsideFile) {
  EXPECT_THAT(error_of(file_with_header(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8)),
              HasSubstr("tensor 'w': data [0, 16) lies outside the file's data section of 8 bytes"));
}

TEST(Safetensors, SizeDisagreesWithShape) {
  EXPECT_THAT(error_of(file_with_header(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8)),
              HasSubstr("data_offsets span 8 bytes but shape [3] of F32 needs 12"));
}

TEST(Safetensors, Overlap) {
  EXPECT_THAT(error_of(file_with_header(
                  R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                  12)),
              HasSubstr("tensors 'a' and 'b' overlap"));
}

TEST(Safetensors, MalformedEntries) {
  EXPECT_THAT(error_of(file_with_header(R"({"w": {"dtype": "F32", "shape": [1]}})", 4)),
              HasSubstr("tensor 'w': missing 'data_offsets'"));
  EXPECT_THAT(error_of(file_with_header(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4)),
              HasSubstr("'shape' must hold non-negative integers"));
  EXPECT_THAT(error_of(file_with_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4)),
              HasSubstr("end before begin"));
  EXPECT_THAT(error_of(file_with_header(
                  R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 4]}})", 4)),
              HasSubstr("is too large"));
  EXPECT_THAT(error_of(file_with_header(R"({"__metadata__": {"n": 1}})", 0)),
              HasSubstr("'__metadata__' entry 'n' must be a string"));
  EXPECT_THAT(error_of(file_with_header(R"({"w": 3})", 0)), HasSubstr("entry must be an object"));
}

TEST(Safetensors, TrailingBytesAreRefused) {
  EXPECT_EQ(error_of(file_with_header(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 12)),
            "w.safetensors: 8 bytes after the last tensor's data: the data section is 12 bytes but its tensors "
            "end at byte 4 (a damaged or appended file?)");
  EXPECT_THAT(error_of(file_with_header("{}", 3)), HasSubstr("3 bytes after the last tensor's data"));
}

TEST(Safetensors, GapsAreRefused) {
  EXPECT_THAT(error_of(file_with_header(
                  R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                      "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                  12)),
              HasSubstr("tensor 'b' begins at byte 8 of the data section but 'a' ends at byte 4"));
  EXPECT_THAT(error_of(file_with_header(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8)),
              HasSubstr("the first tensor 'a' begins at byte 4 of the data section, not at 0"));
  // A zero-size tensor inside another one's bytes: the reference loader refuses it too.
  EXPECT_THAT(error_of(file_with_header(
                  R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "z": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
                  8)),
              HasSubstr("tensor 'z' begins at byte 4 of the data section but 'a' ends at byte 8"));
}

TEST(Safetensors, OnlySpacesMayFollowTheHeaderJson) {
  const std::string json = R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
  EXPECT_EQ(parse_safetensors(file_with_header(json + "      ", 4), "w.safetensors").tensors.size(), 1u);
  EXPECT_THAT(error_of(file_with_header(json + std::string("\0garbage", 8), 4)),
              HasSubstr("w.safetensors: safetensors header is not valid JSON: a NUL byte at offset"));
  EXPECT_THAT(error_of(file_with_header(json + "xx", 4)), HasSubstr("safetensors header is not valid JSON"));
}

TEST(Safetensors, DeepNestingIsRefused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THAT(error_of(file_with_header(R"({"w": {"dtype": "F32", "shape": )" + deep + R"(, "data_offsets": [0, 0]}})", 0)),
              HasSubstr("w.safetensors: safetensors header is nested deeper than 64 levels"));
}

TEST(Safetensors, AHundredThousandTensorsParseInLinearTime) {
  // 512 s before: nlohmann's parser callback rescans the header object as each entry closes.
  std::string json = "{";
  for (int i = 0; i < 100000; ++i)
    json += fmt::format("{}\"t{}\": {{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [{}, {}]}}",
                        i ? ", " : "", i, 4 * i, 4 * i + 4);
  json += "}";
  const auto start = std::chrono::steady_clock::now();
  const SafetensorsHeader header = parse_safetensors(file_with_header(json, 400000), "w.safetensors");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  ASSERT_EQ(header.tensors.size(), 100000u);
  EXPECT_EQ(header.tensors[99999].offset, header.data_offset + 4 * 99999);
}

}  // namespace
}  // namespace mosaic
