// cuda::commit_rows against a host reference of the same contract: confidences by the formulas of
// gen/confidence.cc, ranks by (confidence desc, position asc), top-k and threshold rules, tokens
// written to the canvas at committed positions only, rows of unlisted sequences untouched.
// Random statistics with exact ties (duplicated rows, banned tokens of confidence 0) and
// candidate rows out of position order. Skipped without a device. (tests/gpu/device_commit_test.cc
// checks the same kernel against gen's own choice_from_head and position_select.)
#include "backend/cuda/commit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "backend/cuda/test_device_buffer.h"

namespace mosaic::cuda {
namespace {

using testing_support::DeviceBuffer;
using testing_support::download;
using testing_support::upload;

class CudaCommit : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

constexpr int32_t kUnwritten = -7;   // canvas poison
constexpr int32_t kVocab = 500;
constexpr int64_t kStride = kHeadStatCount + 3;  // a padded stats row

double reference_confidence(const float* s, const HeadRowSampling& how, ConfidenceKind kind) {
  const int32_t token = static_cast<int32_t>(s[kHeadChosen]);
  const double lse = s[kHeadLogSumExp];
  switch (kind) {
    case ConfidenceKind::chosen_probability:
      return how.stats_banned(token) ? 0.0 : std::exp(double(s[kHeadChosenLogit]) - lse);
    case ConfidenceKind::top2_margin:
      return std::exp(double(s[kHeadMax]) - lse) -
             (s[kHeadSecondId] < 0 ? 0.0 : std::exp(double(s[kHeadSecond]) - lse));
    case ConfidenceKind::negative_entropy:
      return double(s[kHeadMeanLogit]) - lse;
  }
  return 0.0;
}

// A step of several sequences; sequence `skipped` is left out of the commit.
struct Problem {
  std::vector<int64_t> counts, begins;
  std::vector<int64_t> lengths;             // canvas length per sequence
  std::vector<float> stats;                 // [rows, kStride]
  std::vector<HeadRowSampling> sampling;    // [rows]
  int64_t rows = 0;

  Problem(std::vector<int64_t> row_counts, uint32_t seed) : counts(std::move(row_counts)) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.5f);
    for (const int64_t n : counts) {
      begins.push_back(rows);
      rows += n;
      lengths.push_back(n * 2 + 5);
    }
    stats.assign(static_cast<size_t>(rows * kStride), 0.0f);
    sampling.resize(static_cast<size_t>(rows));
    for (size_t s = 0; s < counts.size(); ++s) {
      // Distinct canvas positions, shuffled: row order is not position order.
      std::vector<uint32_t> positions(static_cast<size_t>(lengths[s]));
      std::iota(positions.begin(), positions.end(), 0u);
      std::shuffle(positions.begin(), positions.end(), rng);
      for (int64_t i = 0; i < counts[s]; ++i) {
        const int64_t r = begins[s] + i;
        float* o = stats.data() + r * kStride;
        const float top = normal(rng), second = top - std::abs(normal(rng));
        o[kHeadChosen] = static_cast<float>(rng() % kVocab);
        o[kHeadChosenLogit] = rng() % 3 == 0 ? top : second - std::abs(normal(rng));
        o[kHeadMax] = top;
        o[kHeadArgmax] = static_cast<float>(rng() % kVocab);
        o[kHeadLogSumExp] = top + 0.05f + std::abs(normal(rng));
        o[kHeadMeanLogit] = top - std::abs(normal(rng));
        o[kHeadSecond] = second;
        o[kHeadSecondId] = rng() % 7 == 0 ? -1.0f : static_cast<float>(rng() % kVocab);
        HeadRowSampling& how = sampling[static_cast<size_t>(r)];
        how.position = positions[static_cast<size_t>(i)];
        how.stats_bans[0] = 7;  // chosen 7: confidence 0 under chosen_probability
        // Exact ties: every fifth row repeats an earlier row's statistics (and token).
        if (i >= 3 && i % 5 == 0) std::memcpy(o, o - 3 * kStride, kStride * sizeof(float));
        if (i % 11 == 4) o[kHeadChosen] = 7.0f;
      }
    }
  }
};

