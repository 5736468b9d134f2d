// TaskCosts: the per-workflow estimates of a run (the bounds fixed at arrival, HEFT's mean
// costs) computed in C++ straight off the workflow's Python objects. Python's own versions
// (kernel.records, kernel.ranks, ClusterTables.llm_class_times, AnyDeployment.llm_time)
// stay the specification; the arithmetic is in estimates.hpp. (The upward ranks stay in
// Python: they are dict lookups of edge sizes, no faster through the C API.)
//
// Why read the Python objects here instead of arrays: a workflow is realised once and
// estimated once or twice, so converting it to arrays first would cost what the estimate
// costs. The attribute reads go through the C API with interned names.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "estimates.hpp"

namespace scalesched {

namespace nb = nanobind;

// One engine's prefill_s: computed here for a plain EnginePerf (``plain``), else asked of
// the Python object once per token count (a ReplicaGroupPerf's all-reduce model stays in
// Python; the answer is its own double, memoised). The memo is shared by the copies of a
// run (a fork copies a pointer, not the table: it is a cache of a pure function), dense up
// to DENSE tokens (a hash lookup was 3% of an eft run at N = 256, measured with perf).
class Prefill {
  public:
    Prefill(nb::object engine, bool plain, PlainPrefill table)
        : engine_(std::move(engine)), plain_(plain), table_(std::move(table)),
          memo_(std::make_shared<Memo>()) {}

    double operator()(std::int64_t n) {
        if (plain_) return table_(n);
        Memo& memo = *memo_;
        if (n >= 0 && n < DENSE) {
            const std::size_t i = static_cast<std::size_t>(n);
            if (i < memo.dense.size() && memo.known[i]) return memo.dense[i];
            const double s = ask(n);
            if (i >= memo.dense.size()) {
                memo.dense.resize(i + 1, 0.0);
                memo.known.resize(i + 1, 0);
            }
            memo.dense[i] = s;
            memo.known[i] = 1;
            return s;
        }
        auto hit = memo.sparse.find(n);
        if (hit != memo.sparse.end()) return hit->second;
        const double s = ask(n);
        if (memo.sparse.size() >= MEMO_LIMIT) memo.sparse.clear();  // bounded, as in Python
        memo.sparse.emplace(n, s);
        return s;
    }

  private:
    static constexpr std::int64_t DENSE = std::int64_t{1} << 16;
    static constexpr std::size_t MEMO_LIMIT = std::size_t{1} << 16;
    struct Memo {
        std::vector<double> dense;
        std::vector<std::uint8_t> known;
        std::unordered_map<std::int64_t, double> sparse;
    };
    double ask(std::int64_t n) const { return nb::cast<double>(engine_.attr("prefill_s")(n)); }

    nb::object engine_;
    bool plain_;
    PlainPrefill table_;
    std::shared_ptr<Memo> memo_;
};

using PrefillSpec = std::tuple<nb::object, bool, std::vector<double>, std::int64_t, double, double>;
using ClassSpec = std::tuple<std::size_t, std::int64_t, double, double>;
using ConfigSpec = std::tuple<std::size_t, double, double>;

class TaskCosts {
  public:
    // prefills: (engine, plain, lin, max_n, slope, p2) per distinct engine; classes and
    // configs: per model (MODEL_NAMES order), ClusterTables.model_classes and
    // AnyDeployment.configs; speeds: the tables' max and mean core speed and the
    // any-deployment max.
    TaskCosts(const std::vector<PrefillSpec>& prefills,
              const std::vector<std::vector<ClassSpec>>& classes,
              const std::vector<std::vector<ConfigSpec>>& configs, nb::dict model_index,
              double max_core_speed, double mean_core_speed, double any_max_core_speed)
        : model_index_(std::move(model_index)), max_core_speed_(max_core_speed),
          mean_core_speed_(mean_core_speed), any_max_core_speed_(any_max_core_speed) {
        for (const auto& [eng, plain, lin, max_n, slope, p2] : prefills) {
            if (plain && (max_n < 0 || lin.size() != static_cast<std::size_t>(max_n) + 1))
                throw std::invalid_argument("prefill table: length must be max_n + 1");
            prefills_.emplace_back(eng, plain, PlainPrefill{lin, max_n, slope, p2});
        }
        if (classes.size() != configs.size())
            throw std::invalid_argument("classes and configs: one list per model each");
        for (const auto& per : classes) {
            classes_.emplace_back();
            for (const auto& [p, count, lin1, attn] : per)
                classes_.back().push_back(ClassCost{checked(p), count, lin1, attn});
        }
        for (const auto& per : configs) {
            configs_.emplace_back();
            for (const auto& [p, step, attn] : per)
                configs_.back().push_back(ConfigCost{checked(p), step, attn});
        }
        for (int i = 0; i < N_NAMES; ++i) names_[i] = nb::str(NAMES[i]);
        sum_ = nb::module_::import_("builtins").attr("sum");
    }

