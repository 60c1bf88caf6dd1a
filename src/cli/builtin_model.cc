#include "cli/builtin_model.h"

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"

namespace mosaic::cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kName = "kjv-llada-12m";

fs::path executable_dir() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  return error ? fs::path() : self.parent_path();
}

}  // namespace

fs::path builtin_model_dir() {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("MOSAIC_DEFAULT_MODEL"); env != nullptr && *env != '\0') {
    std::error_code error;
    if (!fs::is_regular_file(fs::path(env) / "config.json", error))
      fail("MOSAIC_DEFAULT_MODEL={}: no config.json there (expected a Hugging Face model folder)", env);
    return fs::path(env);
  }
#ifdef MOSAIC_SOURCE_MODELS_DIR
  candidates.push_back(fs::path(MOSAIC_SOURCE_MODELS_DIR) / kName);
#endif
  if (const fs::path dir = executable_dir(); !dir.empty())
    candidates.push_back(dir / ".." / "share" / "mosaic" / "models" / kName);
  std::string looked;
  for (const fs::path& candidate : candidates) {
    std::error_code error;
    if (fs::is_regular_file(candidate / "config.json", error)) return candidate.lexically_normal();
    looked += (looked.empty() ? "" : ", ") + candidate.lexically_normal().string();
  }
  fail("no --model given and the built-in model is not there (looked in: {}); pass --model DIR or set "
       "MOSAIC_DEFAULT_MODEL",
       looked);
}

}  // namespace mosaic::cli
