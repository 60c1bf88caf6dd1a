// The fused mask-only LM head on tensor cores (docs/design/cuda-kernels.md, "LM head").
//
// Pass 1, `head_partials_kernel`: a CTA of 8 warps owns a tile of kRowTile rows (32, 64 or 128,
// by the call's row count) and one vocabulary split: a fixed run of tiles of kVocabTile = 128
// ids that depends on the vocabulary size only. For each tile it computes the logits
// [rows, 128] = h W^T with mma.sync m16n8k16 (bf16 in, fp32 accumulate; hidden streamed in
// chunks of 32 through a 4-stage cp.async pipeline that runs on across tile boundaries) and folds
// them, still in registers, into per-row partial statistics (`HeadPartial`):
//   1. each lane reduces its 8 logits of a row (ids in increasing order) to a summary;
//   2. the 4 lanes that share the row merge their summaries (xor butterfly, lane 0's result);
//   3. lane 0 merges the summary into the running state of (row, warp column) in shared memory;
//   after the split's last tile the 4 warp columns' states merge in order 0..3 and the result is
//   the row's partial for that split, written to `scratch`.
// Pass 2, `head_combine_kernel`: a warp per row merges the row's partials — one per split, or on
// the cuBLASLt path one per vocabulary chunk — (lane j takes partials j, j + 32, ... in order;
// then a butterfly) and writes the kHeadStatCount floats.
//
// Exactness: every step above depends on the row's own h and the weights only, in a fixed order
// that does not change with the row count, the row's place in a tile or the tile size, so a call
// on rows [a, b) writes the same bits as the whole call. Merges use explicitly rounded
// arithmetic (no contraction) and break ties to the lowest id, so the combined order of a split
// or of splits never decides a tie differently from the CPU's sequential scan.
#include "backend/cuda/lm_head.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/ptx.cuh"
#include "backend/cuda/shared_memory_limit.h"
#include "core/philox.h"

