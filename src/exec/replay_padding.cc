#include "exec/replay_padding.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string_view>
#include <type_traits>

#include "core/error.h"

namespace mosaic {
namespace {

// The canvas positions [first, last) whose prediction reads a hidden row the step computes.
// LLaDA's position p reads row p: [begin, end). Dream's p >= 1 reads row p - 1: [begin + 1, end + 1)
// within the canvas; position 0 reads row 0 as well, so it is left out, and a step predicts at most
// one position per row (a real candidate at 0 leaves the step unpadded).
struct PositionRange {
  int64_t first = 0, last = 0;
  int64_t size() const { return last - first; }
  bool holds(int64_t p) const { return p >= first && p < last; }
};

PositionRange predictable_positions(const ModelConfig& config, const SequenceRows& sequence) {
  const int64_t length = static_cast<int64_t>(sequence.ids.size());
  const int64_t begin = sequence.cached() ? sequence.begin : 0;
  const int64_t end = sequence.cached() ? sequence.end : length;
  const int64_t shift = config.shifted_logits() ? 1 : 0;
  return {begin + shift, std::min(end + shift, length)};
}

}  // namespace

bool replay_padding_from_environment() {
  const char* setting = std::getenv("MOSAIC_REPLAY_PADDING");
  return setting == nullptr || std::string_view(setting) != "0";
}

std::optional<PaddedStep> pad_candidates_for_replay(const ModelConfig& config, const StepInput& input,
                                                    int64_t max_rows) {
  if (input.keep_logits || input.sequences.empty()) return std::nullopt;
  const size_t count = input.sequences.size();
  PaddedStep padded;
  padded.rows.resize(count), padded.real_index.resize(count), padded.padded_begin.resize(count);
  bool grows = false;
  int64_t total = 0;
  for (size_t s = 0; s < count; ++s) {
    const SequenceRows& sequence = input.sequences[s];
    std::vector<int32_t>& rows = padded.rows[s];
    std::vector<int64_t>& index = padded.real_index[s];
    const bool device_commit = !input.device_commit.empty() && input.device_commit[s].has_value();
    const PositionRange positions = predictable_positions(config, sequence);
    const bool pad = !sequence.rows.empty() && !device_commit &&
                     positions.size() > static_cast<int64_t>(sequence.rows.size());
    padded.padded_begin[s] = total;
    total += pad ? positions.size() : static_cast<int64_t>(sequence.rows.size());
    if (total > max_rows) return std::nullopt;  // before any row is copied: large steps cost nothing here
    if (pad) {
      for (const int32_t p : sequence.rows) {
        if (!positions.holds(p)) return std::nullopt;  // a row the step cannot predict: pack_batch says so
        index.push_back(p - positions.first);
      }
      rows.resize(static_cast<size_t>(positions.size()));
      std::iota(rows.begin(), rows.end(), static_cast<int32_t>(positions.first));
      grows = true;
    } else {
      rows.assign(sequence.rows.begin(), sequence.rows.end());
      for (size_t i = 0; i < rows.size(); ++i) index.push_back(static_cast<int64_t>(i));
    }
  }
  if (!grows) return std::nullopt;
  padded.padded_total = total;

  padded.input.device_commit = input.device_commit;
  padded.input.sampling.reserve(static_cast<size_t>(total));
  size_t real_row = 0;
  for (size_t s = 0; s < count; ++s) {
    SequenceRows sequence = input.sequences[s];
    const std::vector<int32_t>& rows = padded.rows[s];
    const std::vector<int64_t>& index = padded.real_index[s];
    MOSAIC_ASSERT(real_row + index.size() <= input.sampling.size(), "one sampling entry per row");
    sequence.rows = rows;
    padded.input.sequences.push_back(sequence);
    const size_t first = padded.input.sampling.size();
    for (const int32_t p : rows) {
      // The sequence's first real row's sampling, at the padding's own position.
      HeadRowSampling sampling = input.sampling[real_row];
      sampling.position = static_cast<uint32_t>(p);
      padded.input.sampling.push_back(sampling);
    }
    for (size_t i = 0; i < index.size(); ++i)
      padded.input.sampling[first + static_cast<size_t>(index[i])] = input.sampling[real_row + i];
    real_row += index.size();
  }
  return padded;
}

void unpad_output(const PaddedStep& padded, StepOutput& output) {
  const auto gather = [&](auto& values, int64_t cols) {
    if (values.empty()) return;
    MOSAIC_ASSERT(static_cast<int64_t>(values.size()) == padded.padded_total * cols,
                  "the padded step's output has one row per padded row");
    std::remove_reference_t<decltype(values)> kept;
    for (size_t s = 0; s < padded.real_index.size(); ++s)
      for (const int64_t i : padded.real_index[s]) {
        const auto from = values.begin() + (padded.padded_begin[s] + i) * cols;
        kept.insert(kept.end(), from, from + cols);
      }
    values = std::move(kept);
  };
  gather(output.values, output.cols);
  gather(output.committed, 1);
}

}  // namespace mosaic