    // ClusterTables.fastest_llm_time (prefilled: -1 for None).
    double fastest_llm(std::int64_t m, std::int64_t prompt, std::int64_t output,
                       std::int64_t prefilled) {
        const auto& cls = model(classes_, m);
        const std::int64_t ctx = prompt + floor_div(output, 2);
        const std::int64_t pre = prefilled < 0 ? prompt : prefilled;
        double best = INF;
        for (std::size_t k = 0; k < cls.size(); ++k) {
            const double t = class_time(prefills_[cls[k].prefill](pre), output, ctx, cls[k]);
            if (k == 0) best = t; else keep_min(best, t);
        }
        return best;
    }

    // ClusterTables.mean_llm_time: the float sum is Python's own builtin ``sum`` (its
    // algorithm changed in 3.12), over the same products in the same order.
    double mean_llm(std::int64_t m, std::int64_t prompt, std::int64_t output) {
        const auto& cls = model(classes_, m);
        const std::int64_t ctx = prompt + floor_div(output, 2);
        std::int64_t total = 0;
        nb::list products;
        for (const ClassCost& c : cls) {
            total += c.count;
            const double t = class_time(prefills_[c.prefill](prompt), output, ctx, c);
            products.append(nb::float_(t * static_cast<double>(c.count)));
        }
        if (!total) return INF;
        return nb::cast<double>(sum_(products)) / static_cast<double>(total);
    }

    // AnyDeployment.llm_time (prefilled: -1 for None).
    double any_llm(std::int64_t m, std::int64_t prompt, std::int64_t output,
                   std::int64_t prefilled) {
        const auto& cfg = model(configs_, m);
        const std::int64_t ctx = prompt + floor_div(output, 2);
        const std::int64_t pre = prefilled < 0 ? prompt : prefilled;
        double best = INF;
        for (std::size_t k = 0; k < cfg.size(); ++k) {
            const double t = config_time(prefills_[cfg[k].prefill](pre), output, ctx, cfg[k]);
            if (k == 0) best = t; else keep_min(best, t);
        }
        return best;
    }

    // (lower_bound, any_deployment_lower_bound) of a workflow: both critical paths in one
    // pass, each task alone on its fastest server / fastest configuration anywhere.
    std::pair<double, double> bounds(nb::handle wf) {
        nb::object tasks = attr(wf, WF_TASKS), parents = attr(wf, WF_PARENTS);
        const Py_ssize_t n = PySequence_Size(tasks.ptr());
        if (n < 0) throw nb::python_error();
        std::vector<double> fin(static_cast<std::size_t>(n)), any(fin);
        for (Py_ssize_t i = 0; i < n; ++i) {
            nb::object task = item(tasks, i);
            double own, anywhere;
            alone_times(task, own, anywhere);
            double start = 0.0, start_any = 0.0;
            bool first = true;
            nb::object ps = item(parents, i);
            for (nb::handle p : ps) {
                const std::size_t k = checked_index(p, n);
                if (first) {
                    start = fin[k], start_any = any[k], first = false;
                } else {
                    keep_max(start, fin[k]), keep_max(start_any, any[k]);
                }
            }
            fin[static_cast<std::size_t>(i)] = start + own;
            any[static_cast<std::size_t>(i)] = start_any + anywhere;
        }
        return {path_end(fin), path_end(any)};
    }

    // kernel.ranks.mean_task_costs.
    nb::list mean_costs(nb::handle wf) {
        nb::object tasks = attr(wf, WF_TASKS);
        nb::list out;
        for (nb::handle task : tasks) {
            std::int64_t m;
            if (is_llm(task, m)) {
                out.append(nb::float_(mean_llm(m, int_attr(task, T_PROMPT),
                                               int_attr(task, T_OUTPUT_EST))));
            } else {
                out.append(nb::float_(float_attr(task, T_CPU) / mean_core_speed_ +
                                      float_attr(task, T_EXT_EST)));
            }
        }
        return out;
    }