namespace mosaic::cuda {
namespace {

using namespace ptx;

constexpr int kVocabTile = 128;   // ids per tile
constexpr int kChunkK = 32;       // hidden elements per pipeline stage
constexpr int kStages = 4;
constexpr int kWarpRows = 2, kWarpCols = 4;
constexpr int kThreads = kWarpRows * kWarpCols * 32;
constexpr int kWarpColumns = kVocabTile / kWarpCols;  // 32 ids per warp column
constexpr int kMaxSplits = 256;   // splits per vocabulary (fills 132 SMs x 2 at small row counts)
constexpr int kRasterGroup = 8;   // row tiles per raster group (L2 reuse of W and h)

// ---- per-row statistics ---------------------------------------------------------------------

// What a run of ids of one row reduces to. Logit values are the raw fp32 logits l; the
// statistics are over s = l * stats_scale, and stats_scale > 0 keeps the order of l, so top-2 is
// kept on l and scaled at the end, exactly as the CPU's float(double(l) * scale).
struct HeadPartial {
  float top;            // max l over the stats set, -inf when empty
  int32_t top_id;       // its id (lowest among equals), -1 when empty
  float second;         // runner-up (an equal value at a higher id counts), -inf when none
  int32_t second_id;
  float sum;            // sum exp(stats_scale (l - top))
  float centered;       // sum exp(stats_scale (l - top)) (l - top)
  double best;          // best choice score: l (greedy) or l / T + gumbel; -inf when empty
  int32_t chosen;       // its id (lowest among equals), -1 when empty
  float chosen_logit;   // l of `chosen`
};
static_assert(sizeof(HeadPartial) == 40);

__device__ __forceinline__ HeadPartial empty_partial() {
  return {-INFINITY, -1, -INFINITY, -1, 0.0f, 0.0f, -INFINITY, -1, 0.0f};
}

// (value, id) ordered by value, then lower id first; id -1 (absent) loses every tie.
__device__ __forceinline__ bool ranks_before(float value, int32_t id, float other_value,
                                             int32_t other_id) {
  return value > other_value ||
         (value == other_value && static_cast<uint32_t>(id) < static_cast<uint32_t>(other_id));
}
__device__ __forceinline__ bool ranks_before(double value, int32_t id, double other_value,
                                             int32_t other_id) {
  return value > other_value ||
         (value == other_value && static_cast<uint32_t>(id) < static_cast<uint32_t>(other_id));
}

// One side's sums rescaled from its own top to `top` (both in raw logits; k = stats_scale log2 e).
__device__ __forceinline__ void rescaled(const HeadPartial& x, float top, float k, float& sum,
                                         float& centered) {
  if (x.top_id < 0) {  // empty
    sum = 0.0f, centered = 0.0f;
    return;
  }
  const float shift = __fsub_rn(x.top, top);  // <= 0
  const float alpha = shift == 0.0f ? 1.0f : exp2_approx(__fmul_rn(shift, k));
  sum = __fmul_rn(x.sum, alpha);
  centered = __fmul_rn(__fmaf_rn(shift, x.sum, x.centered), alpha);
}

// The statistics of the union of two disjoint id sets. Symmetric: merge(a, b) and merge(b, a)
// are the same bits (every comparison is a total order on (value, id); the sums add two terms).
__device__ __forceinline__ HeadPartial merge(const HeadPartial& a, const HeadPartial& b, float k) {
  // Field by field selects (a reference to `a_first ? a : b` would put both in local memory).
  HeadPartial m;
  const bool a_first = ranks_before(a.top, a.top_id, b.top, b.top_id);
  m.top = a_first ? a.top : b.top;
  m.top_id = a_first ? a.top_id : b.top_id;
  const float win_second = a_first ? a.second : b.second, lose_top = a_first ? b.top : a.top;
  const int32_t win_second_id = a_first ? a.second_id : b.second_id;
  const int32_t lose_top_id = a_first ? b.top_id : a.top_id;
  const bool keep_second = ranks_before(win_second, win_second_id, lose_top, lose_top_id);
  m.second = keep_second ? win_second : lose_top;
  m.second_id = keep_second ? win_second_id : lose_top_id;
  float a_sum, a_centered, b_sum, b_centered;
  rescaled(a, m.top, k, a_sum, a_centered);
  rescaled(b, m.top, k, b_sum, b_centered);
  m.sum = __fadd_rn(a_sum, b_sum);
  m.centered = __fadd_rn(a_centered, b_centered);
  const bool a_chosen = ranks_before(a.best, a.chosen, b.best, b.chosen);
  m.best = a_chosen ? a.best : b.best;
  m.chosen = a_chosen ? a.chosen : b.chosen;
  m.chosen_logit = a_chosen ? a.chosen_logit : b.chosen_logit;
  return m;
}

__device__ __forceinline__ HeadPartial shuffle_xor(const HeadPartial& x, int mask) {
  HeadPartial y;
  y.top = __shfl_xor_sync(0xffffffffu, x.top, mask);
  y.top_id = __shfl_xor_sync(0xffffffffu, x.top_id, mask);
  y.second = __shfl_xor_sync(0xffffffffu, x.second, mask);
  y.second_id = __shfl_xor_sync(0xffffffffu, x.second_id, mask);
  y.sum = __shfl_xor_sync(0xffffffffu, x.sum, mask);
  y.centered = __shfl_xor_sync(0xffffffffu, x.centered, mask);
  y.best = __shfl_xor_sync(0xffffffffu, x.best, mask);
  y.chosen = __shfl_xor_sync(0xffffffffu, x.chosen, mask);
  y.chosen_logit = __shfl_xor_sync(0xffffffffu, x.chosen_logit, mask);
  return y;
}

// A row's sampling, as the kernels use it.
struct RowRule {
  double inv_temperature;  // 0: greedy
  double stats_scale;
  PhiloxKey key;
  uint32_t position, step;
  float k;                 // stats_scale * log2(e), fp32
  int32_t choice_bans[2], stats_bans[2];
};

__device__ __forceinline__ RowRule row_rule(const HeadRowSampling* sampling, int64_t row) {
  HeadRowSampling how;  // greedy, stats_scale 1, no bans
  if (sampling != nullptr) how = sampling[row];
  RowRule rule;
  rule.inv_temperature = how.choice_inv_temperature;
  rule.stats_scale = how.stats_scale;
  rule.key = philox_key(how.seed);
  rule.position = how.position, rule.step = how.step;
  rule.k = static_cast<float>(how.stats_scale * 1.4426950408889634);
  rule.choice_bans[0] = how.choice_bans[0], rule.choice_bans[1] = how.choice_bans[1];
  rule.stats_bans[0] = how.stats_bans[0], rule.stats_bans[1] = how.stats_bans[1];
  return rule;
}

// Gumbel noise of docs/design/rng.md, stream gumbel_token, bit for bit the CPU's
// rng_gumbel up to the last-ulp accuracy of the device's double log (see the design note).
__device__ __forceinline__ double gumbel_token(const RowRule& rule, uint32_t id) {
  const PhiloxCounter w = philox4x32_10(
      {id, rule.position, rule.step, static_cast<uint32_t>(RngStream::gumbel_token)}, rule.key);
  return -log(-log(uniform_open_f64(w[0], w[1])));
}

// A logit at a higher id than every one before it, into p's top two: strict comparisons keep the
// lowest id among equals (an equal value at a higher id can still be the runner-up).
__device__ __forceinline__ void scan_top_two(HeadPartial& p, float l, int32_t id) {
  if (l > p.top || p.top_id < 0) {
    p.second = p.top, p.second_id = p.top_id;
    p.top = l, p.top_id = id;
  } else if (l > p.second || p.second_id < 0) {
    p.second = l, p.second_id = id;
  }
}

// p's sums over the logits l[i] with counted[i], relative to p.top, in index order.
template <int kCount>
__device__ __forceinline__ void add_exp_sums(HeadPartial& p, const float (&l)[kCount], const bool (&counted)[kCount],
                                             float k) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    if (!counted[i]) continue;
    const float shift = __fsub_rn(l[i], p.top);
    const float e = exp2_approx(__fmul_rn(shift, k));
    p.sum = __fadd_rn(p.sum, e);
    p.centered = __fmaf_rn(e, shift, p.centered);
  }
}

