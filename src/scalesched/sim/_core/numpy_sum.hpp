// numpy's sum of a contiguous float64 array (``np.add.reduce``): its pairwise summation,
// eight accumulators over blocks of up to 128 values, halves above that (numpy's
// ``pairwise_sum`` in loops_utils.h.src). The same order gives the same double, so a sum
// that decides a choice (soft_eft's probabilities) is numpy's to the bit; checked against
// ``np.sum`` by tests/sim/test_compiled_run.py.
#pragma once

#include <cstdint>

namespace scalesched {

inline double numpy_pairwise_sum(const double* a, std::int64_t n) {
    if (n < 8) {
        double res = 0.0;
        for (std::int64_t i = 0; i < n; ++i) res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; ++j) r[j] = a[j];
        std::int64_t i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; ++j) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i) res += a[i];
        return res;
    }
    std::int64_t half = n / 2;
    half -= half % 8;
    return numpy_pairwise_sum(a, half) + numpy_pairwise_sum(a + half, n - half);
}

}  // namespace scalesched
