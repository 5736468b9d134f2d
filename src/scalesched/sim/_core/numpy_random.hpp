// numpy's PCG64 bit generator and the one Generator draw the compiled core's sampling
// policy makes, so that a run under ``p2c`` stays in C++ and draws the same numbers as
// ``np.random.default_rng`` would in Python.
//
// Mirrored from numpy's C sources (numpy/random/src/pcg64 and distributions.c; numpy 2.x):
// * PCG64 (XSL-RR 128/64): the state advances, then the output is the rotated xor of its
//   halves; a 32-bit draw takes the low half of a 64-bit one and keeps the high half for
//   the next (``has_uint32``, ``uinteger`` in ``bit_generator.state``);
// * ``Generator.choice(a, size=2, replace=False)``: Floyd's sampling with bounded draws
//   (Lemire's method on 32 bits: every population here is small), then the pair shuffled
//   with one more bounded draw.
// tests/sim/test_compiled_run.py checks the draws against numpy's over many states and
// population sizes, and whole p2c runs against the Python engine.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <utility>

namespace scalesched {

class Pcg64 {
  public:
    Pcg64() = default;
    Pcg64(std::uint64_t state_hi, std::uint64_t state_lo, std::uint64_t inc_hi,
          std::uint64_t inc_lo, bool has_uint32, std::uint32_t uinteger)
        : state_((static_cast<u128>(state_hi) << 64) | state_lo),
          inc_((static_cast<u128>(inc_hi) << 64) | inc_lo), has_uint32_(has_uint32),
          uinteger_(uinteger) {}

    std::uint64_t state_hi() const { return static_cast<std::uint64_t>(state_ >> 64); }
    std::uint64_t state_lo() const { return static_cast<std::uint64_t>(state_); }
    std::uint64_t inc_hi() const { return static_cast<std::uint64_t>(inc_ >> 64); }
    std::uint64_t inc_lo() const { return static_cast<std::uint64_t>(inc_); }
    bool has_uint32() const { return has_uint32_; }
    std::uint32_t uinteger() const { return uinteger_; }

    std::uint64_t next64() {
        state_ = state_ * MULTIPLIER + inc_;
        const std::uint64_t x = static_cast<std::uint64_t>(state_ >> 64) ^ static_cast<std::uint64_t>(state_);
        const unsigned rot = static_cast<unsigned>(state_ >> 122);
        return (x >> rot) | (x << ((64u - rot) & 63u));
    }

    // next_double: a uniform double in [0, 1) from the top 53 bits of one 64-bit draw
    // (Generator.random()).
    double next_double() {
        return static_cast<double>(next64() >> 11) * (1.0 / 9007199254740992.0);
    }

    std::uint32_t next32() {
        if (has_uint32_) {
            has_uint32_ = false;
            return uinteger_;
        }
        const std::uint64_t next = next64();
        has_uint32_ = true;
        uinteger_ = static_cast<std::uint32_t>(next >> 32);
        return static_cast<std::uint32_t>(next);
    }

    // random_bounded_uint64(bitgen, 0, rng, 0, 0): a draw in [0, rng], rng < 2^32.
    std::uint64_t bounded(std::uint64_t rng) {
        if (rng == 0) return 0;
        if (rng > 0xFFFFFFFFull) throw std::out_of_range("Pcg64.bounded: a population over 2^32");
        if (rng == 0xFFFFFFFFull) return next32();
        const std::uint64_t excl = rng + 1;  // Lemire's method, 32 bits
        std::uint64_t m = static_cast<std::uint64_t>(next32()) * excl;
        std::uint32_t left = static_cast<std::uint32_t>(m);
        if (left < excl) {
            const std::uint32_t threshold =
                static_cast<std::uint32_t>((0xFFFFFFFFull - rng) % excl);
            while (left < threshold) {
                m = static_cast<std::uint64_t>(next32()) * excl;
                left = static_cast<std::uint32_t>(m);
            }
        }
        return m >> 32;
    }

    // Generator.choice(population, size=2, replace=False): two distinct indices into a
    // population of ``n`` >= 2, in numpy's order.
    void choose_two(std::int64_t n, std::int64_t& first, std::int64_t& second) {
        const std::uint64_t size = static_cast<std::uint64_t>(n);
        std::uint64_t picked[2];
        for (std::uint64_t j = size - 2; j < size; ++j) {  // Floyd's algorithm
            const std::uint64_t value = bounded(j);
            const bool seen = j == size - 1 && value == picked[0];
            picked[j - (size - 2)] = seen ? j : value;
        }
        if (bounded(1) == 0) std::swap(picked[0], picked[1]);  // the shuffle of two
        first = static_cast<std::int64_t>(picked[0]);
        second = static_cast<std::int64_t>(picked[1]);
    }

  private:
    using u128 = unsigned __int128;
    static constexpr u128 MULTIPLIER =
        (static_cast<u128>(0x2360ED051FC65DA4ull) << 64) | 0x4385DF649FCCF645ull;

    u128 state_ = 0, inc_ = 0;
    bool has_uint32_ = false;
    std::uint32_t uinteger_ = 0;
};

}  // namespace scalesched