// Summary of kCount logits l[i] of one row at ids id_of(i), increasing in i. With `check`, ids at
// or past `vocab` are left out, and banned ids out of the choice or of the statistics.
// kGreedy: the row is greedy (inv_temperature 0: the choice is the choice set's highest logit, no
// noise). The order of double(l) is the order of l, so the best score is kept as a float and
// widened at the end: the same bits without double scores or the noise path (fewer registers and
// instructions; docs/design/cuda-kernels.md, LM head item 7).
template <bool kGreedy, int kCount, typename IdOf>
__device__ __forceinline__ HeadPartial summarise(const float (&l)[kCount], IdOf id_of, const RowRule& rule,
                                                 bool check, int64_t vocab) {
  HeadPartial p = empty_partial();
  float best = -INFINITY;  // kGreedy: the best choice logit so far
  bool stats_ok[kCount];
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    const int32_t id = id_of(i);
    const bool inside = !check || id < vocab;
    stats_ok[i] = inside && (!check || (id != rule.stats_bans[0] && id != rule.stats_bans[1]));
    const bool choice_ok = inside && (!check || (id != rule.choice_bans[0] && id != rule.choice_bans[1]));
    if (stats_ok[i]) scan_top_two(p, l[i], id);
    if constexpr (kGreedy) {
      if (choice_ok && (l[i] > best || p.chosen < 0)) best = l[i], p.chosen = id, p.chosen_logit = l[i];
    } else if (choice_ok) {
      const double score = rule.inv_temperature > 0.0
                               ? __dadd_rn(__dmul_rn(static_cast<double>(l[i]), rule.inv_temperature),
                                           gumbel_token(rule, static_cast<uint32_t>(id)))
                               : static_cast<double>(l[i]);
      if (score > p.best || p.chosen < 0) p.best = score, p.chosen = id, p.chosen_logit = l[i];
    }
  }
  if (kGreedy && p.chosen >= 0) p.best = static_cast<double>(best);
  if (p.top_id >= 0) add_exp_sums(p, l, stats_ok, rule.k);
  return p;
}

// The same for the common case of a greedy row whose kCount ids are all inside the vocabulary and
// none banned, so that the choice is the top logit: the top two by a tournament instead of a scan
// (shorter dependency chains). Exact for finite logits: a pair's lower-index side wins its ties,
// so the top is the highest value at the lowest id and the runner-up the best of the rest, as the
// scan finds them; the sums add the same terms in the same order.
template <int kCount, typename IdOf>
__device__ __forceinline__ HeadPartial summarise_greedy_unbanned(const float (&l)[kCount], IdOf id_of, float k) {
  static_assert(kCount >= 2 && (kCount & (kCount - 1)) == 0, "a tournament of pairs");
  constexpr int kPairs = kCount / 2;
  float top[kPairs], second[kPairs];
  int top_i[kPairs], second_i[kPairs];
#pragma unroll
  for (int m = 0; m < kPairs; ++m) {
    const bool upper = l[2 * m + 1] > l[2 * m];
    top[m] = upper ? l[2 * m + 1] : l[2 * m], top_i[m] = upper ? 2 * m + 1 : 2 * m;
    second[m] = upper ? l[2 * m] : l[2 * m + 1], second_i[m] = upper ? 2 * m : 2 * m + 1;
  }
#pragma unroll
  for (int width = kPairs; width > 1; width /= 2) {
#pragma unroll
    for (int m = 0; m < width / 2; ++m) {
      const int a = 2 * m, b = 2 * m + 1;  // a holds the lower indices
      const bool b_tops = top[b] > top[a];
      // The runner-up: the loser of the tops against the winner's own runner-up (lower index first).
      const float loser = b_tops ? top[a] : top[b], winner_second = b_tops ? second[b] : second[a];
      const int loser_i = b_tops ? top_i[a] : top_i[b], winner_second_i = b_tops ? second_i[b] : second_i[a];
      const bool loser_second = b_tops ? loser >= winner_second : !(winner_second >= loser);
      second[m] = loser_second ? loser : winner_second;
      second_i[m] = loser_second ? loser_i : winner_second_i;
      top[m] = b_tops ? top[b] : top[a];
      top_i[m] = b_tops ? top_i[b] : top_i[a];
    }
  }
  HeadPartial p = empty_partial();
  p.top = top[0], p.top_id = id_of(top_i[0]);
  p.second = second[0], p.second_id = id_of(second_i[0]);
  p.best = static_cast<double>(p.top), p.chosen = p.top_id, p.chosen_logit = p.top;
  bool every[kCount];
#pragma unroll
  for (int i = 0; i < kCount; ++i) every[i] = true;
  add_exp_sums(p, l, every, k);
  return p;
}

