// policies.soft_eft.sample_near_best in C++: a feasible server drawn with weight
// exp(-sharpness * log1p(relative excess of its finish over the best)), numpy's operations
// in their order, so that the draw is numpy's to the bit: relative_excess over every server,
// numpy's own ``log1p`` and ``exp`` ufuncs (called through Python: on AVX-512 numpy uses
// SIMD kernels, SVML's or its own, that may differ from libm in the last bit), numpy's
// pairwise sum (numpy_sum.hpp), and Generator.choice(size, p=weights / sum)'s draw: the
// cumulative sum divided by its last value, one next_double, searchsorted to the right.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "numpy_random.hpp"
#include "numpy_sum.hpp"

namespace scalesched {

namespace nb = nanobind;

class SoftSampler {
public:
    SoftSampler() = default;

    // ``sharpness`` (SHARPNESS), numpy's ``log1p`` and ``exp``, and two float64 arrays of
    // ``n`` values for them to work in place on (scratch; a copy of the sampler shares it).
    SoftSampler(double sharpness, nb::object log1p, nb::object exp, nb::object rel,
                nb::object weights, std::int64_t n)
        : sharpness_(sharpness), log1p_(std::move(log1p)), exp_(std::move(exp)),
          rel_obj_(std::move(rel)), w_obj_(std::move(weights)),
          views_(static_cast<std::size_t>(n) + 1, nb::none()) {
        using Scratch = nb::ndarray<double, nb::ndim<1>, nb::c_contig>;
        Scratch r = nb::cast<Scratch>(rel_obj_), w = nb::cast<Scratch>(w_obj_);
        if (r.shape(0) != static_cast<std::size_t>(n) || w.shape(0) != static_cast<std::size_t>(n))
            throw std::invalid_argument("soft_eft: the scratch arrays need N values");
        rel_ = r.data();
        w_ = w.data();
    }

    bool ready() const { return rel_ != nullptr; }

    // Choice's normalised cumulative weights over the feasible servers (``feasible``, in
    // order, filled here): left in ``cdf()``, their count returned.
    std::size_t weigh(const double* finish, const std::uint8_t* mask, std::int64_t n,
                      std::vector<std::int64_t>& feasible) {
        feasible.clear();
        double best = 0.0;  // values[mask].min(): NaN propagates
        for (std::int64_t i = 0; i < n; ++i) {
            if (!mask[i]) continue;
            if (feasible.empty() || finish[i] < best || std::isnan(finish[i])) best = finish[i];
            feasible.push_back(i);
        }
        if (feasible.empty()) throw std::runtime_error("soft_eft: no feasible server");
        const double denom = best + 1e-3;
        for (std::int64_t i = 0; i < n; ++i) rel_[i] = (finish[i] - best) / denom;
        log1p_(rel_obj_, rel_obj_);
        const std::size_t f = feasible.size();
        double* w = w_;
        for (std::size_t j = 0; j < f; ++j) w[j] = -sharpness_ * rel_[feasible[j]];
        nb::object& view = views_[f];
        if (view.is_none()) view = w_obj_[nb::slice(nb::int_(0), nb::int_(f), nb::none())];
        exp_(view, view);
        const double total = numpy_pairwise_sum(w, static_cast<std::int64_t>(f));
        for (std::size_t j = 0; j < f; ++j) w[j] = w[j] / total;  // p
        for (std::size_t j = 1; j < f; ++j) w[j] = w[j - 1] + w[j];  // p.cumsum()
        const double last = w[f - 1];
        for (std::size_t j = 0; j < f; ++j) w[j] = w[j] / last;
        return f;
    }

    const double* cdf() const { return w_; }

    // The draw: the index into the feasible servers of one next_double.
    std::size_t draw(std::size_t f, Pcg64& rng) const {
        const double u = rng.next_double();
        const std::size_t at = static_cast<std::size_t>(std::upper_bound(w_, w_ + f, u) - w_);
        if (at >= f) throw std::runtime_error("soft_eft: probabilities that are not finite");
        return at;
    }

private:
    double sharpness_ = 0.0;
    nb::object log1p_, exp_, rel_obj_, w_obj_;
    double* rel_ = nullptr;
    double* w_ = nullptr;
    std::vector<nb::object> views_;  // w_obj_[:f], made once per f
};

}  // namespace scalesched