struct Outcome {
  std::vector<CommittedRow> rows;
  std::vector<std::vector<int32_t>> canvases;
};

Outcome run_commit(const Problem& p, const std::vector<CommitRule>& rules, size_t skipped) {
  DeviceBuffer stats(p.stats.size() * sizeof(float)), sampling(p.sampling.size() * sizeof(HeadRowSampling)),
      out(static_cast<size_t>(p.rows) * sizeof(CommittedRow));
  upload(stats, p.stats);
  upload(sampling, p.sampling);
  std::vector<CommittedRow> poison(static_cast<size_t>(p.rows), CommittedRow{-5, -5, std::nan("")});
  upload(out, poison);
  std::vector<std::unique_ptr<DeviceBuffer>> canvases;
  std::vector<CommitSequence> sequences;
  for (size_t s = 0; s < p.counts.size(); ++s) {
    canvases.push_back(std::make_unique<DeviceBuffer>(static_cast<size_t>(p.lengths[s]) * 4));
    upload(*canvases.back(), std::vector<int32_t>(static_cast<size_t>(p.lengths[s]), kUnwritten));
    if (s == skipped) continue;
    CommitSequence sequence;
    sequence.row_begin = p.begins[s], sequence.row_count = p.counts[s];
    sequence.canvas = static_cast<int32_t*>(canvases.back()->data);
    sequence.rule = rules[s];
    sequences.push_back(sequence);
  }
  DeviceBuffer device_sequences(sequences.size() * sizeof(CommitSequence));
  upload(device_sequences, sequences);
  CommitArgs args;
  args.stats = static_cast<const float*>(stats.data), args.stats_stride = kStride;
  args.sampling = static_cast<const HeadRowSampling*>(sampling.data);
  args.sequences = static_cast<const CommitSequence*>(device_sequences.data);
  args.sequence_count = static_cast<int64_t>(sequences.size());
  args.out = static_cast<CommittedRow*>(out.data);
  commit_rows(args, nullptr);
  MOSAIC_CUDA_CHECK(cudaDeviceSynchronize());
  Outcome outcome;
  outcome.rows = download<CommittedRow>(out, static_cast<size_t>(p.rows));
  for (size_t s = 0; s < p.counts.size(); ++s)
    outcome.canvases.push_back(download<int32_t>(*canvases[s], static_cast<size_t>(p.lengths[s])));
  return outcome;
}

// Checks one sequence's outcome against the reference; returns how many rows it committed.
int64_t expect_sequence(const Problem& p, const Outcome& got, size_t s, const CommitRule& rule) {
  const int64_t n = p.counts[s], begin = p.begins[s];
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const CommittedRow& row = got.rows[static_cast<size_t>(begin + i)];
    const float* stats = p.stats.data() + (begin + i) * kStride;
    EXPECT_EQ(row.token, static_cast<int32_t>(stats[kHeadChosen])) << "sequence " << s << " row " << i;
    const double expected = reference_confidence(stats, p.sampling[static_cast<size_t>(begin + i)], rule.confidence);
    // The device's double exp may differ from the host's in the last bits.
    EXPECT_NEAR(row.confidence, expected, 1e-15 * std::max(1.0, std::abs(expected)))
        << "sequence " << s << " row " << i;
  }
  // The reference ranking, on the device's own confidences.
  auto confidence = [&](int64_t i) { return got.rows[static_cast<size_t>(begin + i)].confidence; };
  auto position = [&](int64_t i) { return p.sampling[static_cast<size_t>(begin + i)].position; };
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (confidence(a) != confidence(b)) return confidence(a) > confidence(b);
    return position(a) < position(b);
  });
  std::vector<bool> chosen(static_cast<size_t>(n), false);
  for (int64_t rank = 0; rank < n; ++rank) {
    const bool take = rule.selection == CommitSelection::top_k
                          ? rank < rule.k
                          : rank == 0 || confidence(order[static_cast<size_t>(rank)]) >= rule.threshold;
    chosen[static_cast<size_t>(order[static_cast<size_t>(rank)])] = take;
  }
  std::vector<int32_t> canvas(static_cast<size_t>(p.lengths[s]), kUnwritten);
  int64_t committed = 0;
  for (int64_t i = 0; i < n; ++i) {
    const CommittedRow& row = got.rows[static_cast<size_t>(begin + i)];
    EXPECT_EQ(row.committed, chosen[static_cast<size_t>(i)] ? 1 : 0) << "sequence " << s << " row " << i;
    if (chosen[static_cast<size_t>(i)]) {
      canvas[position(i)] = row.token;
      ++committed;
    }
  }
  EXPECT_EQ(got.canvases[s], canvas) << "sequence " << s;
  return committed;
}