// ---- pass 1: logits tiles folded into partials ----------------------------------------------

struct PartialsArgs {
  const __nv_bfloat16* h;
  int64_t h_stride;
  const __nv_bfloat16* weight;
  const HeadRowSampling* sampling;
  HeadPartial* partials;  // [rows, splits]
  int64_t rows, hidden, vocab;
  int tiles_per_split, splits, row_tiles;
};

// A shared tile is [rows][kChunkK] bf16: 4 chunks of 16 bytes per row, chunk c of row r stored
// at c ^ ((r / 2) % 4) so that the 8 rows of an ldmatrix hit 8 different bank groups.
__device__ __forceinline__ uint32_t chunk_offset(int row, int chunk) {
  return static_cast<uint32_t>((row * 4 + (chunk ^ ((row >> 1) & 3))) * 16);
}

template <int kMTiles>
struct PartialsShape {
  static constexpr int kRowTile = kWarpRows * 16 * kMTiles;
  static constexpr int kStageBytes = (kRowTile + kVocabTile) * kChunkK * 2;
  static constexpr int kPipelineBytes = kStages * kStageBytes;
  static constexpr int kStateBytes = kRowTile * kWarpCols * static_cast<int>(sizeof(HeadPartial));
  static constexpr int kRuleBytes = kRowTile * static_cast<int>(sizeof(RowRule));
  static constexpr int kSharedBytes = kPipelineBytes + kStateBytes + kRuleBytes;
};

