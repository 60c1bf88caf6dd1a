#include "tokenizer/bpe.h"

#include <algorithm>
#include <bit>

#include "tokenizer/unicode.h"

namespace mosaic::tokenizer {
namespace {

constexpr char32_t kSmallCharacterLimit = 0x800;  // code points of one or two UTF-8 bytes

// An optional string option that byte-level models leave null or empty.
void refuse_affix(const JsonNode& model, std::string_view key) {
  const JsonNode affix = model[key];
  if (!affix.is_null() && !affix.as_string().empty()) {
    affix.fail("\"{}\" is not supported (byte-level BPE models leave it empty)", affix.as_string());
  }
}

}  // namespace

BpeModel::BpeModel(BpeModel&& other) noexcept
    : vocabulary_(std::move(other.vocabulary_)),
      merge_slots_(std::move(other.merge_slots_)),
      small_character_ids_(std::move(other.small_character_ids_)),
      unknown_id_(other.unknown_id_),
      fuse_unknown_(other.fuse_unknown_),
      ignore_merges_(other.ignore_merges_) {}

BpeModel BpeModel::from_json(const JsonNode& node) {
  node.expect_object();
  BpeModel model;

  const JsonNode dropout = node["dropout"];
  if (!dropout.is_null() && !dropout.json().is_number()) dropout.fail("expected a number");
  if (!dropout.is_null() && dropout.json().get<double>() != 0.0) {
    dropout.fail("BPE dropout makes encoding random; inference tokenizers set it to null");
  }
  if (node.bool_or("byte_fallback", false)) {
    node["byte_fallback"].fail("byte_fallback (SentencePiece-style BPE) is not supported");
  }
  refuse_affix(node, "continuing_subword_prefix");
  refuse_affix(node, "end_of_word_suffix");
  model.ignore_merges_ = node.bool_or("ignore_merges", false);
  model.fuse_unknown_ = node.bool_or("fuse_unk", false);

  const JsonNode vocab = node["vocab"];
  vocab.expect_object();
  model.vocabulary_.reserve(vocab.json().size());
  for (const auto& [token, id] : vocab.json().items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kTokenIdLimit) {
      vocab[token].fail("expected a token id (an integer from 0 to 2^24-1)");
    }
    model.vocabulary_.emplace(token, static_cast<int32_t>(id.get<int64_t>()));
  }

  const JsonNode unknown = node["unk_token"];
  if (!unknown.is_null()) {
    model.unknown_id_ = model.token_id(unknown.as_string());
    if (!model.unknown_id_) {
      unknown.fail("unknown token \"{}\" is not in the vocabulary", unknown.as_string());
    }
  }