TEST_F(CudaCommit, TopKMatchesTheReferenceRankingWithTies) {
  // Row counts below, at and above the CTA's 512-row tile; one sequence left out.
  const Problem p({1, 9, 40, 512, 1300, 33}, 11);
  const size_t skipped = 5;
  for (const ConfidenceKind kind :
       {ConfidenceKind::chosen_probability, ConfidenceKind::top2_margin, ConfidenceKind::negative_entropy}) {
    std::vector<CommitRule> rules;
    for (const int64_t k : {int64_t{1}, int64_t{0}, int64_t{13}, int64_t{511}, int64_t{1400}, int64_t{2}})
      rules.push_back({kind, CommitSelection::top_k, k, 0.0});
    const Outcome got = run_commit(p, rules, skipped);
    for (size_t s = 0; s < p.counts.size(); ++s) {
      if (s == skipped) continue;
      EXPECT_EQ(expect_sequence(p, got, s, rules[s]), std::min(rules[s].k, p.counts[s])) << "sequence " << s;
    }
    for (int64_t i = 0; i < p.counts[skipped]; ++i) {
      const CommittedRow& row = got.rows[static_cast<size_t>(p.begins[skipped] + i)];
      EXPECT_EQ(row.token, -5);
      EXPECT_EQ(row.committed, -5);
    }
    EXPECT_EQ(got.canvases[skipped], std::vector<int32_t>(static_cast<size_t>(p.lengths[skipped]), kUnwritten));
  }
}

TEST_F(CudaCommit, ThresholdKeepsTheBestAndEveryRowAtOrAboveIt) {
  const Problem p({6, 70, 700, 25}, 12);
  const ConfidenceKind kind = ConfidenceKind::chosen_probability;
  // A bar above every confidence (the best alone), one at a tied row's exact confidence (>= keeps
  // it and its twin), a low bar (many rows), zero (every row, banned rows included).
  const Outcome first = run_commit(p, std::vector<CommitRule>(4, {kind, CommitSelection::top_k, 1, 0.0}), 99);
  const double tied = first.rows[static_cast<size_t>(p.begins[2] + 5)].confidence;  // row 5 repeats row 2
  ASSERT_EQ(tied, first.rows[static_cast<size_t>(p.begins[2] + 2)].confidence);
  const std::vector<CommitRule> rules = {{kind, CommitSelection::threshold, 0, 2.0},
                                         {kind, CommitSelection::threshold, 0, 0.05},
                                         {kind, CommitSelection::threshold, 0, tied},
                                         {kind, CommitSelection::threshold, 0, 0.0}};
  const Outcome got = run_commit(p, rules, 99);
  EXPECT_EQ(expect_sequence(p, got, 0, rules[0]), 1);
  EXPECT_GT(expect_sequence(p, got, 1, rules[1]), 1);
  expect_sequence(p, got, 2, rules[2]);
  EXPECT_EQ(got.rows[static_cast<size_t>(p.begins[2] + 5)].committed, 1);
  EXPECT_EQ(got.rows[static_cast<size_t>(p.begins[2] + 2)].committed, 1);
  EXPECT_EQ(expect_sequence(p, got, 3, rules[3]), p.counts[3]);
}

}  // namespace
}  // namespace mosaic::cuda