template <int kMTiles>
__global__ void __launch_bounds__(kThreads, 2) head_partials_kernel(const PartialsArgs args) {
  using Shape = PartialsShape<kMTiles>;
  constexpr int kRowTile = Shape::kRowTile;
  extern __shared__ __align__(128) unsigned char smem[];
  HeadPartial* state = reinterpret_cast<HeadPartial*>(smem + Shape::kPipelineBytes);  // [row][wc]
  RowRule* rules = reinterpret_cast<RowRule*>(smem + Shape::kPipelineBytes + Shape::kStateBytes);
  const uint32_t pipeline = smem_address(smem);

  // Grouped raster: kRasterGroup row tiles walk the splits together, so the W split and the h
  // tiles that concurrent CTAs read stay in L2.
  const int64_t group_size = int64_t{kRasterGroup} * args.splits;
  const int64_t group = blockIdx.x / group_size;
  const int first_tile = static_cast<int>(group * kRasterGroup);
  const int group_rows = min(kRasterGroup, args.row_tiles - first_tile);
  const int64_t in_group = blockIdx.x % group_size;
  const int row_tile = first_tile + static_cast<int>(in_group % group_rows);
  const int split = static_cast<int>(in_group / group_rows);

  const int64_t row0 = int64_t{row_tile} * kRowTile;
  const int row_valid = static_cast<int>(min(int64_t{kRowTile}, args.rows - row0));
  const int64_t tiles = (args.vocab + kVocabTile - 1) / kVocabTile;
  const int64_t tile0 = int64_t{split} * args.tiles_per_split;
  const int tile_count = static_cast<int>(min(int64_t{args.tiles_per_split}, tiles - tile0));
  const int k_chunks = static_cast<int>((args.hidden + kChunkK - 1) / kChunkK);
  const int iterations = tile_count * k_chunks;

  // Padding rows past `rows` are computed and dropped; a greedy rule spares them the noise.
  for (int r = threadIdx.x; r < kRowTile; r += kThreads) {
    rules[r] = row_rule(r < row_valid ? args.sampling : nullptr, row0 + r);
  }
  for (int i = threadIdx.x; i < kRowTile * kWarpCols; i += kThreads) state[i] = empty_partial();

  // Stage loads for flat iteration `it` = (tile it / k_chunks, hidden chunk it % k_chunks).
  auto load_stage = [&](int it) {
    const uint32_t stage = pipeline + (it % kStages) * Shape::kStageBytes;
    const int64_t v0 = (tile0 + it / k_chunks) * kVocabTile;
    const int64_t k0 = int64_t{it % k_chunks} * kChunkK;
    for (int i = threadIdx.x; i < (kRowTile + kVocabTile) * 4; i += kThreads) {
      const int row = i / 4, chunk = i % 4;
      const int64_t k = k0 + chunk * 8;
      const __nv_bfloat16* src;
      bool inside;
      if (row < kRowTile) {
        inside = row < row_valid && k < args.hidden;
        src = args.h + (inside ? (row0 + row) * args.h_stride + k : 0);
      } else {
        const int64_t v = v0 + (row - kRowTile);
        inside = v < args.vocab && k < args.hidden;
        src = args.weight + (inside ? v * args.hidden + k : 0);
      }
      cp_async_16(stage + chunk_offset(row, chunk), src, inside ? 16 : 0);
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < iterations) load_stage(s);
    cp_async_commit();
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_row = warp / kWarpCols, warp_col = warp % kWarpCols;
  const int quad_row = lane / 4, quad_col = lane % 4;
  float acc[kMTiles][4][4] = {};

  for (int it = 0; it < iterations; ++it) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage `it` landed for all threads; stage it - 1 is free for reuse
    if (it + kStages - 1 < iterations) load_stage(it + kStages - 1);
    cp_async_commit();

    const uint32_t a_tile = pipeline + (it % kStages) * Shape::kStageBytes;
    const uint32_t b_tile = a_tile + kRowTile * kChunkK * 2;
#pragma unroll
    for (int ks = 0; ks < kChunkK / 16; ++ks) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        ldmatrix_x4(a[mt], a_tile + chunk_offset((warp_row * kMTiles + mt) * 16 + (lane & 15),
                                                 2 * ks + (lane >> 4)));
      }
#pragma unroll
      for (int n = 0; n < 4; n += 2) {
        uint32_t b[4];  // b0, b1 of n-tile n, then of n + 1
        const int matrix = lane >> 3;
        ldmatrix_x4(b, b_tile + chunk_offset(warp_col * kWarpColumns + (n + (matrix >> 1)) * 8 +
                                                 (lane & 7),
                                             2 * ks + (matrix & 1)));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_bf16_16816(acc[mt][n], a[mt], b[0], b[1]);
          mma_bf16_16816(acc[mt][n + 1], a[mt], b[2], b[3]);
        }
      }
    }

    if (it % k_chunks != k_chunks - 1) continue;

    // The tile's logits are complete: fold them into the running states.
    const int64_t v0 = (tile0 + it / k_chunks) * kVocabTile;
    const int64_t column0 = v0 + warp_col * kWarpColumns + 2 * quad_col;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = (warp_row * kMTiles + mt) * 16 + quad_row + 8 * half;
        const RowRule& rule = rules[row];
        float l[8];
        int32_t id[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          l[i] = acc[mt][i / 2][2 * half + i % 2];
          id[i] = static_cast<int32_t>(column0 + (i / 2) * 8 + i % 2);
        }
        // Bans and the ragged last tile's ids past the vocabulary are tested only in the tiles
        // that hold them.
        bool check = v0 + kVocabTile > args.vocab;
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          check |= static_cast<uint64_t>(rule.choice_bans[b] - v0) < kVocabTile;
          check |= static_cast<uint64_t>(rule.stats_bans[b] - v0) < kVocabTile;
        }
        HeadPartial p = summarise<false>(l, [&id](int i) { return id[i]; }, rule, check, args.vocab);
        p = merge(p, shuffle_xor(p, 1), rule.k);
        p = merge(p, shuffle_xor(p, 2), rule.k);
        if (quad_col == 0) {
          HeadPartial& running = state[row * kWarpCols + warp_col];
          running = merge(running, p, rule.k);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int n = 0; n < 4; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][n][e] = 0.0f;
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();

  for (int r = threadIdx.x; r < row_valid; r += kThreads) {
    HeadPartial p = state[r * kWarpCols];
#pragma unroll
    for (int c = 1; c < kWarpCols; ++c) p = merge(p, state[r * kWarpCols + c], rules[r].k);
    args.partials[(row0 + r) * args.splits + split] = p;
  }
}