  private:
    enum Name {
        WF_TASKS, WF_PARENTS, T_KIND, T_MODEL, T_PROMPT, T_OUTPUT, T_OUTPUT_EST, T_CPU, T_EXT,
        T_EXT_EST, LLM, N_NAMES
    };
    static constexpr const char* NAMES[N_NAMES] = {
        "tasks",         "parents",           "kind",     "model",       "prompt_tokens",
        "output_tokens", "output_tokens_est", "cpu_work", "ext_latency", "ext_latency_est",
        "llm"};

    std::size_t checked(std::size_t p) const {
        if (p >= prefills_.size()) throw std::out_of_range("prefill index out of range");
        return p;
    }

    template <typename T>
    const std::vector<T>& model(const std::vector<std::vector<T>>& per, std::int64_t m) const {
        if (m < 0 || m >= static_cast<std::int64_t>(per.size()))
            throw std::out_of_range("model out of range");
        return per[static_cast<std::size_t>(m)];
    }

    // alone_fastest_s and alone_anywhere_s of one task (kernel.records).
    void alone_times(nb::handle task, double& own, double& anywhere) {
        std::int64_t m;
        if (is_llm(task, m)) {
            const std::int64_t prompt = int_attr(task, T_PROMPT);
            std::int64_t output = int_attr(task, T_OUTPUT);
            output = output > 1 ? output : 1;  // max(1, output)
            own = fastest_llm(m, prompt, output, -1);
            anywhere = any_llm(m, prompt, output, -1);
            return;
        }
        const double cpu = float_attr(task, T_CPU), ext = float_attr(task, T_EXT);
        own = cpu / max_core_speed_ + ext;
        anywhere = cpu / any_max_core_speed_ + ext;
    }

    // ``max(finish, default=0.0)``.
    static double path_end(const std::vector<double>& fin) {
        if (fin.empty()) return 0.0;
        double best = fin[0];
        for (double f : fin) keep_max(best, f);
        return best;
    }

    // ``task.kind == "llm" and task.model``; m: MODEL_INDEX[task.model].
    bool is_llm(nb::handle task, std::int64_t& m) {
        nb::object kind = attr(task, T_KIND);
        const int eq = PyObject_RichCompareBool(kind.ptr(), names_[LLM].ptr(), Py_EQ);
        if (eq < 0) throw nb::python_error();
        if (!eq) return false;
        nb::object name = attr(task, T_MODEL);
        const int truthy = PyObject_IsTrue(name.ptr());
        if (truthy < 0) throw nb::python_error();
        if (!truthy) return false;
        PyObject* idx = PyDict_GetItemWithError(model_index_.ptr(), name.ptr());
        if (!idx) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, name.ptr());
            throw nb::python_error();
        }
        m = to_int(idx);
        return true;
    }

    nb::object attr(nb::handle obj, Name name) const {
        PyObject* got = PyObject_GetAttr(obj.ptr(), names_[name].ptr());
        if (!got) throw nb::python_error();
        return nb::steal(got);
    }
    std::int64_t int_attr(nb::handle obj, Name name) const { return to_int(attr(obj, name)); }
    double float_attr(nb::handle obj, Name name) const { return to_double(attr(obj, name)); }

    static nb::object item(nb::handle seq, Py_ssize_t i) {
        PyObject* got = PySequence_GetItem(seq.ptr(), i);
        if (!got) throw nb::python_error();
        return nb::steal(got);
    }
    static std::int64_t to_int(nb::handle h) {
        const long long v = PyLong_AsLongLong(h.ptr());
        if (v == -1 && PyErr_Occurred()) throw nb::python_error();
        return v;
    }
    static double to_double(nb::handle h) {
        const double v = PyFloat_AsDouble(h.ptr());
        if (v == -1.0 && PyErr_Occurred()) throw nb::python_error();
        return v;
    }
    static std::size_t checked_index(nb::handle h, Py_ssize_t n) {
        const std::int64_t k = to_int(h);
        if (k < 0 || k >= n) throw std::out_of_range("task index out of range");
        return static_cast<std::size_t>(k);
    }

    std::vector<Prefill> prefills_;
    std::vector<std::vector<ClassCost>> classes_;
    std::vector<std::vector<ConfigCost>> configs_;
    nb::dict model_index_;
    double max_core_speed_, mean_core_speed_, any_max_core_speed_;
    nb::str names_[N_NAMES];
    nb::object sum_;
};

}  // namespace scalesched
