// Which keys a query may attend to, as a kind (docs/design/cached-decoding.md §1), and the
// decoding blocks that go with it (§2). Full attention: the whole canvas. Block-causal: a query
// sees its own block and every earlier one, where the blocks are the prompt as one block and
// then block_length positions at a time from its end (D2F), or block_length positions at a time
// from position 0 (LLaDA 2.x). No mask tensor exists anywhere: a run of queries with one key
// range is an attention segment.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

namespace mosaic {

enum class BlockAttention : uint8_t {
  none,      // full, bidirectional attention
  prompt,    // block-causal; the prompt is one block, generation blocks start at its end
  absolute,  // block-causal; blocks of block_length from position 0, the prompt included
};

// "full", "prompt", "absolute": the config.json spelling of the block-causal kinds.
inline std::string_view block_attention_name(BlockAttention kind) {
  switch (kind) {
    case BlockAttention::none: return "full";
    case BlockAttention::prompt: return "prompt";
    case BlockAttention::absolute: return "absolute";
  }
  return "full";
}

// One sequence's block layout: `length` positions, the first `prompt` of them the prompt, blocks
// of `block` positions laid as `kind` says.
struct BlockLayout {
  BlockAttention kind = BlockAttention::none;
  int64_t prompt = 0, block = 0, length = 0;

  bool block_causal() const { return kind != BlockAttention::none; }

  // The end of the key range of a query at position q (its keys are [0, key_end(q))).
  int64_t key_end(int64_t q) const {
    switch (kind) {
      case BlockAttention::none: return length;
      case BlockAttention::prompt:
        return q < prompt ? prompt : std::min(length, prompt + ((q - prompt) / block + 1) * block);
      case BlockAttention::absolute: return std::min(length, (q / block + 1) * block);
    }
    return length;
  }

  // Where the attention block holding q begins (0 under full attention: one block).
  int64_t block_start(int64_t q) const {
    switch (kind) {
      case BlockAttention::none: return 0;
      case BlockAttention::prompt: return q < prompt ? 0 : prompt + (q - prompt) / block * block;
      case BlockAttention::absolute: return q / block * block;
    }
    return 0;
  }

  // Where the run of queries that share q's key range ends (the next query with another range).
  int64_t same_keys_until(int64_t q) const { return kind == BlockAttention::none ? length : key_end(q); }
};

// The decoding blocks [begin, end) of a generation over positions [prompt, length): blocks of
// `block` from the prompt's end, or for BlockAttention::absolute the grid blocks of `block` that
// meet [prompt, length), cut to it (the first and last may be shorter).
struct DecodingBlock {
  int64_t begin = 0, end = 0;
};
inline std::vector<DecodingBlock> decoding_blocks(const BlockLayout& layout) {
  std::vector<DecodingBlock> blocks;
  if (layout.block <= 0) return blocks;
  int64_t begin = layout.prompt;
  while (begin < layout.length) {
    int64_t end = begin + layout.block;
    if (layout.kind == BlockAttention::absolute) end = (begin / layout.block + 1) * layout.block;
    end = std::min(end, layout.length);
    blocks.push_back({begin, end});
    begin = end;
  }
  return blocks;
}

}  // namespace mosaic