  const JsonNode merges = node["merges"];
  const size_t merge_count = merges.array_size();
  model.merge_slots_.resize(std::bit_ceil(std::max<size_t>(16, merge_count * 2)));
  std::string merged;
  for (size_t rank = 0; rank < merge_count; ++rank) {
    const JsonNode merge = merges[rank];
    std::string_view left, right;
    if (merge.json().is_string()) {
      // "a b": exactly one space, so neither side can contain one.
      const std::string_view text = merge.as_string();
      const size_t space = text.find(' ');
      if (space == std::string_view::npos || text.find(' ', space + 1) != std::string_view::npos) {
        merge.fail("expected two tokens separated by one space, found \"{}\"", text);
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else {
      if (merge.array_size() != 2) merge.fail("expected a pair of tokens");
      left = merge[0].as_string();
      right = merge[1].as_string();
    }
    const std::optional<int32_t> left_id = model.token_id(left);
    const std::optional<int32_t> right_id = model.token_id(right);
    merged.assign(left).append(right);
    const std::optional<int32_t> merged_id = model.token_id(merged);
    if (!left_id || !right_id || !merged_id) {
      merge.fail("merge of \"{}\" and \"{}\" uses a token that is not in the vocabulary (\"{}\")",
                 left, right,
                 !left_id    ? left
                 : !right_id ? right
                             : std::string_view(merged));
    }
    // A repeated pair keeps its last rank, as HF's merge map does.
    model.add_merge(*left_id, *right_id, Merge{static_cast<int32_t>(rank), *merged_id});
  }

  model.small_character_ids_.assign(kSmallCharacterLimit, -1);
  std::string character;
  for (char32_t cp = 0; cp < kSmallCharacterLimit; ++cp) {
    character.clear();
    append_utf8(character, cp);
    if (const std::optional<int32_t> id = model.token_id(character)) {
      model.small_character_ids_[cp] = *id;
    }
  }
  return model;
}

std::optional<int32_t> BpeModel::token_id(std::string_view token) const {
  const auto it = vocabulary_.find(token);
  if (it == vocabulary_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::add_merge(int32_t left, int32_t right, Merge merge) {
  const uint64_t pair = pair_key(left, right);
  const size_t mask = merge_slots_.size() - 1;
  for (size_t slot = slot_of(pair, mask);; slot = (slot + 1) & mask) {
    if (merge_slots_[slot].pair == kEmptyPair || merge_slots_[slot].pair == pair) {
      merge_slots_[slot] = {pair, merge};
      return;
    }
  }
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  const uint64_t pair = pair_key(left, right);
  const size_t mask = merge_slots_.size() - 1;
  for (size_t slot = slot_of(pair, mask);; slot = (slot + 1) & mask) {
    const MergeSlot& entry = merge_slots_[slot];
    if (entry.pair == pair) return &entry.merge;
    if (entry.pair == kEmptyPair) return nullptr;
  }
}

void BpeModel::clear_cache() const {
  std::lock_guard lock(cache_mutex_);
  cache_.clear();
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  const bool cacheable = word.size() <= kCacheableLength;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids.size();
  const std::optional<int32_t> whole = ignore_merges_ ? token_id(word) : std::nullopt;
  if (whole) {
    ids.push_back(*whole);
  } else {
    merge_word(word, ids);
  }
  if (cacheable) {
    std::vector<int32_t> result(ids.begin() + static_cast<ptrdiff_t>(first), ids.end());
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_.emplace(std::string(word), std::move(result));
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& ids) const {
  // Symbols form a linked list over their original positions; a merge keeps the left symbol
  // and unlinks the right one (id -1).
  struct Symbol {
    int32_t id;
    int32_t previous;
    int32_t next;
  };
  struct Candidate {
    int32_t rank;
    int32_t left;                       // position of the pair's left symbol
    int32_t left_id, right_id, result;  // the pair when queued, and what it merges into
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : left > other.left;
    }
  };
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  symbols.clear();
  heap.clear();

  auto add_symbol = [&](int32_t id) {
    const auto position = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, position - 1, -1});
    if (position > 0) symbols[position - 1].next = position;
  };
  // Characters that are not tokens become the unknown token (runs of them fused into one when
  // fuse_unk), or vanish when the model has none: HF's behavior. Byte-level vocabularies
  // contain every byte character, so neither happens for them.
  bool pending_unknown = false;
  size_t pos = 0;
  while (pos < word.size()) {
    size_t length;
    const char32_t cp = decode_utf8_at(word, pos, &length);
    int32_t id = cp < kSmallCharacterLimit ? small_character_ids_[cp] : -1;
    if (id < 0 && cp >= kSmallCharacterLimit) {
      if (const std::optional<int32_t> found = token_id(word.substr(pos, length))) id = *found;
    }
    pos += length;
    if (id >= 0) {
      if (pending_unknown) add_symbol(*unknown_id_);
      pending_unknown = false;
      add_symbol(id);
    } else if (unknown_id_) {
      if (pending_unknown && !fuse_unknown_) add_symbol(*unknown_id_);
      pending_unknown = true;
    }
  }
  if (pending_unknown) add_symbol(*unknown_id_);

  const auto push_candidate = [&](int32_t left) {
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    if (const Merge* merge = find_merge(symbols[left].id, symbols[right].id)) {
      heap.push_back({merge->rank, left, symbols[left].id, symbols[right].id, merge->result});
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push_candidate(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const Candidate candidate = heap.back();
    heap.pop_back();
    Symbol& left = symbols[candidate.left];
    if (left.id != candidate.left_id || left.next < 0) continue;  // changed since it was queued
    Symbol& right = symbols[left.next];
    if (right.id != candidate.right_id) continue;
    left.id = candidate.result;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].previous = candidate.left;
    right.id = -1;
    if (left.previous >= 0) push_candidate(left.previous);
    push_candidate(candidate.left);
  }

  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    ids.push_back(symbols[i].id);
  }
}

}  // namespace mosaic::tokenizer
