// TokenHead: the output length ``tail`` costs an LLM call at, computed in C++ from the
// shipped predictor's tokens head (scalesched.predict: features.task_inputs, model.Head,
// model.monotone, lengths.OutputLengths.tokens) for a whole run's workflows, so that a
// run on the compiled core does not call numpy some 20 µs per LLM call.
//
// Why guarded, not bit for bit: numpy's matrix product goes through BLAS, whose summation
// order depends on the library build and the CPU, so no C++ loop can promise numpy's
// doubles. What a run reads is the rounded integer, max(1, round(value)). Both sides
// compute the same function of the same inputs in double precision, a few hundred
// operations deep, so they differ by a few ulps (relative 4e-15 at most, measured on the
// shipped head and random ones; tests/sim/test_token_head.py allows 1e-13). The C++ answer is used only where the
// value lies farther than ``tolerance`` (relative; 1e-9 by default) from a rounding
// boundary (an integer + 0.5), where both sides round to the same integer; anywhere else
// (and for a non-finite or huge value) the caller asks Python, which then decides.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace scalesched {

namespace nb = nanobind;

class TokenHead {
  public:
    using Matrix = nb::ndarray<const double, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
    using Vector = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

    // weights (in, out) and biases (out,) per layer, ReLU between them; the inputs'
    // standardisation; the quantile column read (QUANTILES.index(level)); the one-hot
    // name tables (MODEL_INDEX, ROLE_NAMES and PATTERN_NAMES as name -> index).
    TokenHead(const std::vector<Matrix>& weights, const std::vector<Vector>& biases,
              Vector x_mean, Vector x_std, std::int64_t level, nb::dict models, nb::dict roles,
              std::int64_t n_models, nb::dict patterns, double tolerance)
        : level_(level), models_(std::move(models)), roles_(std::move(roles)),
          patterns_(std::move(patterns)), n_models_(n_models), tolerance_(tolerance) {
        n_roles_ = static_cast<std::int64_t>(nb::len(roles_));
        n_patterns_ = static_cast<std::int64_t>(nb::len(patterns_));
        n_inputs_ = 1 + n_models_ + n_roles_ + 1 + n_patterns_ + 1 + 5;
        if (weights.empty() || weights.size() != biases.size())
            throw std::invalid_argument("token head: one bias per weight matrix");
        std::int64_t width = n_inputs_;
        for (std::size_t l = 0; l < weights.size(); ++l) {
            const Matrix& w = weights[l];
            const std::int64_t rows = static_cast<std::int64_t>(w.shape(0));
            const std::int64_t cols = static_cast<std::int64_t>(w.shape(1));
            if (rows != width || static_cast<std::int64_t>(biases[l].shape(0)) != cols)
                throw std::invalid_argument("token head: layer shapes do not chain");
            w_.emplace_back(w.data(), w.data() + rows * cols);
            b_.emplace_back(biases[l].data(), biases[l].data() + cols);
            widths_.push_back(cols);
            width = cols;
        }
        if (level_ < 0 || level_ >= width)
            throw std::invalid_argument("token head: level out of the outputs");
        if (static_cast<std::int64_t>(x_mean.shape(0)) != n_inputs_ ||
            static_cast<std::int64_t>(x_std.shape(0)) != n_inputs_)
            throw std::invalid_argument("token head: one scaling per input");
        mean_.assign(x_mean.data(), x_mean.data() + n_inputs_);
        std_.assign(x_std.data(), x_std.data() + n_inputs_);
    }

