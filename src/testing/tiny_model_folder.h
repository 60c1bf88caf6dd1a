// A small random LLaDA checkpoint in a temporary folder, for tests of the public API that need
// a real model folder: 1 layer, hidden 64, 2 heads, FFN 96, a vocabulary of 300. Header-only, so
// any test target can include it (src/ is on every module's include path).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "mosaic/test_model.h"

namespace mosaic::testing_support {

// Writes the checkpoint to <temp>/<name>_<pid> (random weights from `seed`) and returns the folder;
// the caller removes it.
inline std::filesystem::path write_tiny_llada(const std::string& name, uint64_t seed) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  TestModelRequest request;
  request.family = "llada";
  request.layers = 1, request.hidden = 64, request.heads = 2, request.ffn = 96, request.vocab = 300;
  request.seed = seed;
  request.out = dir;
  make_test_model(request);
  return dir;
}

}  // namespace mosaic::testing_support
