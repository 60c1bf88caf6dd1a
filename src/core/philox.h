// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
// a counter-based generator. The same (key, counter) always gives the same four words, so noise
// can be addressed by (seed, step, position, vocab index) and does not depend on how work is
// batched, chunked or threaded. docs/design/rng.md defines how Mosaic builds counters.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace mosaic {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

constexpr PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t product0 = uint64_t{kMul0} * counter[0];
    const uint64_t product1 = uint64_t{kMul1} * counter[2];
    counter = {static_cast<uint32_t>(product1 >> 32) ^ counter[1] ^ key[0],
               static_cast<uint32_t>(product1),
               static_cast<uint32_t>(product0 >> 32) ^ counter[3] ^ key[1],
               static_cast<uint32_t>(product0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return counter;
}

constexpr PhiloxKey philox_key(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

// Uniform in [0, 1) with 24 random bits: exactly representable in fp32.
constexpr float uniform_f32(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1.0p-24f; }

// Uniform in [0, 1) with 53 random bits from two words.
constexpr double uniform_f64(uint32_t high, uint32_t low) {
  const uint64_t bits = (uint64_t{high} << 21) ^ (low >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * 0x1.0p-53;
}

// Uniform in the open interval (0, 1): 53 random bits plus a half (docs/design/rng.md).
constexpr double uniform_open_f64(uint32_t w0, uint32_t w1) {
  const uint64_t bits = ((uint64_t{w0} << 21) ^ (w1 >> 11)) & ((uint64_t{1} << 53) - 1);
  return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

// What each random number is for: the last counter word, so no two uses share a number.
enum class RngStream : uint32_t {
  gumbel_token = 1,       // (vocab id, position, step): token choice at temperature > 0
  random_confidence = 2,  // (0, position, step): LLaDA remasking="random"
  transfer = 3,           // (0, position, step): Dream alg="origin"
  position_gumbel = 4,    // (0, position, step): Dream alg_temp > 0
};

// The uniform of docs/design/rng.md for one address.
inline double rng_uniform(uint64_t seed, RngStream stream, uint32_t index, uint32_t position,
                          uint32_t step) {
  const PhiloxCounter w =
      philox4x32_10({index, position, step, static_cast<uint32_t>(stream)}, philox_key(seed));
  return uniform_open_f64(w[0], w[1]);
}

// Gumbel(0, 1) noise for one address: -log(-log(u)).
inline double rng_gumbel(uint64_t seed, RngStream stream, uint32_t index, uint32_t position,
                         uint32_t step) {
  return -std::log(-std::log(rng_uniform(seed, stream, index, position, step)));
}

// Standard normal from two words (Box-Muller, cosine branch); u1 is kept away from 0.
inline float normal_f32(uint32_t bits1, uint32_t bits2) {
  const float u1 = (static_cast<float>(bits1 >> 8) + 0.5f) * 0x1.0p-24f;
  const float u2 = uniform_f32(bits2);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795864769f * u2);
}

}  // namespace mosaic