// ---- pass 2: partials combined per row ------------------------------------------------------

__global__ void head_combine_kernel(const HeadPartial* partials, int splits, int64_t rows,
                                    const HeadRowSampling* sampling, float* out, int64_t out_stride) {
  const int64_t row = int64_t{blockIdx.x} * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps leave together
  const RowRule rule = row_rule(sampling, row);
  HeadPartial p = empty_partial();
  for (int s = lane; s < splits; s += 32) p = merge(p, partials[row * splits + s], rule.k);
#pragma unroll
  for (int mask = 16; mask >= 1; mask /= 2) p = merge(p, shuffle_xor(p, mask), rule.k);
  if (lane != 0) return;
  const double scale = rule.stats_scale, top = __dmul_rn(static_cast<double>(p.top), scale);
  float* o = out + row * out_stride;
  o[kHeadChosen] = static_cast<float>(p.chosen);
  o[kHeadChosenLogit] = static_cast<float>(__dmul_rn(static_cast<double>(p.chosen_logit), scale));
  o[kHeadMax] = static_cast<float>(top);
  o[kHeadArgmax] = static_cast<float>(p.top_id);
  o[kHeadLogSumExp] = static_cast<float>(top + log(static_cast<double>(p.sum)));
  o[kHeadMeanLogit] = static_cast<float>(
      scale * (static_cast<double>(p.top) + static_cast<double>(p.centered) / static_cast<double>(p.sum)));
  o[kHeadSecond] = static_cast<float>(__dmul_rn(static_cast<double>(p.second), scale));
  o[kHeadSecondId] = static_cast<float>(p.second_id);
}

// ---- pass 1 through cuBLASLt: partials from a chunk of fp32 logits ---------------------------

// One warp per row of the chunk (its logits [chunk_first_id, chunk_first_id + width)), writing
// one partial per (row, chunk): partials [rows, chunks]. The warp reads the row's logits in
// passes of 128 ids, lane l the 4 ids at 4 l of each pass (a coalesced 512-byte load per
// instruction). A lane loads kBatchPasses passes before it folds them: its 16 logits (increasing
// ids) become one `summarise` and one `merge` into its running partial; then the warp merges its
// lanes in a fixed tree. A warp per whole chunk (4,096 LLaDA ids, 128 a lane) rather than per
// split spreads the tree's fixed cost over 8 times the logits, and 16-logit summaries quarter
// the merges (docs/design/cuda-kernels.md, LM head item 7). The order depends on the vocabulary
// only, never on the row count, so row chunks give the same bits.
constexpr int kPassIds = 128;
constexpr int kBatchPasses = 4;

// kGreedy: every row of the call is greedy (the caller knows it from the rows' sampling), so the
// kernel folds with summarise<true>, which needs no double scores and no noise, and the common
// batch (no banned id, inside the chunk) with a tournament: 64 registers instead of 96 (4 CTAs per
// SM instead of 2) and far fewer instructions per logit. The same bits as the general kernel.
// (Under ncu the general kernel ran at 25 % occupancy, 1.2 TB/s, issue-bound: r76.)
template <bool kGreedy>
__global__ void __launch_bounds__(256, kGreedy ? 4 : 2)
    partials_from_logits_kernel(const float* logits, int64_t logits_stride, int64_t rows, int64_t chunk_first_id,
                                int width, int chunk, int chunks, const HeadRowSampling* sampling,
                                HeadPartial* partials) {
  const int64_t row = int64_t{blockIdx.x} * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps leave together
  const RowRule rule = row_rule(sampling, row);
  if (kGreedy && rule.inv_temperature != 0.0) __trap();  // the caller's all_greedy was wrong
  const float* source = logits + row * logits_stride + 4 * lane;
  // One flag for the whole chunk: a banned id lies in it.
  bool check = false;
#pragma unroll
  for (int b = 0; b < 2; ++b) {
    check |= static_cast<uint64_t>(rule.choice_bans[b] - chunk_first_id) < static_cast<uint64_t>(width);
    check |= static_cast<uint64_t>(rule.stats_bans[b] - chunk_first_id) < static_cast<uint64_t>(width);
  }
  HeadPartial p = empty_partial();
  for (int first = 0; first * kPassIds < width; first += kBatchPasses) {
    constexpr int kCount = 4 * kBatchPasses;
    float l[kCount];
    // A batch that reaches past the chunk's end (only the vocabulary's last one can) reads its
    // missing ids as 0 and leaves them out as ids at or past the chunk's end.
    const bool whole = (first + kBatchPasses) * kPassIds <= width;
#pragma unroll
    for (int j = 0; j < kBatchPasses; ++j) {
      const int offset = (first + j) * kPassIds + 4 * lane;
      if (whole || offset + 4 <= width) {
        const float4 values = *reinterpret_cast<const float4*>(source + (first + j) * kPassIds);
        l[4 * j] = values.x, l[4 * j + 1] = values.y, l[4 * j + 2] = values.z, l[4 * j + 3] = values.w;
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) l[4 * j + i] = offset + i < width ? source[(first + j) * kPassIds + i] : 0.0f;
      }
    }
    // Logit i of the batch: id chunk_first_id + (first + i / 4) * kPassIds + 4 lane + i % 4.
    const int32_t id_base = static_cast<int32_t>(chunk_first_id + first * kPassIds + 4 * lane);
    auto id_of = [id_base](int i) { return id_base + (i / 4) * kPassIds + i % 4; };
    const int64_t end = chunk_first_id + width;
    if constexpr (kGreedy) {
      if (check || !whole) {
        p = merge(p, summarise<true>(l, id_of, rule, true, end), rule.k);
      } else {
        p = merge(p, summarise_greedy_unbanned(l, id_of, rule.k), rule.k);
      }
    } else {
      p = merge(p, summarise<false>(l, id_of, rule, check || !whole, end), rule.k);
    }
  }
