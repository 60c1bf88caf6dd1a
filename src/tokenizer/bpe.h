// The BPE model of a Hugging Face tokenizer: a vocabulary (token string -> id) and a ranked list
// of merges. Encoding one pre-token:
//   1. With ignore_merges, a pre-token that is itself in the vocabulary is one token.
//   2. Otherwise start from its characters (UTF-8 code points) as tokens.
//   3. Repeatedly merge the adjacent pair with the lowest merge rank (leftmost on ties) into the
//      token the merge produces, until no adjacent pair has a merge. A heap keyed by
//      (rank, position) makes this O(n log n) in the pre-token's length.
// Results are cached per pre-token string: natural text repeats its words, so after warm-up most
// pre-tokens cost one hash lookup.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_node.h"

namespace mosaic::tokenizer {

// Hashing that lets maps keyed by std::string be searched with a std::string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // Token ids index tables, so a corrupt file must not make us allocate gigabytes: real
  // vocabularies stay far below 2^24 ids.
  static constexpr int64_t kTokenIdLimit = int64_t{1} << 24;

  // Reads tokenizer.json's "model" (type BPE). Merges may be [["a", "b"], ...] or ["a b", ...].
  // Refused, naming the field: dropout, byte_fallback, continuing_subword_prefix and
  // end_of_word_suffix (none is used by byte-level models), merges of unknown tokens.
  static BpeModel from_json(const JsonNode& node);

  // Appends the ids of one pre-token. Thread-safe.
  void encode_word(std::string_view word, std::vector<int32_t>& ids) const;

  std::optional<int32_t> token_id(std::string_view token) const;
  const StringMap<int32_t>& vocabulary() const { return vocabulary_; }

  // Drops the pre-token cache (for benchmarks that measure cold encoding).
  void clear_cache() const;

  BpeModel(BpeModel&& other) noexcept;
  BpeModel& operator=(BpeModel&&) = delete;
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;
  ~BpeModel() = default;

 private:
  BpeModel() = default;

  struct Merge {
    int32_t rank;
    int32_t result;  // id of the merged token
  };
  // Merges by (left id, right id) in one flat open-addressing table: a lookup costs one cache
  // line, which is what a cold encode spends its time on (a node-based map costs two or three).
  struct MergeSlot {
    uint64_t pair = kEmptyPair;
    Merge merge{};
  };
  static constexpr uint64_t kEmptyPair = ~uint64_t{0};
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  }
  static size_t slot_of(uint64_t pair, size_t mask) {
    return static_cast<size_t>((pair * 0x9E3779B97F4A7C15ull) >> 32) & mask;
  }
  void add_merge(int32_t left, int32_t right, Merge merge);
  const Merge* find_merge(int32_t left, int32_t right) const;
  void merge_word(std::string_view word, std::vector<int32_t>& ids) const;

  StringMap<int32_t> vocabulary_;
  std::vector<MergeSlot> merge_slots_;  // size: a power of two, at most half full
  // Ids of the characters below U+0800 (all of the byte-level alphabet), so that the first step
  // of a merge needs no string hashing; -1 where the character is not a token.
  std::vector<int32_t> small_character_ids_;
  std::optional<int32_t> unknown_id_;
  bool fuse_unknown_ = false;
  bool ignore_merges_ = false;

  // Pre-token -> ids. Bounded: when full it is emptied and refilled, so memory stays small and
  // the cache follows what the text is about now.
  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kCacheableLength = 256;  // longer pre-tokens are rarely repeated
  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<int32_t>> cache_;
};

}  // namespace mosaic::tokenizer