    // The output length of each task of ``wf`` (0 for a tool), or nothing when one of its
    // LLM calls lies within the tolerance of a rounding boundary (ask Python then).
    // Remembered per workflow object (a rollout takes the same jobs in flight over at
    // every decision; the workflow is held, so its address stays its own).
    std::optional<std::vector<std::int64_t>> workflow_lengths(nb::handle wf) const {
        auto hit = memo_.find(wf.ptr());
        if (hit != memo_.end()) return hit->second;
        std::optional<std::vector<std::int64_t>> got = compute_lengths(wf);
        if (got) {
            if (memo_.size() >= MEMO_LIMIT) {
                memo_.clear();
                held_.clear();
            }
            held_.push_back(nb::borrow(wf));
            memo_.emplace(wf.ptr(), *got);
        }
        return got;
    }

    // The unrounded length (OutputLengths.tokens before max(1, round(.))) of each LLM call
    // of ``wf`` (NaN for a tool): what the tests hold against numpy.
    std::vector<double> workflow_values(nb::handle wf) const {
        std::optional<std::vector<double>> values = values_of(wf, NAN);
        if (!values) throw std::invalid_argument("token head: unknown model of a task");
        return *values;
    }

  private:
    std::optional<std::vector<std::int64_t>> compute_lengths(nb::handle wf) const {
        std::optional<std::vector<double>> values = values_of(wf, TOOL);
        if (!values) return std::nullopt;  // an unknown model: Python names the error
        std::vector<std::int64_t> out;
        out.reserve(values->size());
        for (double v : *values) {
            if (v == TOOL) {
                out.push_back(0);
                continue;
            }
            const std::optional<std::int64_t> tokens = rounded(v);
            if (!tokens) return std::nullopt;
            out.push_back(*tokens);
        }
        return out;
    }

    // Each task's unrounded length (``tool`` for a tool), read off the Python objects;
    // nothing when a call's model is unknown.
    static constexpr double TOOL = -1.0;  // never a length: those are exp(.) >= 0 or NaN
    std::optional<std::vector<double>> values_of(nb::handle wf, double tool) const {
        nb::object tasks = wf.attr(names_.tasks);
        const std::int64_t p = index_of(patterns_, wf.attr(names_.pattern), n_patterns_);
        std::vector<double> out;
        out.reserve(nb::len(tasks));
        for (nb::handle tk : tasks) {
            if (!tk.attr(names_.kind).equal(llm_)) {
                out.push_back(tool);
                continue;
            }
            nb::object name = tk.attr(names_.model);
            nb::handle key = name.is_none() ? nb::handle(empty_) : nb::handle(name);
            if (!models_.contains(key)) return std::nullopt;
            out.push_back(value(Inputs{nb::cast<std::int64_t>(models_[key]),
                                       index_of(roles_, tk.attr(names_.role), n_roles_), p,
                                       nb::cast<std::int64_t>(tk.attr(names_.prompt_tokens)),
                                       nb::cast<std::int64_t>(tk.attr(names_.output_tokens_est)),
                                       nb::cast<double>(tk.attr(names_.difficulty_hint)),
                                       nb::cast<double>(tk.attr(names_.cpu_work)),
                                       nb::cast<double>(tk.attr(names_.ext_latency_est))}));
        }
        return out;
    }

  private:
    struct Inputs {
        std::int64_t model, role, pattern, prompt, out_est;
        double hint, cpu_work, ext_est;
    };

    static std::int64_t index_of(const nb::dict& table, nb::handle name, std::int64_t other) {
        if (name.is_none() || !table.contains(name)) return other;
        return nb::cast<std::int64_t>(table[name]);
    }