#pragma unroll
  for (int mask = 16; mask >= 1; mask /= 2) p = merge(p, shuffle_xor(p, mask), rule.k);
  if (lane == 0) partials[row * chunks + chunk] = p;
}

// ---- launch ---------------------------------------------------------------------------------

struct SplitLayout {
  int tiles_per_split, splits;
};

// Depends on the vocabulary only, never on the row count: the summation order of a row must not
// change when the rows are chunked.
SplitLayout split_layout(int64_t vocab) {
  const int64_t tiles = (vocab + kVocabTile - 1) / kVocabTile;
  const int64_t per_split = (tiles + kMaxSplits - 1) / kMaxSplits;
  return {static_cast<int>(per_split), static_cast<int>((tiles + per_split - 1) / per_split)};
}

[[noreturn]] void invalid_arguments(const char* what) {
  std::fprintf(stderr, "mosaic: internal error: cuda::lm_head_sample: %s\n", what);
  std::abort();
}

template <int kMTiles>
void launch_partials(PartialsArgs args, cudaStream_t stream) {
  constexpr int kShared = PartialsShape<kMTiles>::kSharedBytes;
  static std::atomic<uint64_t> configured{0};
  raise_shared_limit(reinterpret_cast<const void*>(head_partials_kernel<kMTiles>), kShared,
                     configured);
  args.row_tiles = static_cast<int>((args.rows + PartialsShape<kMTiles>::kRowTile - 1) /
                                    PartialsShape<kMTiles>::kRowTile);
  const int64_t ctas = int64_t{args.row_tiles} * args.splits;
  head_partials_kernel<kMTiles><<<static_cast<unsigned>(ctas), kThreads, kShared, stream>>>(args);
  MOSAIC_CUDA_CHECK_LAUNCH();
}

}  // namespace

namespace {

constexpr int64_t kChunkTargetIds = 4096;  // logits per row per GEMM: 16 KiB of fp32 scratch a row

// Whole splits per chunk (a multiple of 128 ids, fixed by the vocabulary: 4,096 for LLaDA,
// 3,840 for Dream), so that the chunks, and with them the pinned GEMM widths, never depend on rows.
int chunk_splits(int64_t vocab) {
  const int64_t split_ids = int64_t{split_layout(vocab).tiles_per_split} * kVocabTile;
  return static_cast<int>(std::max<int64_t>(1, kChunkTargetIds / split_ids));
}

// Bytes of the partials [rows, splits] (the cuBLASLt path uses [rows, chunks], fewer), rounded
// up so that the logits after them are aligned.
// (The rounding adds at most 255 bytes; lm_head_scratch_bytes counts 256 for it.)
uint64_t partials_bytes(int64_t rows, int64_t vocab) {
  const uint64_t bytes = static_cast<uint64_t>(rows) * split_layout(vocab).splits * sizeof(HeadPartial);
  return (bytes + 255) / 256 * 256;
}

}  // namespace

int64_t lm_head_chunk_ids(int64_t vocab) {
  return int64_t{chunk_splits(vocab)} * split_layout(vocab).tiles_per_split * kVocabTile;
}

