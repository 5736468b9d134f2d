// The per-server estimates of one placement decision (scalesched.decision.features,
// make_decision and transfer_times), as plain C++ over raw arrays: no Python here, so a
// later compiled event core can call it directly.
//
// Equivalence is bit for bit with the numpy code, which is why every expression below
// keeps numpy's operation order and types: int64 stays int64 where numpy keeps it, int64
// meets float64 as a conversion to double (numpy's result type), np.maximum and
// np.minimum propagate NaN the way numpy's loops do, and the file is compiled without
// -ffast-math and with -ffp-contract=off (no fused multiply-add: a*b+c rounds twice, as
// in numpy). Each function here mirrors one numpy statement of make_decision; keep them in
// step with features.py (tests/sim/test_compiled_core.py checks the arrays byte for byte).
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace scalesched {

// np.maximum / np.minimum on doubles: NaN wins, else the larger (smaller) one; on equal
// values the first operand, as numpy's scalar loop returns it.
inline double np_max(double a, double b) { return (a >= b || std::isnan(a)) ? a : b; }
inline double np_min(double a, double b) { return (a <= b || std::isnan(a)) ? a : b; }

// A column of a 2-D row-major array of shape (n, width), or a 1-D array (width 1).
template <typename T>
struct Column {
    const T* data;
    std::int64_t stride;  // in elements
    const T& operator[](std::int64_t i) const { return data[i * stride]; }
};

// The static per-model columns and per-class tables a decision reads (ClusterTables):
// pointers into the live numpy arrays, so an in-place change of the decode tables
// (eval.drift) shows through as it does to the Python build.
struct ModelColumns {
    const std::uint8_t* mask;  // (n,) bool
    bool all_feasible;         // masked_out is None
    const std::int64_t* kk;    // (n,) engine class (0 where infeasible)
    const std::int64_t* base;  // (n,) kk * row width of the decode tables
    const double* load;        // (n,) seconds to load the model
    Column<double> tp_f;       // (n,) GPUs the engine holds, when tp is float64
    Column<std::int64_t> tp_i; // ... when it is int64 (exactly one of the two is set)
};

struct StaticTables {
    std::int64_t n;
    std::int64_t n_classes;
    const double* decode_attn;       // (n_classes,)
    const double* lin_flat;          // (n_classes * width,)
    const double* inc_flat;          // (n_classes * width,)
    std::int64_t flat_size;
    const std::int64_t* kv_capacity; // (n_classes,)
    const std::int64_t* max_batch;   // (n_classes,)
    const double* nic;               // (n,) bytes/s
    double latency_s;
    const double* cores;             // (n,)
    const double* core_speed;        // (n,)
    // The distinct NIC bandwidths and each server's (optional: transfer_times then
    // divides once per distinct bandwidth, not per server; the same doubles).
    const std::int64_t* nic_kind = nullptr;  // (n,) index into nic_kinds
    const double* nic_kinds = nullptr;
    std::int64_t n_nic_kinds = 0;
    // The same for the core speeds (tool_decision divides once per distinct speed).
    const std::int64_t* speed_kind = nullptr;  // (n,) index into speed_kinds
    const double* speed_kinds = nullptr;
    std::int64_t n_speed_kinds = 0;
};

// The dynamic per-server state (ClusterStateView) for model m.
struct LlmState {
    Column<std::int8_t> state;
    Column<double> batch, ctx, ready_at;
    const double* free_gpus;
    const double* idle_gpus;
    const double* est_work;
    const double* n_assigned;
    double now;
};

// Output rows of one decision, each (n,) float64.
struct Outputs {
    double* transfer;  // written only when compute_transfer
    double* wait;
    double* load;
    double* exec;
    double* finish;
    double* imposed;
    double* resident;
};

// transfer_times: the max over parents (with bytes) of latency + bytes / min(nic, nic[src]),
// 0 on the parent's own server; zeros without such a parent.
//
// With the NIC kinds known, a server's value depends only on its kind unless it is some
// parent's own server, so the chain of maxima runs once per kind (the same np_max calls
// in the same parent order, so the same doubles) and once per parent server; every other
// server copies its kind's value.
inline void transfer_times(const StaticTables& t, const std::int64_t* parent_servers,
                           const double* parent_bytes, std::int64_t n_parents, double* out) {
    std::int64_t n_sent = 0;  // parents with bytes, validated
    for (std::int64_t p = 0; p < n_parents; ++p) {
        if (!(parent_bytes[p] <= 0)) {
            const std::int64_t src = parent_servers[p];
            if (src < -t.n || src >= t.n) throw std::out_of_range("parent server out of range");
            ++n_sent;
        }
    }
    if (n_sent == 0) {
        for (std::int64_t i = 0; i < t.n; ++i) out[i] = 0.0;
        return;
    }
    auto source = [&t](std::int64_t src) { return src < 0 ? src + t.n : src; };
    if (t.nic_kind == nullptr) {
        bool any = false;
        for (std::int64_t p = 0; p < n_parents; ++p) {
            const double nbytes = parent_bytes[p];
            if (nbytes <= 0) continue;
            const std::int64_t s = source(parent_servers[p]);
            const double nic_src = t.nic[s];
            for (std::int64_t i = 0; i < t.n; ++i) {
                double v = i == s ? 0.0 : t.latency_s + nbytes / np_min(t.nic[i], nic_src);
                out[i] = any ? np_max(out[i], v) : v;
            }
            any = true;
        }
        return;
    }
    const std::int64_t n_kinds = t.n_nic_kinds;
    thread_local std::vector<double> by_kind;  // (sending parent, kind): its value there
    thread_local std::vector<double> chain;    // (kind,): the max over sending parents
    by_kind.resize(static_cast<std::size_t>(n_sent * n_kinds));
    chain.resize(static_cast<std::size_t>(n_kinds));
    std::int64_t q = 0;
    for (std::int64_t p = 0; p < n_parents; ++p) {
        const double nbytes = parent_bytes[p];
        if (nbytes <= 0) continue;
        const double nic_src = t.nic[source(parent_servers[p])];
        for (std::int64_t k = 0; k < n_kinds; ++k) {
            const double v = t.latency_s + nbytes / np_min(t.nic_kinds[k], nic_src);
            by_kind[static_cast<std::size_t>(q * n_kinds + k)] = v;
            chain[static_cast<std::size_t>(k)] = q == 0 ? v : np_max(chain[static_cast<std::size_t>(k)], v);
        }
        ++q;
    }
    for (std::int64_t i = 0; i < t.n; ++i) out[i] = chain[static_cast<std::size_t>(t.nic_kind[i])];
    for (std::int64_t p = 0; p < n_parents; ++p) {  // each parent's own server, in full
        if (parent_bytes[p] <= 0) continue;
        const std::int64_t s = source(parent_servers[p]);
        const std::size_t kind = static_cast<std::size_t>(t.nic_kind[s]);
        double value = 0.0;
        std::int64_t r = 0;
        for (std::int64_t u = 0; u < n_parents; ++u) {
            if (parent_bytes[u] <= 0) continue;
            const double v = source(parent_servers[u]) == s
                                 ? 0.0
                                 : by_kind[static_cast<std::size_t>(r * n_kinds) + kind];
            value = r == 0 ? v : np_max(value, v);
            ++r;
        }
        out[s] = value;
    }
}

// One server's estimates of a decision (a row of Outputs).
struct Estimate {
    double wait, load, exec, finish, imposed, resident;
};

// make_decision's LLM branch, server by server: ``emit(i, estimate)`` for the servers in
// [lo, hi), in order. prefill: (n_classes,) prefill seconds of the prompt per class;
// transfer: the (n,) transfer times, read for finish. ``feasible_only``: the servers that
// cannot run the model are skipped (a choice made in C++ reads them only through the
// mask; a decision handed to Python needs every server).
template <class Emit>
inline void llm_estimates(const StaticTables& t, const ModelColumns& c, const LlmState& v,
                          std::int64_t prompt, std::int64_t out_est, const double* prefill,
                          const double* transfer, std::int64_t lo, std::int64_t hi,
                          bool feasible_only, Emit&& emit) {
    const std::int64_t need_raw = prompt + out_est;
    const std::int64_t need = need_raw > 1 ? need_raw : 1;
    const std::int64_t context = prompt + (out_est >= 0 ? out_est / 2 : -((-out_est + 1) / 2));
    const double context_d = static_cast<double>(context);
    const double out_d = static_cast<double>(out_est);
    const double half = out_d / 2.0;
    // slots_by_class(need): max(min(kv_capacity // need, max_batch), 1) per class, once
    // (an integer division per class, not per server: the same integers)
    thread_local std::vector<std::int64_t> by_class;
    by_class.resize(static_cast<std::size_t>(t.n_classes));
    for (std::int64_t k = 0; k < t.n_classes; ++k) {
        std::int64_t q = t.kv_capacity[k] / need;
        if ((t.kv_capacity[k] % need != 0) && ((t.kv_capacity[k] < 0) != (need < 0))) --q;
        const std::int64_t m1 = q < t.max_batch[k] ? q : t.max_batch[k];
        by_class[static_cast<std::size_t>(k)] = m1 > 1 ? m1 : 1;
    }
    const bool skip = feasible_only && !c.all_feasible;
    for (std::int64_t i = lo; i < hi; ++i) {
        if (skip && !c.mask[i]) continue;
        const std::int64_t k = c.kk[i];
        if (k < 0 || k >= t.n_classes) throw std::out_of_range("engine class out of range");
        const std::int64_t slots = by_class[static_cast<std::size_t>(k)];
        const double slots_d = static_cast<double>(slots);
        const double batch = v.batch[i];
        const double batch1 = batch + 1.0;
        const std::int64_t running = static_cast<std::int64_t>(np_min(batch1, slots_d));
        const std::int64_t others = running - 1;
        // x / max(batch, 1) is x itself (bit for bit, NaN and inf included) where batch <= 1:
        // the division, the slowest operation here, only where it can change x.
        const double per_request = batch <= 1.0 ? v.ctx[i] : v.ctx[i] / np_max(batch, 1.0);
        const double ctx = per_request * static_cast<double>(others) + context_d;
        const double attn = t.decode_attn[k];
        const std::int64_t row = c.base[i] + running;
        if (row < -t.flat_size || row >= t.flat_size)
            throw std::out_of_range("decode table row out of range");
        const std::int64_t r = row < 0 ? row + t.flat_size : row;
        const double step = t.lin_flat[r] + attn * ctx;
        const double increase = t.inc_flat[r] + attn * context_d;
        const std::int64_t joins = others * (batch < slots_d ? 1 : 0);
        const double imposed = static_cast<double>(joins) * increase * half;
        const double exec = prefill[k] + out_d * step;
        // max(batch + 1 - slots, 0) / slots: +0.0 exactly where the engine has a free slot
        // (slots >= 1), so the division only where a request would queue.
        const double queued = np_max(batch1 - slots_d, 0.0);
        double wait = (queued == 0.0 ? 0.0 : queued / slots_d) * exec;
        const std::int8_t state = v.state[i];
        double load;
        if (state == 0) {
            load = c.load[i];
        } else if (state == 1) {
            // Past its ready_at a loading engine is still queued for GPUs (features.py).
            const double left = v.ready_at[i] - v.now;
            load = left < 0.0 ? c.load[i] + v.est_work[i] / np_max(v.n_assigned[i], 1.0) : left;
        } else {
            load = 0.0;
        }
        wait += load;
        if (state == 0) {
            const double tp = c.tp_f.data ? c.tp_f[i] : static_cast<double>(c.tp_i[i]);
            if (v.free_gpus[i] + v.idle_gpus[i] < tp)
                wait += v.est_work[i] / np_max(v.n_assigned[i], 1.0);
        }
        const double exec_out = (c.all_feasible || c.mask[i]) ? exec : INFINITY;
        emit(i, Estimate{wait, load, exec_out, np_max(transfer[i], wait) + exec_out, imposed,
                         state == 2 ? 1.0 : 0.0});
    }
}

// An emitter writing each estimate into its row of ``o`` (a Decision's arrays).
struct IntoOutputs {
    const Outputs& o;
    void operator()(std::int64_t i, const Estimate& e) const {
        o.wait[i] = e.wait;
        o.load[i] = e.load;
        o.exec[i] = e.exec;
        o.finish[i] = e.finish;
        o.imposed[i] = e.imposed;
        o.resident[i] = e.resident;
    }
};

// make_decision's LLM branch into ``o`` (every server's row, or the feasible ones').
inline void llm_decision(const StaticTables& t, const ModelColumns& c, const LlmState& v,
                         std::int64_t prompt, std::int64_t out_est, const double* prefill,
                         const double* transfer, const Outputs& o, bool feasible_only = false) {
    llm_estimates(t, c, v, prompt, out_est, prefill, transfer, 0, t.n, feasible_only,
                  IntoOutputs{o});
}

// make_decision's tool branch, server by server over [lo, hi) (load, batch, resident and
// imposed are the tables' zeros). Two shortcuts, each the same doubles: the execution is
// divided once per distinct core speed (t.speed_kind, when known), and a server with a
// free core (ahead == +0.0) waits +0.0 without the divisions wherever they give exactly
// that (a finite backlog that is not negative, -0.0 included, and cores > 0; anything
// else goes through the full expression).
template <class Emit>
inline void tool_estimates(const StaticTables& t, double cpu_work, double ext_latency_est,
                           const double* tools_in_flight, const double* cpu_backlog,
                           const double* transfer, std::int64_t lo, std::int64_t hi,
                           Emit&& emit) {
    thread_local std::vector<double> by_speed;
    const bool kinds = t.speed_kind != nullptr && hi - lo > 1;
    if (kinds) {
        by_speed.resize(static_cast<std::size_t>(t.n_speed_kinds));
        for (std::int64_t k = 0; k < t.n_speed_kinds; ++k)
            by_speed[static_cast<std::size_t>(k)] = cpu_work / t.speed_kinds[k] + ext_latency_est;
    }
    for (std::int64_t i = lo; i < hi; ++i) {
        const double exec = kinds ? by_speed[static_cast<std::size_t>(t.speed_kind[i])]
                                  : cpu_work / t.core_speed[i] + ext_latency_est;
        const double inflight = tools_in_flight[i];
        const double ahead = np_max(inflight + 1.0 - t.cores[i], 0.0);
        const double backlog = cpu_backlog[i];
        const double wait = (ahead == 0.0 && !std::signbit(backlog) && backlog <= DBL_MAX && t.cores[i] > 0.0)
                                ? 0.0
                                : ahead * (backlog / np_max(inflight, 1.0)) / t.cores[i];
        emit(i, Estimate{wait, 0.0, exec, np_max(transfer[i], wait) + exec, 0.0, 0.0});
    }
}

// make_decision's tool branch into ``o``'s wait, exec and finish rows.
inline void tool_decision(const StaticTables& t, double cpu_work, double ext_latency_est,
                          const double* tools_in_flight, const double* cpu_backlog,
                          const double* transfer, const Outputs& o) {
    tool_estimates(t, cpu_work, ext_latency_est, tools_in_flight, cpu_backlog, transfer, 0, t.n,
                   [&o](std::int64_t i, const Estimate& e) {
                       o.exec[i] = e.exec;
                       o.wait[i] = e.wait;
                       o.finish[i] = e.finish;
                   });
}

// eft_argmin's scan (below) fed the offered servers one at a time, in increasing order;
// a server never offered counts as +inf (masked out), which never replaces a minimum, so
// offering only the feasible servers gives eft_argmin's index. ``offer`` says whether the
// server became the one chosen so far.
struct FirstMin {
    double best = INFINITY;
    std::int64_t at = 0;
    bool done = false;  // a NaN ended the scan

    bool offer(std::int64_t i, double x) {
        if (done || !(i == 0 || !(x >= best))) return false;
        best = x;
        at = i;
        done = std::isnan(x);
        return true;
    }
};

// eft's answer, ``np.argmin(np.where(mask, finish + imposed, np.inf))``: the sum is numpy's
// elementwise add, and the scan is numpy's argmin on doubles (a later value replaces the
// running minimum when it is not >= it, so the first minimum wins and the first NaN ends
// the scan: numpy returns the first NaN's index). Strides in elements.
inline std::int64_t eft_argmin(std::int64_t n, const std::uint8_t* mask, std::int64_t mask_stride,
                               const double* finish, std::int64_t finish_stride,
                               const double* imposed, std::int64_t imposed_stride) {
    auto score = [&](std::int64_t i) {
        return mask[i * mask_stride] ? finish[i * finish_stride] + imposed[i * imposed_stride]
                                     : INFINITY;
    };
    double best = score(0);
    if (std::isnan(best)) return 0;
    std::int64_t at = 0;
    for (std::int64_t i = 1; i < n; ++i) {
        const double x = score(i);
        if (!(x >= best)) {
            best = x;
            at = i;
            if (std::isnan(best)) break;
        }
    }
    return at;
}

}  // namespace scalesched
