// Tokenizer speed on English text, one thread. The target is >= 5 MB/s of encoding
// (docs/design/tokenizer.md records the measured numbers).
//
//   tests/tokenizer/fetch_tokenizers.sh
//   MOSAIC_TOKENIZER_DIR=.cache/tokenizers build/bench/tokenizer_bench
//
// Text: the files in /usr/share/common-licenses (about 250 kB of English prose, on every Debian
// and Ubuntu machine), or the file named by MOSAIC_BENCH_TEXT.
//   BM_Encode      steady state: the pre-token cache has seen the text before
//   BM_EncodeCold  a freshly loaded tokenizer each iteration (loading is not timed)
//   BM_Decode      ids of the whole text back to text
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

const std::string& english_text() {
  static const std::string text = [] {
    if (const char* path = std::getenv("MOSAIC_BENCH_TEXT"); path && *path) return read_file(path);
    std::vector<fs::path> files;
    const fs::path licenses = "/usr/share/common-licenses";
    if (fs::is_directory(licenses)) {
      for (const auto& entry : fs::directory_iterator(licenses)) {
        if (entry.is_regular_file() && !entry.is_symlink()) files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end());
    std::string all;
    for (const fs::path& file : files) all += read_file(file);
    return all;
  }();
  return text;
}

fs::path tokenizer_path(const std::string& name) {
  const char* dir = std::getenv("MOSAIC_TOKENIZER_DIR");
  return fs::path(dir && *dir ? dir : ".cache/tokenizers") / name / "tokenizer.json";
}

// One loaded tokenizer per file, shared by the benchmarks that may reuse it.
const mosaic::Tokenizer* shared_tokenizer(const std::string& name) {
  static std::map<std::string, mosaic::Tokenizer> loaded;
  if (!loaded.contains(name)) {
    if (!fs::exists(tokenizer_path(name))) return nullptr;
    loaded.emplace(name, mosaic::Tokenizer::load(tokenizer_path(name)));
  }
  return &loaded.at(name);
}

bool check_inputs(benchmark::State& state, const std::string& name) {
  if (!fs::exists(tokenizer_path(name))) {
    state.SkipWithError(("missing " + tokenizer_path(name).string() +
                         ": run tests/tokenizer/fetch_tokenizers.sh, set MOSAIC_TOKENIZER_DIR")
                            .c_str());
    return false;
  }
  if (english_text().empty()) {
    state.SkipWithError("no text: set MOSAIC_BENCH_TEXT to an English text file");
    return false;
  }
  return true;
}

void BM_Encode(benchmark::State& state, const std::string& name) {
  if (!check_inputs(state, name)) return;
  const mosaic::Tokenizer& tokenizer = *shared_tokenizer(name);
  const std::string& text = english_text();
  size_t token_count = tokenizer.encode(text).size();  // warm the pre-token cache
  for (auto _ : state) {
    std::vector<int32_t> ids = tokenizer.encode(text);
    benchmark::DoNotOptimize(ids.data());
    token_count = ids.size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(token_count);
  state.counters["bytes_per_token"] = static_cast<double>(text.size()) / token_count;
}

void BM_EncodeCold(benchmark::State& state, const std::string& name) {
  if (!check_inputs(state, name)) return;
  const std::string& text = english_text();
  std::optional<mosaic::Tokenizer> tokenizer;
  for (auto _ : state) {
    state.PauseTiming();
    tokenizer.reset();  // destroying the last one is not timed either
    tokenizer.emplace(mosaic::Tokenizer::load(tokenizer_path(name)));
    state.ResumeTiming();
    std::vector<int32_t> ids = tokenizer->encode(text);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

void BM_Decode(benchmark::State& state, const std::string& name) {
  if (!check_inputs(state, name)) return;
  const mosaic::Tokenizer& tokenizer = *shared_tokenizer(name);
  const std::string& text = english_text();
  const std::vector<int32_t> ids = tokenizer.encode(text);
  for (auto _ : state) {
    std::string decoded = tokenizer.decode(ids);
    benchmark::DoNotOptimize(decoded.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

void BM_Load(benchmark::State& state, const std::string& name) {
  if (!check_inputs(state, name)) return;
  for (auto _ : state) {
    const mosaic::Tokenizer tokenizer = mosaic::Tokenizer::load(tokenizer_path(name));
    benchmark::DoNotOptimize(&tokenizer);
  }
}

}  // namespace

BENCHMARK_CAPTURE(BM_Encode, qwen3, std::string("qwen3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, llama3, std::string("llama3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncodeCold, qwen3, std::string("qwen3"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_EncodeCold, llama3, std::string("llama3"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_Decode, qwen3, std::string("qwen3"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Load, qwen3, std::string("qwen3"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);
BENCHMARK_CAPTURE(BM_Load, llama3, std::string("llama3"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

BENCHMARK_MAIN();