uint64_t lm_head_scratch_bytes(int64_t rows, int64_t vocab) {
  if (rows <= 0 || vocab <= 0) return 0;
  return static_cast<uint64_t>(rows) * split_layout(vocab).splits * sizeof(HeadPartial) + 256 +
         static_cast<uint64_t>(rows) * lm_head_chunk_ids(vocab) * sizeof(float);
}

void lm_head_sample(const LmHeadArgs& args, cudaStream_t stream) {
  if (args.rows <= 0) return;
  if (args.vocab <= 0 || args.vocab > 0x7fffffff) invalid_arguments("vocab must be in [1, 2^31)");
  if (args.hidden <= 0 || args.hidden % 8 != 0) invalid_arguments("hidden must be a multiple of 8");
  if (args.h_stride < args.hidden || args.h_stride % 8 != 0 ||
      reinterpret_cast<uintptr_t>(args.h) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(args.weight) % 16 != 0) {
    invalid_arguments("h and weight need 16-byte aligned rows (h_stride >= hidden, multiple of 8)");
  }
  if (args.out_stride < kHeadStatCount) invalid_arguments("out_stride < kHeadStatCount");
  if (args.scratch == nullptr || reinterpret_cast<uintptr_t>(args.scratch) % 8 != 0) {
    invalid_arguments("scratch must be 8-byte aligned, lm_head_scratch_bytes(rows, vocab) bytes");
  }

  const SplitLayout layout = split_layout(args.vocab);
  PartialsArgs partials;
  partials.h = static_cast<const __nv_bfloat16*>(args.h);
  partials.h_stride = args.h_stride;
  partials.weight = static_cast<const __nv_bfloat16*>(args.weight);
  partials.sampling = args.sampling;
  partials.partials = static_cast<HeadPartial*>(args.scratch);
  partials.rows = args.rows, partials.hidden = args.hidden, partials.vocab = args.vocab;
  partials.tiles_per_split = layout.tiles_per_split, partials.splits = layout.splits;
  int combine_splits = layout.splits;
  if (args.gemm != nullptr) {
    // Chunk by chunk: logits [rows, chunk] = h W[chunk]^T in fp32, folded into one partial per
    // (row, chunk); pass 2 then combines the row's chunks instead of its splits.
    const int64_t chunk_ids = lm_head_chunk_ids(args.vocab);
    const int chunks = static_cast<int>((args.vocab + chunk_ids - 1) / chunk_ids);
    float* logits = reinterpret_cast<float*>(static_cast<unsigned char*>(args.scratch) +
                                             partials_bytes(args.rows, args.vocab));
    for (int chunk = 0; chunk < chunks; ++chunk) {
      const int64_t first = chunk * chunk_ids, width = std::min(chunk_ids, args.vocab - first);
      GemmArgs gemm;
      gemm.m = args.rows, gemm.n = width, gemm.k = args.hidden;
      gemm.a = args.h, gemm.lda = args.h_stride;
      gemm.b = static_cast<const __nv_bfloat16*>(args.weight) + first * args.hidden, gemm.ldb = args.hidden;
      gemm.c = logits, gemm.ldc = chunk_ids, gemm.c_dtype = DType::f32;
      args.gemm->run(gemm, stream);
      constexpr int kWarps = 8;
      const auto fold = args.sampling == nullptr || args.all_greedy ? partials_from_logits_kernel<true>
                                                                    : partials_from_logits_kernel<false>;
      fold<<<static_cast<unsigned>((args.rows + kWarps - 1) / kWarps), kWarps * 32, 0, stream>>>(
          logits, chunk_ids, args.rows, first, static_cast<int>(width), chunk, chunks, args.sampling, partials.partials);
      MOSAIC_CUDA_CHECK_LAUNCH();
    }
    combine_splits = chunks;
  } else if (args.rows <= 32) {
    // The smallest row tile that holds the rows (no wasted MMA on small candidate sets); the
    // arithmetic of a row is the same for every tile size.
    launch_partials<1>(partials, stream);
  } else if (args.rows <= 64) {
    launch_partials<2>(partials, stream);
  } else {
    launch_partials<4>(partials, stream);
  }

  constexpr int kCombineWarps = 8;
  const int64_t blocks = (args.rows + kCombineWarps - 1) / kCombineWarps;
  head_combine_kernel<<<static_cast<unsigned>(blocks), kCombineWarps * 32, 0, stream>>>(
      partials.partials, combine_splits, args.rows, args.sampling, args.out, args.out_stride);
  MOSAIC_CUDA_CHECK_LAUNCH();
}

}  // namespace mosaic::cuda
