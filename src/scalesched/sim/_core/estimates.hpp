// The contention-free time estimates of a task, as plain C++: what the ledger computes for
// every workflow that arrives (its lower bound and any-deployment bound, kernel.records)
// and for every workflow whose ranks are asked for (HEFT's mean costs, kernel.ranks).
//
// Bit for bit with the Python code: every expression keeps Python's operation order
// (``a + b * (c + d * e)`` rounds as written; the file is compiled with -ffp-contract=off),
// ints meet floats as a conversion to double (what Python's int-float arithmetic does),
// ``//`` is floor division, and min / max keep the first of equal values the way the
// builtins do (a later item replaces only when strictly smaller / larger).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace scalesched {

constexpr double INF = std::numeric_limits<double>::infinity();

// Python's ``a // b`` on ints (b > 0): rounds toward minus infinity, unlike C++'s ``/``.
inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    std::int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

// EnginePerf.prefill_s: the linear table (interpolated per token up to max_n, extended by
// its last slope beyond) plus the quadratic attention term, ``lin + p2 * n * n``.
struct PlainPrefill {
    std::vector<double> lin;  // EnginePerf._lin, index = tokens
    std::int64_t max_n = 0;   // EnginePerf._lin_max_n
    double slope = 0.0;       // EnginePerf._lin_slope
    double p2 = 0.0;          // EnginePerf.prefill_attn_s_per_token2

    double operator()(std::int64_t n) const {
        if (n <= 0) return 0.0;
        const double l = n <= max_n ? lin[static_cast<std::size_t>(n)]
                                    : lin.back() + slope * static_cast<double>(n - max_n);
        return l + p2 * static_cast<double>(n) * static_cast<double>(n);
    }
};

// One engine class of a model as ClusterTables.model_classes lists it: its prefill (an
// index into the caller's prefill functions), its server count, its batch-1 step and its
// attention coefficient.
struct ClassCost {
    std::size_t prefill;
    std::int64_t count;
    double lin1;
    double attn;
};

// One configuration of AnyDeployment.configs: its prefill, step alone, attention coef.
struct ConfigCost {
    std::size_t prefill;
    double step_s;
    double attn;
};

// ClusterTables.llm_class_times's seconds of one class: ``pre + output * (lin1 + attn *
// ctx)`` with ``ctx = prompt + output // 2``.
inline double class_time(double pre, std::int64_t output, std::int64_t ctx, const ClassCost& c) {
    return pre + static_cast<double>(output) * (c.lin1 + c.attn * static_cast<double>(ctx));
}

// AnyDeployment.llm_time's seconds of one configuration (note: step + attn * ctx, in that
// order, as anywhere.py writes it).
inline double config_time(double pre, std::int64_t output, std::int64_t ctx,
                          const ConfigCost& c) {
    return pre + static_cast<double>(output) * (c.step_s + c.attn * static_cast<double>(ctx));
}

// The builtins' min / max over a running value: replace only when strictly better.
inline void keep_min(double& best, double x) {
    if (x < best) best = x;
}
inline void keep_max(double& best, double x) {
    if (x > best) best = x;
}

}  // namespace scalesched