    // task_inputs, the head, monotone and the baseline, in that order.
    double value(const Inputs& in) const {
        thread_local std::vector<double> x, h;
        x.assign(static_cast<std::size_t>(n_inputs_), 0.0);
        x[0] = 1.0;
        std::int64_t i = 1;
        if (in.model >= 0 && in.model < n_models_) x[static_cast<std::size_t>(i + in.model)] = 1.0;
        i += n_models_;
        x[static_cast<std::size_t>(i + in.role)] = 1.0;
        i += n_roles_ + 1;
        x[static_cast<std::size_t>(i + in.pattern)] = 1.0;
        i += n_patterns_ + 1;
        const auto at = [&](std::int64_t k) -> double& { return x[static_cast<std::size_t>(k)]; };
        at(i) = std::log1p(static_cast<double>(in.prompt)) / 8;
        at(i + 1) = std::log1p(static_cast<double>(in.out_est)) / 8;
        at(i + 2) = in.hint;
        at(i + 3) = std::log1p(in.cpu_work);
        at(i + 4) = std::log1p(in.ext_est);
        for (std::int64_t k = 0; k < n_inputs_; ++k)
            at(k) = (at(k) - mean_[static_cast<std::size_t>(k)]) / std_[static_cast<std::size_t>(k)];
        const std::size_t last = w_.size() - 1;
        for (std::size_t l = 0; l < w_.size(); ++l) {
            const std::size_t cols = static_cast<std::size_t>(widths_[l]);
            const std::size_t rows = x.size();
            h.assign(cols, 0.0);
            const double* w = w_[l].data();
            for (std::size_t r = 0; r < rows; ++r) {
                const double xr = x[r];
                const double* row = w + r * cols;
                for (std::size_t c = 0; c < cols; ++c) h[c] += xr * row[c];
            }
            for (std::size_t c = 0; c < cols; ++c) {
                h[c] += b_[l][c];
                if (l < last && !(h[c] >= 0.0) && !std::isnan(h[c])) h[c] = 0.0;  // np.maximum
            }
            x.swap(h);
        }
        // monotone: the first output, then cumulative softplus (np.logaddexp(0, .)) steps
        double q = x[0];
        double steps = 0.0;
        for (std::int64_t k = 1; k <= level_; ++k) {
            const double r = x[static_cast<std::size_t>(k)];
            steps += r > 0.0 ? r + std::log1p(std::exp(-r)) : std::log1p(std::exp(r));
        }
        if (level_ > 0) q = x[0] + steps;
        const double baseline = std::log(static_cast<double>(in.out_est > 1 ? in.out_est : 1));
        return std::exp(q + baseline);
    }

    // max(1, round(v)) where every value within the tolerance rounds the same way.
    std::optional<std::int64_t> rounded(double v) const {
        if (!std::isfinite(v) || v > 1e15 || v < -1e15) return std::nullopt;
        const double boundary = std::floor(v) + 0.5;
        if (std::fabs(v - boundary) <= tolerance_ * std::fmax(1.0, std::fabs(v))) return std::nullopt;
        const std::int64_t r = static_cast<std::int64_t>(std::floor(v + 0.5));
        return r > 1 ? r : 1;
    }

    std::vector<std::vector<double>> w_, b_;
    std::vector<std::int64_t> widths_;
    std::vector<double> mean_, std_;
    std::int64_t level_;
    nb::dict models_, roles_, patterns_;
    std::int64_t n_models_, n_roles_ = 0, n_patterns_ = 0, n_inputs_ = 0;
    double tolerance_;
    // Workflows remembered before starting afresh: more than a rollout's jobs in flight,
    // few enough that a long streamed run does not keep many workflows alive for it.
    static constexpr std::size_t MEMO_LIMIT = 4096;
    mutable std::unordered_map<PyObject*, std::vector<std::int64_t>> memo_;
    mutable std::vector<nb::object> held_;  // the workflows remembered, kept alive
    nb::str llm_ = nb::str("llm"), empty_ = nb::str("");
    struct Names {
        nb::str tasks{"tasks"}, pattern{"pattern"}, kind{"kind"}, model{"model"};
        nb::str role{"role"}, prompt_tokens{"prompt_tokens"};
        nb::str output_tokens_est{"output_tokens_est"}, difficulty_hint{"difficulty_hint"};
        nb::str cpu_work{"cpu_work"}, ext_latency_est{"ext_latency_est"};
    } names_;
};

}  // namespace scalesched
