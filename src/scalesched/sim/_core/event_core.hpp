// EventCore: a whole simulation run in C++, for the runs it covers (sim.compiled_run says
// which): the event heap and loop, arrivals and the DAG's readiness, input transfers, the
// tool servers' cores and queues, the LLM engines (admission, prefill, the fluid decode
// clock with its lazy re-timing), model residency (loads, LRU evictions, GPU queues, or a
// deployment's pinned engines), the ledger's books and the utilisation accounts, with a
// built-in policy (eft) answering every decision through the same decision build
// (decision.hpp) the Python engine's compiled decisions use.
//
// The Python engine (sim/engine.py and its parts) is the specification: every handler
// here mirrors one there, statement for statement, with the same sequence numbers drawn
// in the same order, so both give the same event order, the same doubles and the same
// traces (tests/sim/test_compiled_run.py). Python's min/max keep their first argument on
// ties and NaN (py_max, py_min below); ints meet doubles as a conversion, as Python's
// int-float arithmetic does; the file is compiled with -ffp-contract=off.
//
// Python is called only once per workflow (its realisation and bounds, its completion
// callback) and once per traced task (the trace row), never per event.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "decision.hpp"
#include "numpy_random.hpp"
#include "soft_eft.hpp"
#include "prefix_cache.hpp"
#include "ranks.hpp"
#include "task_costs.hpp"
#include "token_head.hpp"

namespace scalesched {

namespace nb = nanobind;

// The Python builtins max(a, b) / min(a, b): the first argument unless the second is
// strictly larger (smaller); NaN compares false, so it never replaces and is kept first.
inline double py_max(double a, double b) { return b > a ? b : a; }
inline double py_min(double a, double b) { return b < a ? b : a; }

enum EventKind : std::int32_t {
    EV_ARRIVE = 0,
    EV_LAND = 1,
    EV_CPU_DONE = 2,
    EV_TASK_DONE = 3,
    EV_PREFILL_DONE = 4,
    EV_DECODE = 5,
    EV_LOAD_DONE = 6,
    EV_RELEASE = 7,  // an idle replica's release timer (LoadReplica)
};

// The built-in policies a compiled run answers with (sim.compiled_run.POLICIES).
// fcfs_workflow and plas place as tail and give each call an admission priority: its
// workflow's arrival, or the service its workflow has had so far.
enum Policy : std::int32_t {
    POLICY_EFT = 0,
    POLICY_TAIL = 1,
    POLICY_LEAST_LOADED = 2,
    POLICY_FCFS_WORKFLOW = 3,
    POLICY_PLAS = 4,
    POLICY_KV_AWARE = 5,
    POLICY_P2C = 6,  // two servers drawn with numpy's PCG64 stream (use_rng)
    POLICY_SOFT_EFT = 7,  // one drawn near eft's best (use_rng, use_soft_eft)
    POLICY_SOFT_TAIL = 8,  // one drawn near tail's best, the same way
};

enum EngineState : std::int8_t { ENG_ABSENT = 0, ENG_LOADING = 1, ENG_READY = 2 };

constexpr double TOKEN_EPS = 1e-6;  // sim.llm_serving._TOKEN_EPS
constexpr std::int64_t KV_BLOCK = 16;  // cache.kv.BLOCK_TOKENS (checked by use_kv)

struct Event {
    double time;
    std::int64_t seq;
    std::int32_t kind;
    std::int64_t a, b;
};

// heapq's order on (time, seq, ...): seq is unique, so (time, seq) decides every pop.
struct EventAfter {
    bool operator()(const Event& x, const Event& y) const {
        return x.time > y.time || (x.time == y.time && x.seq > y.seq);
    }
};

struct Mark {
    double at;
    std::int64_t gid;
};
struct MarkAfter {
    bool operator()(const Mark& x, const Mark& y) const {
        return x.at > y.at || (x.at == y.at && x.gid > y.gid);
    }
};

// One engine class (kernel.llm_engine.EngineBatch's static part).
struct EngineClass {
    std::int64_t max_batch;
    std::int64_t kv_cap;
    const double* lin;  // decode_lin[klass], row of the live table
    std::int64_t top;   // len(lin) - 1
    double attn;        // decode_attn[klass]
};

// An engine's prefix cache (``--kv-policy``), or none; a fork's engine copies it.
struct KvSlot {
    std::unique_ptr<PrefixCache> cache;
    KvSlot() = default;
    KvSlot(const KvSlot& o) : cache(o.cache ? std::make_unique<PrefixCache>(*o.cache) : nullptr) {}
    KvSlot& operator=(const KvSlot& o) {
        cache = o.cache ? std::make_unique<PrefixCache>(*o.cache) : nullptr;
        return *this;
    }
    KvSlot(KvSlot&&) = default;
    KvSlot& operator=(KvSlot&&) = default;
};

// sim.gpu_engine.SimEngine: one model on tp GPUs of a server.
struct Engine {
    std::int64_t server, model, klass;
    double tp;
    std::int8_t state = ENG_LOADING;
    std::deque<std::int64_t> waiting;
    std::vector<Mark> marks;  // a min-heap (MarkAfter)
    double vclock = 0.0, last_update = 0.0, step = 0.0;
    std::int64_t version = -1;
    double due = INF;
    std::int64_t due_seq = -1, due_version = -1, pending = -2;
    double pending_at = INF;
    double last_used = 0.0;
    bool busy = false, idle = false;
    std::int64_t n_active = 0, kv_used = 0, n_decoding = 0, ctx_sum = 0;
    KvSlot kv;
    // A LoadReplica's replica: when it started loading (-1: an engine loaded on demand or
    // pinned), unloaded once idle for ``idle_s``; its latest timer carries ``idle_mark``.
    double replica_at = -1.0, idle_s = INF;
    std::int64_t idle_mark = -1;

    std::int64_t n_requests() const { return n_active + static_cast<std::int64_t>(waiting.size()); }
    bool fits(const EngineClass& c, std::int64_t prompt, std::int64_t output) const {
        return n_active < c.max_batch && (n_active == 0 || kv_used + prompt + output <= c.kv_cap);
    }
    double step_s(const EngineClass& c) const {
        const std::int64_t n = n_decoding;
        return c.lin[n < c.top ? n : c.top] + c.attn * static_cast<double>(ctx_sum);
    }
};

// One task of a job in flight: what the run reads of its TaskInstance, and its state.
struct Task {
    bool llm;
    std::int64_t model;  // -1 for a tool
    std::int64_t prompt, output, out_est;
    std::int64_t choice_tokens = 0;  // tail: the output length it ranks servers at
    double cpu_work, ext_latency, ext_est;
    std::int64_t parents_at, n_parents, children_at, n_children;
    // per-id state (the ledger's lists)
    std::int64_t server = -1;
    std::int64_t missing = 0;
    bool done = false;
    double ready = NAN, landed = NAN, started = NAN, ended = NAN, loaded = NAN, est = 0.0;
    double priority = INF;  // a Place's admission priority (inf: arrival order)
    std::int64_t repeat_of = -1;  // a tool call repeating this earlier task of its job
    double skipped = 0.0;         // seconds a cache hit saved (its trace row's ``skipped``)
    // KV reuse (read only in a --kv-policy run): the application prompt's key (-1 - its
    // interned prefix_id; 0: none) and tokens, the task of the job whose context the call
    // continues (-1: none), the revealing task (-1: none), the workflow's own prompt +
    // output (a context's end), and while admitted: the KV it reserves for itself and the
    // deepest cached segment it holds (-1: none).
    std::int64_t prefix_key = 0, prefix_tokens = 0, context_of = -1, revealed_by = -1;
    std::int64_t context_end = 0, kv_private = 0, kv_segment = -1;
};

struct Job {
    nb::object job;  // the Python Job (for its trace rows and callbacks)
    std::int64_t offset;
    std::int64_t left;
    std::vector<Task> tasks;
    std::vector<std::int64_t> parents;  // flattened, per task
    std::vector<double> parent_bytes;   // edge_bytes.get((p, i), 0.0), aligned with parents
    std::vector<std::int64_t> children;
    // the ``rank`` ready order's (ranks.hpp): built when first asked for; ranks empty
    // until computed and again once a revealing task finishes
    std::shared_ptr<const RankShape> rank_shape;
    std::vector<double> ranks;
};

// The jobs in flight, by job index (None before arrival and, streamed, after retirement). A
// copy of the store copies every job (a fork changes its tasks' state).
struct JobStore : std::vector<std::unique_ptr<Job>> {
    JobStore() = default;
    JobStore(JobStore&&) = default;
    JobStore(const JobStore& other) : std::vector<std::unique_ptr<Job>>() {
        reserve(other.size());
        for (const auto& job : other) push_back(job ? std::make_unique<Job>(*job) : nullptr);
    }
    JobStore& operator=(const JobStore&) = delete;
};

// The live per-server arrays of the ledger (numpy, written in place: a decision built in
// Python afterwards reads the same state).
struct LedgerArrays {
    double* est_work;
    double* n_assigned;
    double* busy_cores;
    double* cpu_backlog;
    double* tools_in_flight;
    double* free_gpus;
    double* idle_gpus;
    std::int8_t* engine_state;  // (n, models)
    double* engine_ready_at;
    double* engine_batch;
    double* engine_ctx;
    double* attained;  // (n_jobs,)
    double* lower_bounds;
    double* any_bounds;
};

// The run's LedgerArrays: the Python simulation's own, written in place, until ``detach``
// copies them; a copy of the books (a fork's) always owns copies.
struct Books {
    LedgerArrays a{};
    std::size_t n = 0, n_engines = 0, n_jobs = 0;
    std::vector<double> owned;
    std::vector<std::int8_t> owned_state;

    Books(LedgerArrays arrays, std::size_t n_servers, std::size_t engines, std::size_t jobs)
        : a(arrays), n(n_servers), n_engines(engines), n_jobs(jobs) {}
    Books(const Books& other) : n(other.n), n_engines(other.n_engines), n_jobs(other.n_jobs) {
        own(other.a);
    }
    Books& operator=(const Books&) = delete;

    void detach() {
        const LedgerArrays from = a;
        own(from);
    }

  private:
    void own(const LedgerArrays& from) {
        owned.assign(7 * n + 3 * n_engines + 3 * n_jobs, 0.0);
        owned_state.assign(from.engine_state, from.engine_state + n_engines);
        double* at = owned.data();
        auto take = [&at](const double* src, std::size_t len) {
            std::copy(src, src + len, at);
            double* got = at;
            at += len;
            return got;
        };
        a.est_work = take(from.est_work, n);
        a.n_assigned = take(from.n_assigned, n);
        a.busy_cores = take(from.busy_cores, n);
        a.cpu_backlog = take(from.cpu_backlog, n);
        a.tools_in_flight = take(from.tools_in_flight, n);
        a.free_gpus = take(from.free_gpus, n);
        a.idle_gpus = take(from.idle_gpus, n);
        a.engine_state = owned_state.data();
        a.engine_ready_at = take(from.engine_ready_at, n_engines);
        a.engine_batch = take(from.engine_batch, n_engines);
        a.engine_ctx = take(from.engine_ctx, n_engines);
        a.attained = take(from.attained, n_jobs);
        a.lower_bounds = take(from.lower_bounds, n_jobs);
        a.any_bounds = take(from.any_bounds, n_jobs);
    }
};

class EventCore {
  public:
    // Per-class and per-server static figures; state: the Python books' starting values.
    EventCore(const StaticTables& t, const std::vector<ModelColumns>& cols,
              std::vector<EngineClass> classes, std::vector<Prefill> prefills,
              std::vector<std::vector<std::int64_t>> model_classes, std::int64_t n_models,
              std::vector<double> tp, std::vector<std::int64_t> engine_class,
              std::vector<double> load_s,
              const std::vector<std::tuple<std::int64_t, std::int64_t, double>>& resident_engines,
              std::vector<std::int64_t> cores, std::vector<double> speed, double gpus_total,
              LedgerArrays arrays, std::vector<double> free_gpus, std::vector<double> arrivals,
              std::int64_t window_first, std::int64_t window_last, bool streamed,
              bool record_trace, nb::object job_at, nb::object on_done, nb::object on_trace,
              TaskCosts* costs, nb::object held_sum, nb::dict model_index)
        : t_(t), cols_(cols), classes_(std::move(classes)), prefills_(std::move(prefills)),
          model_classes_(std::move(model_classes)), n_models_(n_models), tp_(std::move(tp)),
          engine_class_(std::move(engine_class)), load_s_(std::move(load_s)),
          cores_(std::move(cores)), speed_(std::move(speed)), gpus_total_(gpus_total),
          b_(arrays, static_cast<std::size_t>(t.n), static_cast<std::size_t>(t.n * n_models),
             arrivals.size()),
          free_(std::move(free_gpus)), arrivals_(std::move(arrivals)),
          window_first_(window_first), window_last_(window_last), streamed_(streamed),
          record_trace_(record_trace), job_at_(std::move(job_at)), on_done_(std::move(on_done)),
          on_trace_(std::move(on_trace)), costs_(costs), held_sum_(std::move(held_sum)),
          model_index_(std::move(model_index)) {
        const std::int64_t n = t_.n;
        n_jobs_ = static_cast<std::int64_t>(arrivals_.size());
        engines_.resize(static_cast<std::size_t>(n * n_models_));
        live_.assign(static_cast<std::size_t>(n * n_models_), 0);
        order_.resize(static_cast<std::size_t>(n));
        gpu_wait_.resize(static_cast<std::size_t>(n));
        cpu_queue_.resize(static_cast<std::size_t>(n));
        busy_cores_.assign(static_cast<std::size_t>(n), 0);
        busy_gpus_.assign(static_cast<std::size_t>(n), 0.0);
        gpu_area_.assign(static_cast<std::size_t>(n), 0.0);
        cpu_area_.assign(static_cast<std::size_t>(n), 0.0);
        gpu_mark_.assign(static_cast<std::size_t>(n), 0.0);
        cpu_mark_.assign(static_cast<std::size_t>(n), 0.0);
        jobs_.resize(static_cast<std::size_t>(n_jobs_));
        job_end_.assign(static_cast<std::size_t>(n_jobs_), NAN);
        prefill_row_.assign(static_cast<std::size_t>(std::max<std::int64_t>(1, t_.n_classes)), 0.0);
        for (const auto& [s, m, tp_sm] : resident_engines) resident(s, m, tp_sm);
        every_server_.assign(static_cast<std::size_t>(n), 1);
        zeros_.assign(static_cast<std::size_t>(n), 0.0);
        if (n_jobs_) push_arrival(0);
    }

    // Run to the end with ``policy`` answering every decision; tail asks ``tokens_of(job)``
    // for the output length of each of a job's LLM calls, once at its arrival.
    void run(std::int32_t policy, nb::object tokens_of) {
        use_policy(policy, std::move(tokens_of));
        loop(INF);
    }

    // The same until a decision comes up at or after ``end``, left on the ready queue for
    // the caller (an environment's warm-up: its policy takes over there); the built-in
    // policy is then dropped (no more output lengths asked at arrivals). Returns every
    // placement made, (task, server) in order, for the caller's books.
    std::vector<std::pair<std::int64_t, std::int64_t>> run_until(std::int32_t policy,
                                                                 nb::object tokens_of, double end) {
        use_policy(policy, std::move(tokens_of));
        placed_log_ = true;
        loop(end);
        placed_log_ = false;
        policy_ = POLICY_EFT;
        tokens_of_ = nb::none();
        return std::move(placed_);
    }

    // tail's output lengths computed here (token_head.hpp), Python asked only where too
    // close to call; None: every length asked of ``tokens_of``.
    void use_token_head(nb::object head) {
        token_head_obj_ = std::move(head);
        token_head_ = token_head_obj_.is_none() ? nullptr : nb::cast<const TokenHead*>(token_head_obj_);
    }

    void use_policy(std::int32_t policy, nb::object tokens_of) {
        if (policy < POLICY_EFT || policy > POLICY_SOFT_TAIL)
            throw std::invalid_argument("compiled run: unknown policy");
        if ((policy == POLICY_SOFT_EFT || policy == POLICY_SOFT_TAIL) && !soft_.ready())
            throw std::invalid_argument("compiled run: soft_eft needs use_soft_eft");
        policy_ = policy;
        tokens_of_ = std::move(tokens_of);
        if (ranks_at_tail() && tokens_of_.is_none())
            throw std::invalid_argument("compiled run: tail needs its output lengths");
    }

    // The decision cycle: events until a ready task needs a server, the policy's answer,
    // and so on, until the heap is empty or a decision comes up at or after ``end``.
    void loop(double end) {
        std::vector<double> out(static_cast<std::size_t>(14 * t_.n));
        for (std::int64_t gid = next_ready(end); gid >= 0; gid = next_ready(end)) place(gid, out);
    }

    // Simulation.next_decision without the decision: run events until a ready task needs a
    // server and take it off the ready queue; -1 when the heap is empty or the decision
    // would come up at or after ``end``.
    std::int64_t next_ready(double end) {
        while (true) {
            if (!pending_.empty() && (heap_.empty() || heap_.front().time > now_)) {
                if (now_ >= end) return -1;
                return pop_ready();
            }
            if (heap_.empty()) {
                if (deferred_.empty()) return -1;
                force_deferred();  // nothing left to happen: they must be placed now
                continue;
            }
            std::pop_heap(heap_.begin(), heap_.end(), EventAfter{});
            const Event ev = heap_.back();
            heap_.pop_back();
            if (ev.kind == EV_DECODE && !decode_live(ev.a, ev.b)) continue;
            if (ev.time > now_) {
                in_system_area_ += static_cast<double>(in_system_) * (ev.time - now_);
                now_ = ev.time;
            }
            ++events_;
            dispatch(ev);
            if ((++ticks_ & 0xFFF) == 0 && PyErr_CheckSignals() != 0) throw nb::python_error();
        }
    }

    // RunLedger.pop_pending: the oldest ready task, or under the ``rank`` ready order
    // (``heft_ranks``) the highest HEFT upward rank, ties to the lowest id.
    std::int64_t pop_ready() {
        if (!rank_order_ || pending_.size() == 1) {
            const std::int64_t gid = pending_.front();
            pending_.pop_front();
            return gid;
        }
        auto best = pending_.begin();
        double best_rank = rank_of(*best);
        for (auto at = std::next(best); at != pending_.end(); ++at) {
            const double r = rank_of(*at);
            if (ranks_before(r, *at, best_rank, *best)) best = at, best_rank = r;
        }
        const std::int64_t gid = *best;
        pending_.erase(best);
        return gid;
    }

    // HEFT's ranks (``rank_of``) with ClusterTables.mean_transfer_s's latency and mean NIC
    // speed; ``ready_order``: the ``rank`` ready order picks by them.
    void heft_ranks(double latency_s, double mean_nic_bytes_per_s, bool ready_order) {
        ranks_known_ = true;
        rank_order_ = ready_order;
        transfer_ = MeanTransfer{latency_s, mean_nic_bytes_per_s};
    }

    // VisibleRanks.rank: task ``gid``'s upward rank over what of its workflow is revealed.
    double rank_of(std::int64_t gid) {
        if (gid < 0 || static_cast<std::size_t>(gid) >= job_index_.size() ||
            job_index_[static_cast<std::size_t>(gid)] < 0 ||
            !jobs_[static_cast<std::size_t>(job_index_[static_cast<std::size_t>(gid)])])
            throw std::out_of_range("compiled run: no task in flight with this id");
        if (!ranks_known_) throw std::logic_error("compiled run: heft_ranks was not called");
        Job& j = job_of(gid);
        if (!j.rank_shape) j.rank_shape = rank_shape(j);
        if (j.ranks.empty()) visible_ranks(j, *j.rank_shape, transfer_, j.ranks);
        return j.ranks[static_cast<std::size_t>(gid - j.offset)];
    }

    // A job's RankShape: costs as ``mean_task_costs`` and each task's revealing task, read
    // off its Python workflow; an edge's bytes as the job read them for the child's parents.
    std::shared_ptr<const RankShape> rank_shape(const Job& j) {
        auto shape = std::make_shared<RankShape>();
        nb::object wf = j.job.attr(names_.workflow);
        for (nb::handle c : costs_->mean_costs(wf)) shape->costs.push_back(nb::cast<double>(c));
        nb::object tasks = wf.attr(names_.tasks);
        const std::size_t n = j.tasks.size();
        shape->revealed_by.assign(n, -1);
        shape->decider.assign(n, 0);
        shape->child_bytes.reserve(j.children.size());
        for (std::size_t i = 0; i < n; ++i) {
            nb::object rb = tasks[i].attr(names_.revealed_by);
            if (!rb.is_none()) {
                const std::int64_t r = nb::cast<std::int64_t>(rb);
                if (r < 0 || static_cast<std::size_t>(r) >= n)
                    throw std::invalid_argument("compiled run: a task revealed by no task");
                shape->revealed_by[i] = r;
                shape->decider[static_cast<std::size_t>(r)] = 1;
            }
            const Task& k = j.tasks[i];
            for (std::int64_t e = k.children_at; e < k.children_at + k.n_children; ++e) {
                const std::int64_t c = j.children[static_cast<std::size_t>(e)];
                const Task& child = j.tasks[static_cast<std::size_t>(c)];
                double bytes = 0.0;  // edge_bytes.get((i, c), 0.0)
                const std::int64_t last = child.parents_at + child.n_parents;
                for (std::int64_t q = child.parents_at; q < last; ++q)
                    if (j.parents[static_cast<std::size_t>(q)] == static_cast<std::int64_t>(i)) {
                        bytes = j.parent_bytes[static_cast<std::size_t>(q)];
                        break;
                    }
                shape->child_bytes.push_back(bytes);
            }
        }
        if (shape->costs.size() != n) throw std::logic_error("compiled run: one cost per task");
        return shape;
    }

    // -- a Python policy answering (sim.compiled_loop) ---------------------------------------
    // Every task waiting at the next decision instant, taken off the ready queue in the
    // order they are decided (Simulation.next_decisions); empty as next_ready's -1.
    std::vector<std::int64_t> next_instant(double end) {
        std::vector<std::int64_t> out;
        const std::int64_t first = next_ready(end);
        if (first < 0) return out;
        out.push_back(first);
        while (!pending_.empty()) out.push_back(pop_ready());
        return out;
    }

    // Simulation.apply of a placement the caller has checked: ``server`` with ``est``
    // seconds of estimated execution and the admission ``priority`` (NaN: none given).
    void apply(std::int64_t gid, std::int64_t server, double est, double priority) {
        if (!std::isnan(priority)) task(gid).priority = priority;
        if (!must_place_.empty()) must_place_.erase(gid);
        ++decisions_;
        launch(gid, server, est);
    }

    // -- deferral (RunLedger.defer, release_deferred, force_deferred) ----------------------
    // The open decision's task ``gid`` waits in the deferred queue until capacity is freed
    // (a task or a tool core finishes); the caller has checked ``may_defer``.
    void defer(std::int64_t gid) {
        ++deferrals_;
        deferred_.push_back(gid);
    }

    // Whether the task may be deferred: not once it was offered because nothing else was
    // left to happen (the no-starvation rule).
    bool may_defer(std::int64_t gid) const { return must_place_.count(gid) == 0; }

    void release_deferred() {
        if (deferred_.empty()) return;
        pending_.insert(pending_.end(), deferred_.begin(), deferred_.end());
        deferred_.clear();
    }

    void force_deferred() {
        must_place_.insert(deferred_.begin(), deferred_.end());
        release_deferred();
    }

    std::int64_t deferrals() const { return deferrals_; }

    // -- scale-out (sim.replicas): replicas loaded ahead of demand -------------------------
    // Replicas.load_replica: a replica of model ``m`` on server ``s``'s free GPUs, unloaded
    // once idle for ``idle_s``; nothing where the model is resident or loading there, or
    // the free GPUs do not hold it (a replica never evicts). The caller checked the model
    // fits the server.
    void load_replica(std::int64_t s, std::int64_t m, double idle_s) {
        ++replicas_.requests;
        const std::size_t key = sm(s, m);
        if (engine(s, m) != nullptr || free_[static_cast<std::size_t>(s)] < tp_[key]) return;
        Engine* eng = new_engine(s, m, std::trunc(tp_[key]));  // int(t.tp[s, m])
        eng->replica_at = now_;
        eng->idle_s = idle_s;
        eng->last_used = now_;
        b_.a.engine_state[key] = ENG_LOADING;
        ++replicas_.loads;
        replicas_.live.push_back(static_cast<std::int64_t>(key));
        start_load(eng);
    }

    // What the replica_* metrics read: (requests, loads, releases, calls, GPU-seconds of
    // the replicas gone), the live ones' (tp, load start) in load order, the next mark.
    std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, double,
               std::vector<std::pair<double, double>>, std::int64_t>
    replica_books() const {
        std::vector<std::pair<double, double>> live;
        for (std::int64_t key : replicas_.live) {
            const Engine& e = engines_[static_cast<std::size_t>(key)];
            live.emplace_back(e.tp, e.replica_at);
        }
        return {replicas_.requests, replicas_.loads, replicas_.released, replicas_.calls,
                replicas_.gpu_s, live, replicas_.marks};
    }

    // KV reuse across calls (``--kv-policy``; KvReuse): ``eviction`` a KvEviction, ``reuse``
    // False for ``nocache`` (measured, nothing cached); the cache.kv constants. Every
    // engine live now gets an empty cache, as every engine made later does.
    void use_kv(std::int32_t eviction, bool reuse, double horizon_s, double mean_core_speed,
                double ttl_margin, double ttl_slack_s, double ttl_max_s, std::int64_t block) {
        if (n_tasks_ || events_) throw std::logic_error("compiled run: KV reuse from the start only");
        kv_.on = true;
        kv_.reuse = reuse;
        kv_.eviction = eviction;
        kv_.horizon_s = horizon_s;
        kv_.mean_core_speed = mean_core_speed;
        kv_.ttl_margin = ttl_margin;
        kv_.ttl_slack_s = ttl_slack_s;
        kv_.ttl_max_s = ttl_max_s;
        if (block != KV_BLOCK) throw std::invalid_argument("compiled run: KV block size differs");
        for (std::size_t key = 0; key < engines_.size(); ++key)
            if (live_[key]) engines_[key].kv.cache = std::make_unique<PrefixCache>(eviction, horizon_s);
    }
    // adopt, in a --kv-policy run: the engines' caches and the calls' holds as the Python
    // run has them (compiled_run._kv_snapshot): per cache (server, model, segments, heap,
    // next sequence number, resident, held, evicted); per admitted call (id, tokens it
    // reserves, its segment's index in its engine's cache or -1); the re-entries per
    // agent; the tokens lost with unloaded engines.
    void adopt_kv(nb::handle caches, nb::handle held, nb::handle reentries, std::int64_t lost) {
        if (!kv_.on) throw std::logic_error("compiled run: adopt_kv without use_kv");
        for (nb::handle c : caches) {
            nb::tuple cache = nb::borrow<nb::tuple>(c);
            Engine* eng = engine(nb::cast<std::int64_t>(cache[0]), nb::cast<std::int64_t>(cache[1]));
            if (eng == nullptr || !eng->kv.cache) throw std::logic_error("compiled run: a cache without its engine");
            std::vector<KvSegment> segments;
            for (nb::handle row : cache[2]) {
                nb::tuple r = nb::borrow<nb::tuple>(row);
                KvSegment seg{kv_key(r[0]), nb::cast<std::int64_t>(r[1]), nb::cast<std::int64_t>(r[2]),
                              nb::cast<std::int64_t>(r[3])};
                seg.children = nb::cast<std::int64_t>(r[4]);
                seg.refs = nb::cast<std::int64_t>(r[5]);
                seg.last = nb::cast<double>(r[6]);
                seg.bonus = nb::cast<double>(r[7]);
                seg.prio = nb::cast<double>(r[8]);
                seg.expiry = nb::cast<double>(r[9]);
                segments.push_back(seg);
            }
            std::vector<std::tuple<double, std::int64_t, std::int64_t>> heap;
            for (nb::handle entry : cache[3]) {
                nb::tuple e = nb::borrow<nb::tuple>(entry);
                heap.emplace_back(nb::cast<double>(e[0]), nb::cast<std::int64_t>(e[1]),
                                  nb::cast<std::int64_t>(e[2]));
            }
            eng->kv.cache->restore(segments, heap, nb::cast<std::int64_t>(cache[4]),
                                   nb::cast<std::int64_t>(cache[5]), nb::cast<std::int64_t>(cache[6]),
                                   nb::cast<std::int64_t>(cache[7]));
        }
        for (nb::handle h : held) {
            nb::tuple r = nb::borrow<nb::tuple>(h);
            Task& k = task(nb::cast<std::int64_t>(r[0]));
            k.kv_private = nb::cast<std::int64_t>(r[1]);
            k.kv_segment = nb::cast<std::int64_t>(r[2]);
        }
        kv_.reentries.clear();
        for (nb::handle item : reentries) {
            nb::tuple r = nb::borrow<nb::tuple>(item);
            kv_.reentries[nb::cast<std::int64_t>(r[0])] = nb::cast<std::int64_t>(r[1]);
        }
        kv_.lost = lost;
    }

    // KVRecord's arrays so far, the re-entries per agent, and the tokens evicted in all
    // (engines unloaded with their caches, and every live cache's evictions).
    nb::tuple kv_records() const {
        std::int64_t evicted = kv_.lost;
        for (std::size_t key = 0; key < engines_.size(); ++key)
            if (live_[key] && engines_[key].kv.cache) evicted += engines_[key].kv.cache->evicted;
        std::vector<std::pair<std::int64_t, std::int64_t>> reentries(kv_.reentries.begin(),
                                                                     kv_.reentries.end());
        return nb::make_tuple(kv_.call_jobs, kv_.prompt, kv_.cached, kv_.ttft_jobs, kv_.ttft,
                              kv_.re_agents, kv_.re_jobs, kv_.re_miss, kv_.re_moved, reentries,
                              evicted);
    }

    // p2c's generator: numpy's PCG64 state (bit_generator.state), taken and given back.
    void use_rng(const Pcg64& rng) { rng_ = rng; }

    // soft_eft's sampler (soft_eft.hpp): its SHARPNESS, numpy's ``log1p`` and ``exp``, and
    // two float64 arrays of N values for their scratch.
    void use_soft_eft(double sharpness, nb::object log1p, nb::object exp, nb::object rel,
                      nb::object weights) {
        soft_ = SoftSampler(sharpness, std::move(log1p), std::move(exp), std::move(rel),
                            std::move(weights), t_.n);
    }
    const Pcg64& rng() const { return rng_; }

    // Repeated tool calls take their finished original's result (``--tool-cache on``), a
    // hit taking ``lookup_s`` seconds (sim.tool_cache.LOOKUP_S).
    void use_tool_cache(double lookup_s) {
        tool_cache_ = true;
        lookup_s_ = lookup_s;
    }
    // The tool cache's hits so far: (job, seconds saved) each, in order (ToolCache.hit).
    std::pair<std::vector<std::int64_t>, std::vector<double>> tool_cache_hits() const {
        return {hit_jobs_, hit_saved_};
    }

    // ``on_finished(job, task, last)`` at every finished task, after its books: the Python
    // side's ranks and finished flags, which its task requests read.
    void on_finished(nb::object callback) { on_finished_ = std::move(callback); }

    // -- a run under way (rollout's lookahead) --------------------------------------------
    // Take over the state of the Python simulation ``sim`` at an open decision, in place of
    // this core's fresh start: the event heap, the ready queue, every engine, the CPU queues,
    // the books of the jobs in flight and the counters; ``seq`` is the next sequence number
    // its counter would give. The ledger's arrays are copied, so nothing here changes
    // ``sim``. The core must have been built over ``sim`` with no resident engines.
    // ``truths_of``: a fork on sampled futures' redrawn truths by id, (output_tokens,
    // replay_tokens, ext_latency) or None where a task keeps its own (RedrawnTasks.truths),
    // else None.
    void adopt(nb::handle sim, std::int64_t seq, std::int32_t policy, nb::object tokens_of,
               nb::object truths_of) {
        policy_ = policy;
        tokens_of_ = std::move(tokens_of);
        truths_of_ = std::move(truths_of);
        b_.detach();
        auto get = [&sim](const char* name) { return nb::borrow(sim.attr(name)); };
        now_ = nb::cast<double>(get("now"));
        seq_ = seq;
        events_ = nb::cast<std::int64_t>(get("events"));
        decisions_ = nb::cast<std::int64_t>(get("decisions"));
        model_loads_ = nb::cast<std::int64_t>(get("model_loads"));
        bytes_moved_ = nb::cast<double>(get("bytes_moved"));
        tasks_completed_ = nb::cast<std::int64_t>(get("tasks_completed"));
        workflows_completed_ = nb::cast<std::int64_t>(get("workflows_completed"));
        decode_retimes_ = nb::cast<std::int64_t>(get("decode_retimes"));
        decode_skipped_ = nb::cast<std::int64_t>(get("decode_skipped"));
        in_system_ = nb::cast<std::int64_t>(get("in_system"));
        in_system_area_ = nb::cast<double>(get("in_system_area"));
        heap_.clear();
        for (nb::handle ev : get("_heap")) {
            nb::tuple e = nb::borrow<nb::tuple>(ev);
            heap_.push_back(Event{nb::cast<double>(e[0]), nb::cast<std::int64_t>(e[1]),
                                  nb::cast<std::int32_t>(e[2]), nb::cast<std::int64_t>(e[3]),
                                  nb::cast<std::int64_t>(e[4])});
        }
        std::make_heap(heap_.begin(), heap_.end(), EventAfter{});
        pending_.clear();
        for (nb::handle g : get("pending")) pending_.push_back(nb::cast<std::int64_t>(g));
        auto floats = [&get](const char* name) { return nb::cast<std::vector<double>>(get(name)); };
        busy_cores_ = nb::cast<std::vector<std::int64_t>>(get("_busy_cores"));
        free_ = floats("_free_gpus");
        busy_gpus_ = floats("_busy_gpus");
        gpu_area_ = floats("_gpu_area");
        cpu_area_ = floats("_cpu_area");
        gpu_mark_ = floats("_gpu_mark");
        cpu_mark_ = floats("_cpu_mark");
        std::size_t s = 0;
        for (nb::handle queue : get("_cpu_queue")) {
            cpu_queue_[s].clear();
            for (nb::handle g : queue) cpu_queue_[s].push_back(nb::cast<std::int64_t>(g));
            ++s;
        }
        adopt_jobs(sim);
        adopt_engines(sim);
    }

    // Place the open decision's task ``gid`` on ``server`` (``est``: the decision's
    // execution estimate there; ``priority`` NaN for none), as Simulation.apply does, then
    // run the decision cycle with the core's policy until a decision comes up at or after
    // ``end`` or the run ends. Returns what rollout scores a trial by.
    std::tuple<double, double, std::int64_t, std::vector<double>> trial(
        std::int64_t gid, std::int64_t server, double est, double priority, double end) {
        apply(gid, server, est, priority);
        loop(end);
        return {in_system_area_, now_, in_system_,
                std::vector<double>(b_.a.est_work, b_.a.est_work + t_.n)};
    }

    // -- results, read once the run has ended ------------------------------------------
    double now() const { return now_; }
    std::int64_t events() const { return events_; }
    std::int64_t decisions() const { return decisions_; }
    std::int64_t n_servers() const { return t_.n; }
    std::int64_t model_loads() const { return model_loads_; }
    double bytes_moved() const { return bytes_moved_; }
    std::int64_t tasks_completed() const { return tasks_completed_; }
    std::int64_t workflows_completed() const { return workflows_completed_; }
    std::int64_t decode_retimes() const { return decode_retimes_; }
    std::int64_t decode_skipped() const { return decode_skipped_; }
    std::int64_t in_system() const { return in_system_; }
    double in_system_area() const { return in_system_area_; }
    std::int64_t seq() const { return seq_; }
    std::int64_t n_tasks() const { return n_tasks_; }
    const std::vector<double>& job_end() const { return job_end_; }
    const std::vector<double>& queue_delays() const { return queue_delays_; }
    const std::vector<std::int64_t>& busy_cores_list() const { return busy_cores_; }
    const std::vector<double>& free_list() const { return free_; }
    const std::vector<double>& busy_gpus() const { return busy_gpus_; }
    const std::vector<double>& gpu_area() const { return gpu_area_; }
    const std::vector<double>& cpu_area() const { return cpu_area_; }
    const std::vector<double>& gpu_mark() const { return gpu_mark_; }
    const std::vector<double>& cpu_mark() const { return cpu_mark_; }
    // (gpu areas, cpu areas, in-system area) at the window's first and last arrival.
    const std::vector<std::pair<std::vector<double>, std::vector<double>>>& window_marks() const {
        return marks_;
    }
    const std::vector<double>& window_in_system() const { return marks_in_system_; }
    const std::vector<std::pair<double, double>>& held_log() const { return held_log_; }

    // Per id, in id order, of a run kept up front (field: 1 ready, 2 landed, 3 started,
    // 4 ended, 5 loaded, 6 est, 9 priority, 10 skipped); the integer books (server 0, missing 7) and
    // the finished flags the same way, as Python ints and bools with no float in between.
    std::vector<double> per_id(int field) const {
        switch (field) {
            case 1: return per_task<double>([](const Task& k) { return k.ready; });
            case 2: return per_task<double>([](const Task& k) { return k.landed; });
            case 3: return per_task<double>([](const Task& k) { return k.started; });
            case 4: return per_task<double>([](const Task& k) { return k.ended; });
            case 5: return per_task<double>([](const Task& k) { return k.loaded; });
            case 6: return per_task<double>([](const Task& k) { return k.est; });
            case 9: return per_task<double>([](const Task& k) { return k.priority; });
            case 10: return per_task<double>([](const Task& k) { return k.skipped; });
            default: throw std::invalid_argument("per_id: not a float field");
        }
    }
    std::vector<std::int64_t> per_id_int(int field) const {
        if (field == 0) return per_task<std::int64_t>([](const Task& k) { return k.server; });
        return per_task<std::int64_t>([](const Task& k) { return k.missing; });
    }
    std::vector<bool> per_id_done() const {
        return per_task<bool>([](const Task& k) { return k.done; });
    }
    template <class T, class Get>
    std::vector<T> per_task(Get get) const {
        std::vector<T> out;
        out.reserve(static_cast<std::size_t>(n_tasks_));
        for (const auto& job : jobs_) {
            if (!job) continue;
            for (const Task& k : job->tasks) out.push_back(get(k));
        }
        return out;
    }
    std::vector<std::int64_t> job_left() const {
        std::vector<std::int64_t> out;
        for (const auto& job : jobs_) out.push_back(job ? job->left : 0);
        return out;
    }

  private:
    // -- the heap ------------------------------------------------------------------------
    void push(double time, std::int32_t kind, std::int64_t a, std::int64_t b) {
        heap_.push_back(Event{time, seq_++, kind, a, b});
        std::push_heap(heap_.begin(), heap_.end(), EventAfter{});
    }
    void push_seq(double time, std::int64_t seq, std::int32_t kind, std::int64_t a,
                  std::int64_t b) {
        heap_.push_back(Event{time, seq, kind, a, b});
        std::push_heap(heap_.begin(), heap_.end(), EventAfter{});
    }
    void push_arrival(std::int64_t ji) {
        push_seq(arrivals_[static_cast<std::size_t>(ji)], ji - n_jobs_, EV_ARRIVE, ji, 0);
    }

    void dispatch(const Event& ev) {
        switch (ev.kind) {
            case EV_ARRIVE: on_arrive(ev.a); break;
            case EV_LAND: on_land(ev.a); break;
            case EV_CPU_DONE: on_cpu_done(ev.a); break;
            case EV_TASK_DONE: finish_task(ev.a); break;
            case EV_PREFILL_DONE: on_prefill_done(ev.a); break;
            case EV_DECODE: on_decode(ev.a); break;
            case EV_LOAD_DONE: on_load_done(ev.a, ev.b); break;
            case EV_RELEASE: on_release(ev.a, ev.b); break;
            default: throw std::logic_error("compiled run: unknown event kind");
        }
    }

    // -- ids ------------------------------------------------------------------------------
    Job& job_of(std::int64_t gid) { return *jobs_[static_cast<std::size_t>(job_index_[static_cast<std::size_t>(gid)])]; }
    Task& task(std::int64_t gid) {
        Job& j = job_of(gid);
        return j.tasks[static_cast<std::size_t>(gid - j.offset)];
    }
    Engine* engine(std::int64_t s, std::int64_t m) {
        const std::size_t key = sm(s, m);
        return live_[key] ? &engines_[key] : nullptr;
    }
    std::size_t sm(std::int64_t s, std::int64_t m) const {
        return static_cast<std::size_t>(s * n_models_ + m);
    }

    // -- arrivals (Simulation._on_arrive, RunLedger.arrive) ----------------------------------
    void on_arrive(std::int64_t ji) {
        if (ji + 1 < n_jobs_) push_arrival(ji + 1);
        if (ji == window_first_ || ji == window_last_) mark_window();
        ++in_system_;
        admit_job(ji);
        Job& j = *jobs_[static_cast<std::size_t>(ji)];
        const auto bounds = costs_->bounds(j.job.attr(names_.workflow));
        b_.a.lower_bounds[ji] = bounds.first;
        b_.a.any_bounds[ji] = bounds.second;
        for (std::size_t i = 0; i < j.tasks.size(); ++i) {
            Task& k = j.tasks[i];
            k.missing = k.n_parents;
            if (!k.n_parents) make_ready(j.offset + static_cast<std::int64_t>(i));
        }
    }

    // The job's tasks, read off its Python objects once, with the next ids.
    void admit_job(std::int64_t ji) {
        Job& j = build_job(ji, job_at_(ji), n_tasks_);
        n_tasks_ += static_cast<std::int64_t>(j.tasks.size());
    }

    // tail's output lengths of a job's tasks, asked of Python (``tokens_of``).
    void ask_tokens(Job& j, nb::handle pyjob, std::int64_t n) {
        nb::object tokens = tokens_of_(pyjob);
        if (static_cast<std::int64_t>(nb::len(tokens)) != n)
            throw std::invalid_argument("compiled run: one output length per task");
        for (std::int64_t i = 0; i < n; ++i)
            j.tasks[static_cast<std::size_t>(i)].choice_tokens = nb::cast<std::int64_t>(tokens[i]);
    }

    // Job ``ji`` (``pyjob``) in the store, its tasks from id ``offset`` on.
    Job& build_job(std::int64_t ji, nb::object pyjob, std::int64_t offset) {
        auto j = std::make_unique<Job>();
        j->job = pyjob;
        nb::object wf = pyjob.attr(names_.workflow);
        nb::object tasks = wf.attr(names_.tasks), parents = wf.attr(names_.parents);
        nb::object children = wf.attr(names_.children);
        nb::object get = wf.attr(names_.edge_bytes).attr(names_.get);
        const std::int64_t n = static_cast<std::int64_t>(nb::len(tasks));
        j->offset = offset;
        j->left = n;
        j->tasks.reserve(static_cast<std::size_t>(n));
        nb::object zero = nb::float_(0.0);
        for (std::int64_t i = 0; i < n; ++i) {
            nb::object tk = tasks[i];
            Task k{};
            k.llm = tk.attr(names_.kind).equal(llm_);
            k.model = -1;
            if (k.llm) {  // MODEL_INDEX[task.model or ""]
                nb::object name = tk.attr(names_.model);
                nb::handle key = name.is_none() ? nb::handle(empty_) : nb::handle(name);
                if (!model_index_.contains(key))
                    throw std::invalid_argument("compiled run: unknown model of a task");
                k.model = nb::cast<std::int64_t>(model_index_[key]);
            }
            k.prompt = nb::cast<std::int64_t>(tk.attr(names_.prompt_tokens));
            k.output = nb::cast<std::int64_t>(tk.attr(names_.output_tokens));
            k.out_est = nb::cast<std::int64_t>(tk.attr(names_.output_tokens_est));
            k.cpu_work = nb::cast<double>(tk.attr(names_.cpu_work));
            k.ext_latency = nb::cast<double>(tk.attr(names_.ext_latency));
            k.ext_est = nb::cast<double>(tk.attr(names_.ext_latency_est));
            if (!k.llm && tool_cache_) {  // read only where a repeat can take a result
                nb::object original = tk.attr(names_.repeat_of);
                if (!original.is_none()) k.repeat_of = nb::cast<std::int64_t>(original);
            }
            if (kv_.on) read_kv_fields(k, tk);
            if (!truths_of_.is_none()) {  // a fork on sampled futures: its redrawn truths
                nb::object truths = truths_of_(offset + i);
                if (!truths.is_none()) {
                    k.output = nb::cast<std::int64_t>(truths[0]);
                    k.ext_latency = nb::cast<double>(truths[2]);
                }
            }
            nb::object ps = parents[i];
            k.parents_at = static_cast<std::int64_t>(j->parents.size());
            for (nb::handle p : ps) {
                const std::int64_t pi = nb::cast<std::int64_t>(p);
                j->parents.push_back(pi);
                nb::object key = nb::make_tuple(pi, i);
                j->parent_bytes.push_back(nb::cast<double>(get(key, zero)));
            }
            k.n_parents = static_cast<std::int64_t>(j->parents.size()) - k.parents_at;
            nb::object cs = children[i];
            k.children_at = static_cast<std::int64_t>(j->children.size());
            for (nb::handle c : cs) j->children.push_back(nb::cast<std::int64_t>(c));
            k.n_children = static_cast<std::int64_t>(j->children.size()) - k.children_at;
            j->tasks.push_back(k);
        }
        if (ranks_at_tail()) {  // in C++ where the head is given, unless too close to call
            std::optional<std::vector<std::int64_t>> tokens;
            if (token_head_ != nullptr) tokens = token_head_->workflow_lengths(wf);
            if (tokens) {
                for (std::int64_t i = 0; i < n; ++i)
                    j->tasks[static_cast<std::size_t>(i)].choice_tokens =
                        (*tokens)[static_cast<std::size_t>(i)];
            } else {
                ask_tokens(*j, pyjob, n);
            }
        }
        if (job_index_.size() < static_cast<std::size_t>(offset + n))
            job_index_.resize(static_cast<std::size_t>(offset + n), -1);
        for (std::int64_t i = 0; i < n; ++i)
            job_index_[static_cast<std::size_t>(offset + i)] = ji;
        jobs_[static_cast<std::size_t>(ji)] = std::move(j);
        return *jobs_[static_cast<std::size_t>(ji)];
    }

    // adopt: the jobs in flight (arrived, not finished) with their tasks' books.
    void adopt_jobs(nb::handle sim) {
        std::int64_t next = n_jobs_;  // the pending arrival's job (one at most)
        for (const Event& e : heap_)
            if (e.kind == EV_ARRIVE) next = e.a;
        nb::object tasks = sim.attr("tasks"), offsets = tasks.attr("offset");
        nb::object jobs = sim.attr("jobs"), job_left = sim.attr("job_left");
        std::vector<std::int64_t> flight;
        if (streamed_) {
            for (nb::handle ji : sim.attr("_in_flight")) flight.push_back(nb::cast<std::int64_t>(ji));
            n_tasks_ = nb::cast<std::int64_t>(tasks.attr("n_tasks"));
        } else {
            for (std::int64_t ji = 0; ji < next; ++ji)
                if (nb::cast<std::int64_t>(job_left[nb::int_(ji)]) > 0) flight.push_back(ji);
            n_tasks_ = next < n_jobs_ ? nb::cast<std::int64_t>(offsets[nb::int_(next)])
                                      : nb::cast<std::int64_t>(tasks.attr("n_tasks"));
        }
        job_index_.assign(static_cast<std::size_t>(n_tasks_), -1);
        nb::object server = sim.attr("server"), ready = sim.attr("ready_at");
        nb::object landed = sim.attr("landed_at"), started = sim.attr("started_at");
        nb::object ended = sim.attr("ended_at"), loaded = sim.attr("loaded_at");
        nb::object est = sim.attr("_est"), missing = sim.attr("missing");
        nb::object done = sim.attr("task_done"), priority = sim.attr("priority");
        for (std::int64_t ji : flight) {
            nb::int_ key(ji);
            Job& j = build_job(ji, nb::borrow(jobs[key]), nb::cast<std::int64_t>(offsets[key]));
            j.left = nb::cast<std::int64_t>(job_left[key]);
            for (std::size_t i = 0; i < j.tasks.size(); ++i) {
                nb::int_ g(j.offset + static_cast<std::int64_t>(i));
                Task& k = j.tasks[i];
                k.server = nb::cast<std::int64_t>(server[g]);
                k.ready = nb::cast<double>(ready[g]);
                k.landed = nb::cast<double>(landed[g]);
                k.started = nb::cast<double>(started[g]);
                k.ended = nb::cast<double>(ended[g]);
                k.loaded = nb::cast<double>(loaded[g]);
                k.est = nb::cast<double>(est[g]);
                k.missing = nb::cast<std::int64_t>(missing[g]);
                k.done = nb::cast<bool>(done[g]);
                k.priority = nb::cast<double>(priority[g]);
            }
        }
    }

    // adopt: every engine, per server in creation order, and the GPU queues.
    void adopt_engines(nb::handle sim) {
        std::int64_t s = 0;
        for (nb::handle per_server : sim.attr("_engines")) {
            nb::dict engines = nb::borrow<nb::dict>(per_server);
            for (auto [model, e] : engines) {
                const std::int64_t m = nb::cast<std::int64_t>(model);
                Engine* eng = new_engine(s, m, nb::cast<double>(e.attr("tp")));
                if (nb::cast<std::int64_t>(e.attr("klass")) != eng->klass)
                    throw std::logic_error("compiled run: an engine's class differs");
                eng->state = nb::cast<std::int8_t>(e.attr("state"));
                for (nb::handle g : e.attr("waiting")) eng->waiting.push_back(nb::cast<std::int64_t>(g));
                for (nb::handle mark : e.attr("marks")) {
                    nb::tuple t = nb::borrow<nb::tuple>(mark);
                    eng->marks.push_back(Mark{nb::cast<double>(t[0]), nb::cast<std::int64_t>(t[1])});
                }
                std::make_heap(eng->marks.begin(), eng->marks.end(), MarkAfter{});
                eng->vclock = nb::cast<double>(e.attr("vclock"));
                eng->last_update = nb::cast<double>(e.attr("last_update"));
                eng->step = nb::cast<double>(e.attr("step"));
                eng->version = nb::cast<std::int64_t>(e.attr("version"));
                eng->due = nb::cast<double>(e.attr("due"));
                eng->due_seq = nb::cast<std::int64_t>(e.attr("due_seq"));
                eng->due_version = nb::cast<std::int64_t>(e.attr("due_version"));
                eng->pending = nb::cast<std::int64_t>(e.attr("pending"));
                eng->pending_at = nb::cast<double>(e.attr("pending_at"));
                eng->last_used = nb::cast<double>(e.attr("last_used"));
                eng->busy = nb::cast<bool>(e.attr("busy"));
                eng->idle = nb::cast<bool>(e.attr("idle"));
                eng->n_active = nb::cast<std::int64_t>(e.attr("n_active"));
                eng->kv_used = nb::cast<std::int64_t>(e.attr("kv_used"));
                eng->n_decoding = nb::cast<std::int64_t>(e.attr("n_decoding"));
                eng->ctx_sum = nb::cast<std::int64_t>(e.attr("ctx_sum"));
            }
            ++s;
        }
        s = 0;
        for (nb::handle queue : sim.attr("_gpu_wait")) {
            for (nb::handle e : queue)
                gpu_wait_[static_cast<std::size_t>(s)].push_back(
                    static_cast<std::int64_t>(sm(s, nb::cast<std::int64_t>(e.attr("model")))));
            ++s;
        }
    }

    void make_ready(std::int64_t gid) {
        task(gid).ready = now_;
        pending_.push_back(gid);
    }

    // -- decisions: the decision build and eft's choice, then Simulation.apply -------------
    void place(std::int64_t gid, std::vector<double>& out) {
        Job& j = job_of(gid);
        Task& k = j.tasks[static_cast<std::size_t>(gid - j.offset)];
        const std::int64_t n = t_.n;
        double* transfer = out.data();
        Outputs o{transfer,         transfer + n,     transfer + 2 * n, transfer + 3 * n,
                  transfer + 4 * n, transfer + 5 * n, transfer + 6 * n};
        parent_servers_.clear();
        for (std::int64_t p = 0; p < k.n_parents; ++p) {
            const std::int64_t pi = j.parents[static_cast<std::size_t>(k.parents_at + p)];
            parent_servers_.push_back(j.tasks[static_cast<std::size_t>(pi)].server);
        }
        transfer_times(t_, parent_servers_.data(), j.parent_bytes.data() + k.parents_at,
                       k.n_parents, transfer);
        std::int64_t at;
        double exec;  // the cost model's execution estimate on ``at`` (the ledger's book)
        if (k.llm) {
            const ModelColumns& c = cols_[static_cast<std::size_t>(k.model)];
            const std::int64_t m = k.model, w = n_models_;
            LlmState v{{b_.a.engine_state + m, w}, {b_.a.engine_batch + m, w}, {b_.a.engine_ctx + m, w},
                       {b_.a.engine_ready_at + m, w}, b_.a.free_gpus, b_.a.idle_gpus, b_.a.est_work,
                       b_.a.n_assigned, now_};
            const double* prefill = prefill_by_class(m, k.prompt);
            // Only the servers that can run the model: every choice below reads the others
            // through the mask. eft and tail's choices are folded into the estimates
            // (FirstMin: eft_argmin's scan), without writing the decision's arrays.
            auto estimates = [&](std::int64_t tokens, std::int64_t lo, std::int64_t hi,
                                 auto&& emit) {
                llm_estimates(t_, c, v, k.prompt, tokens, prefill, transfer, lo, hi, true, emit);
            };
            auto exec_on = [&](std::int64_t server) {  // the estimate at the call's own length
                double e = 0.0;
                estimates(k.out_est, server, server + 1,
                          [&e](std::int64_t, const Estimate& x) { e = x.exec; });
                return e;
            };
            if (policy_ == POLICY_P2C) {
                llm_decision(t_, c, v, k.prompt, k.out_est, prefill, transfer, o, true);
                feasible_.clear();
                for (std::int64_t i = 0; i < n; ++i)
                    if (c.mask[i]) feasible_.push_back(i);
                if (feasible_.empty())
                    throw std::runtime_error("p2c: no server can run an LLM call of model " +
                                             std::to_string(m));
                at = p2c_choice([&o](std::int64_t i) { return o.finish[i] + o.imposed[i]; });
                exec = o.exec[at];
            } else if (policy_ == POLICY_SOFT_EFT) {
                llm_decision(t_, c, v, k.prompt, k.out_est, prefill, transfer, o, true);
                at = soft_choice(o.finish, c.mask);
                exec = o.exec[at];
            } else if (policy_ == POLICY_SOFT_TAIL) {  // tail's scores, inf where masked
                double* score = transfer + 7 * n;
                std::fill(score, score + n, INF);
                estimates(k.choice_tokens, 0, n, [score](std::int64_t i, const Estimate& e) {
                    score[i] = e.finish + e.imposed;
                });
                at = soft_choice(score, c.mask);
                exec = exec_on(at);
            } else if (policy_ == POLICY_KV_AWARE) {
                llm_decision(t_, c, v, k.prompt, k.out_est, prefill, transfer, o, true);
                double* score = transfer + 7 * n;
                kv_aware_llm(c, m, k, o, score);
                at = eft_argmin(n, c.mask, 1, score, 1, zeros_.data(), 1);
                exec = o.exec[at];
            } else if (policy_ == POLICY_LEAST_LOADED) {
                at = eft_argmin(n, c.mask, 1, b_.a.est_work, 1, zeros_.data(), 1);
                exec = c.mask[at] ? exec_on(at) : 0.0;
            } else {  // eft, or tail's rank at its output length (and the estimate at the call's)
                FirstMin pick;
                double picked = 0.0;
                const bool tail = ranks_at_tail();
                estimates(tail ? k.choice_tokens : k.out_est, 0, n,
                          [&](std::int64_t i, const Estimate& e) {
                              if (pick.offer(i, e.finish + e.imposed)) picked = e.exec;
                          });
                at = pick.at;
                exec = !c.mask[at] ? 0.0 : tail ? exec_on(at) : picked;
            }
            if (!c.mask[at])
                throw std::runtime_error("eft: no server can run an LLM call of model " +
                                         std::to_string(m));
        } else {
            auto estimates = [&](std::int64_t lo, std::int64_t hi, auto&& emit) {
                tool_estimates(t_, k.cpu_work, k.ext_est, b_.a.tools_in_flight,
                               b_.a.cpu_backlog, transfer, lo, hi, emit);
            };
            if (policy_ == POLICY_P2C) {  // every server is feasible for a tool
                feasible_.resize(static_cast<std::size_t>(n));
                for (std::int64_t i = 0; i < n; ++i) feasible_[static_cast<std::size_t>(i)] = i;
                auto finish_on = [&](std::int64_t i) {  // + its imposed delay, 0 for a tool
                    double f = 0.0;
                    estimates(i, i + 1, [&f](std::int64_t, const Estimate& e) { f = e.finish; });
                    return f + 0.0;
                };
                at = p2c_choice(finish_on);
                exec = 0.0;
                estimates(at, at + 1, [&exec](std::int64_t, const Estimate& e) { exec = e.exec; });
            } else if (policy_ == POLICY_SOFT_EFT || policy_ == POLICY_SOFT_TAIL) {
                // every server is feasible for a tool; tail's score adds no imposed delay
                double* finish = transfer + 7 * n;
                double* execs = transfer + 8 * n;
                estimates(0, n, [&](std::int64_t i, const Estimate& e) {
                    finish[i] = e.finish;
                    execs[i] = e.exec;
                });
                at = soft_choice(finish, every_server_.data());
                exec = execs[at];
            } else if (policy_ == POLICY_LEAST_LOADED || policy_ == POLICY_KV_AWARE) {
                const double* score = b_.a.est_work;
                if (policy_ == POLICY_KV_AWARE) {  // fewest placed tools per core
                    double* fewest = transfer + 7 * n;
                    for (std::int64_t i = 0; i < n; ++i)
                        fewest[i] = (b_.a.tools_in_flight[i] + 1.0) / t_.cores[i];
                    score = fewest;
                }
                at = eft_argmin(n, every_server_.data(), 1, score, 1, zeros_.data(), 1);
                exec = 0.0;
                estimates(at, at + 1, [&exec](std::int64_t, const Estimate& e) { exec = e.exec; });
            } else {  // the earliest finish
                FirstMin pick;
                exec = 0.0;
                estimates(0, n, [&](std::int64_t i, const Estimate& e) {
                    if (pick.offer(i, e.finish)) exec = e.exec;
                });
                at = pick.at;
            }
        }
        ++decisions_;
        if (policy_ == POLICY_FCFS_WORKFLOW) {  // workflow_order: now - (now - arrival)
            const double age = now_ - arrivals_[static_cast<std::size_t>(
                                          job_index_[static_cast<std::size_t>(gid)])];
            k.priority = now_ - age;
        } else if (policy_ == POLICY_PLAS) {  // the workflow's attained service
            k.priority = b_.a.attained[job_index_[static_cast<std::size_t>(gid)]];
        }
        if (placed_log_) placed_.emplace_back(gid, at);
        launch(gid, at, exec);
    }

    // policies.p2c: two of the feasible servers (``feasible_``, in order) drawn as numpy's
    // Generator.choice does (all of them if two or fewer), the one with the smaller
    // ``score`` (numpy's argmin: the first NaN, else the first smallest).
    template <typename Score>
    std::int64_t p2c_choice(Score&& score) {
        std::int64_t pick[2] = {feasible_[0], feasible_[0]};
        std::size_t count = feasible_.size() > 2 ? 2 : feasible_.size();
        if (feasible_.size() > 2) {
            std::int64_t a = 0, b = 0;
            rng_.choose_two(static_cast<std::int64_t>(feasible_.size()), a, b);
            pick[0] = feasible_[static_cast<std::size_t>(a)];
            pick[1] = feasible_[static_cast<std::size_t>(b)];
        } else if (count == 2) {
            pick[1] = feasible_[1];
        }
        if (count == 1) return pick[0];
        const double first = score(pick[0]), second = score(pick[1]);
        if (std::isnan(first)) return pick[0];
        if (std::isnan(second) || second < first) return pick[1];
        return pick[0];
    }

    // policies.soft_eft.sample_near_best over ``finish`` (the decision's finish_s) and
    // ``mask``, from the run's generator.
    std::int64_t soft_choice(const double* finish, const std::uint8_t* mask) {
        const std::size_t f = soft_.weigh(finish, mask, t_.n, feasible_);
        return feasible_[soft_.draw(f, rng_)];
    }

    // policies.kv_aware.kv_aware_scores of an LLM call, numpy's operations in order:
    // queued + running + kv_use + cold per server.
    void kv_aware_llm(const ModelColumns& c, std::int64_t m, const Task& k, const Outputs& o,
                      double* score) const {
        const std::int64_t n = t_.n;
        const std::int64_t need_raw = k.prompt + k.out_est;
        const std::int64_t need = need_raw > 1 ? need_raw : 1;
        const double context = static_cast<double>(k.prompt + floor_div(k.out_est, 2));
        bool first = true;
        double exec_best = 0.0;  // np.min(exec_s[mask])
        for (std::int64_t i = 0; i < n; ++i) {
            if (!c.mask[i]) continue;
            const double x = o.exec[i];
            if (first || std::isnan(x) || x < exec_best) exec_best = std::isnan(exec_best) ? exec_best : x;
            first = false;
        }
        const double denom = py_max(exec_best, 1e-3);
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int64_t kk = c.kk[i];
            std::int64_t q = floor_div(t_.kv_capacity[kk], need);
            const std::int64_t m1 = q < t_.max_batch[kk] ? q : t_.max_batch[kk];
            const double slots = static_cast<double>(m1 > 1 ? m1 : 1);
            const double batch = b_.a.engine_batch[sm(i, m)];
            const double queued = np_max(batch + 1.0 - slots, 0.0) / slots;
            const double running =
                np_min(batch + 1.0, slots) / static_cast<double>(t_.max_batch[kk]);
            const double kv_use = np_min(
                (b_.a.engine_ctx[sm(i, m)] + context) / static_cast<double>(t_.kv_capacity[kk]),
                1.0);
            const double cold = o.load[i] / denom;
            score[i] = queued + running + kv_use + cold;
        }
    }

    bool ranks_at_tail() const {
        return policy_ == POLICY_TAIL || policy_ == POLICY_FCFS_WORKFLOW || policy_ == POLICY_PLAS ||
               policy_ == POLICY_SOFT_TAIL;
    }

    // ClusterTables.prefill_by_class(m, prompt): per class, 0 where it does not serve m.
    const double* prefill_by_class(std::int64_t m, std::int64_t prompt) {
        std::fill(prefill_row_.begin(), prefill_row_.end(), 0.0);
        for (std::int64_t k : model_classes_[static_cast<std::size_t>(m)])
            prefill_row_[static_cast<std::size_t>(k)] = prefills_[static_cast<std::size_t>(k)](prompt);
        return prefill_row_.data();
    }

    // -- transfers (sim.transfers) and the ledger's book ------------------------------------
    void launch(std::int64_t gid, std::int64_t server, double est) {
        Job& j = job_of(gid);
        const std::int64_t i = gid - j.offset;
        Task& k = j.tasks[static_cast<std::size_t>(i)];
        k.est = est;
        k.server = server;
        b_.a.est_work[server] += est;
        b_.a.n_assigned[server] += 1;
        if (!k.llm) {
            b_.a.cpu_backlog[server] += k.cpu_work / speed_[static_cast<std::size_t>(server)];
            b_.a.tools_in_flight[server] += 1;
        } else {
            b_.a.engine_batch[sm(server, k.model)] += 1;
            b_.a.engine_ctx[sm(server, k.model)] +=
                static_cast<double>(k.prompt + floor_div(k.out_est, 2));
        }
        double delay = 0.0;
        for (std::int64_t p = 0; p < k.n_parents; ++p) {
            const std::size_t e = static_cast<std::size_t>(k.parents_at + p);
            const std::int64_t src = j.tasks[static_cast<std::size_t>(j.parents[e])].server;
            const double nbytes = j.parent_bytes[e];
            if (src == server || nbytes <= 0) continue;
            const double bw = py_min(t_.nic[src], t_.nic[server]);
            bytes_moved_ += nbytes;
            const double x = t_.latency_s + nbytes / bw;
            if (x > delay) delay = x;
        }
        if (delay > 0) {
            push(now_ + delay, EV_LAND, gid, 0);
        } else {
            on_land(gid);
        }
    }

    void on_land(std::int64_t gid) {
        Task& k = task(gid);
        k.landed = now_;
        const std::int64_t s = k.server;
        const std::size_t su = static_cast<std::size_t>(s);
        if (k.llm) {
            llm_arrive(gid, s, k);
        } else if (k.repeat_of >= 0 && tool_cache_ && cache_hit(gid, k)) {
            return;
        } else if (k.cpu_work <= 0) {
            k.started = now_;
            after_cpu(gid, k);
        } else if (busy_cores_[su] < cores_[su]) {
            start_tool(gid, s, k);
        } else {
            cpu_queue_[su].push_back(gid);
        }
    }

    // -- KV reuse (sim.kv_reuse.KvReuse) ---------------------------------------------------
    // A cache key: a call's task id, or an application prompt's prefix_id (interned as a
    // negative number, the same for every engine and task of the run).
    std::int64_t kv_key(nb::handle key) {
        if (nb::isinstance<nb::int_>(key)) return nb::cast<std::int64_t>(key);
        const std::string name = nb::cast<std::string>(key);
        auto [at, added] = kv_.prefix_keys.try_emplace(
            name, -1 - static_cast<std::int64_t>(kv_.prefix_keys.size()));
        return at->second;
    }

    void read_kv_fields(Task& k, nb::handle tk) {
        k.context_end = k.prompt + k.output;  // before a fork's redrawn truths
        nb::object rb = tk.attr(names_.revealed_by);
        if (!rb.is_none()) k.revealed_by = nb::cast<std::int64_t>(rb);
        if (!k.llm) return;
        nb::object ctx = tk.attr(names_.context_of);
        if (!ctx.is_none()) k.context_of = nb::cast<std::int64_t>(ctx);
        nb::object prefix = tk.attr(names_.prefix_id);
        if (prefix.is_none()) return;
        k.prefix_key = kv_key(prefix);
        k.prefix_tokens = nb::cast<std::int64_t>(tk.attr(names_.prefix_tokens));
    }

    // KvReuse.chain: the cache segments call ``gid``'s prompt starts with, deepest first,
    // as (key, end); empty for a call with no prefix identity.
    void kv_chain(std::int64_t gid, const Task& k, std::vector<std::pair<std::int64_t, std::int64_t>>& chain) {
        chain.clear();
        if (k.prefix_key == 0) return;
        const Job& j = job_of(gid);
        for (std::int64_t c = k.context_of; c >= 0;) {
            const Task& t = j.tasks[static_cast<std::size_t>(c)];
            chain.emplace_back(j.offset + c, t.context_end);
            c = t.context_of;
        }
        if (k.prefix_tokens > 0) chain.emplace_back(k.prefix_key, k.prefix_tokens);
    }

    // The deepest segment of ``chain`` the cache holds (-1: none).
    static std::int64_t deepest(const PrefixCache& kv, const std::vector<std::pair<std::int64_t, std::int64_t>>& chain) {
        for (const auto& [key, end] : chain) {
            const std::int64_t id = kv.get(key);
            if (id >= 0) return id;
        }
        return -1;
    }

    // The agent of a call continuing a session: the last task id of its chain.
    static std::int64_t agent_of(const std::vector<std::pair<std::int64_t, std::int64_t>>& chain) {
        for (auto it = chain.rbegin(); it != chain.rend(); ++it)
            if (it->first >= 0) return it->first;
        throw std::logic_error("compiled run: a session's chain without a call");
    }

    // KvReuse.admit: a request reserves only the KV its cached prefix does not cover,
    // evicts cached segments to make room (never those it reuses), and prefills only its
    // uncached tokens.
    void kv_admit(Engine* eng, PrefixCache& kv) {
        const EngineClass& c = klass(eng);
        auto& chain = kv_.chain;
        while (!eng->waiting.empty() && eng->n_active < c.max_batch) {
            const std::int64_t gid = eng->waiting.front();
            Task& k = task(gid);
            kv_chain(gid, k, chain);
            const std::int64_t seg = kv_.reuse ? deepest(kv, chain) : -1;
            const std::int64_t base = seg >= 0 ? kv.segment(seg).end : 0;
            const std::int64_t priv = k.prompt + k.output - base;
            kv.hold(seg);
            const std::int64_t room = c.kv_cap - eng->kv_used;
            if (priv > room) {
                if (eng->n_active && priv > room + kv.evictable()) {
                    kv.release(seg);
                    break;  // FIFO: the head waits for memory
                }
                eng->kv_used -= kv.evict(priv - room, now_);
            }
            eng->waiting.pop_front();
            kv.touch(seg, now_);
            eng->n_active += 1;
            eng->kv_used += priv;
            k.kv_private = priv;
            k.kv_segment = seg;
            const std::int64_t usable = std::min(base, k.prompt - 1);  // cache.kv.cached_prefill
            const std::int64_t hit = usable > 0 ? usable / KV_BLOCK * KV_BLOCK : 0;
            const std::int64_t ji = job_index_[static_cast<std::size_t>(gid)];
            kv_.call_jobs.push_back(ji);
            kv_.prompt.push_back(k.prompt);
            kv_.cached.push_back(hit);
            if (k.context_of >= 0 && !chain.empty()) {
                const std::int64_t ctx = chain.front().first;
                const bool miss = seg < 0 || kv.segment(seg).key != ctx;
                const bool moved = task(ctx).server != eng->server;
                const std::int64_t agent = agent_of(chain);
                kv_.reentries[agent] += 1;
                kv_.re_agents.push_back(agent);
                kv_.re_jobs.push_back(ji);
                kv_.re_miss.push_back(miss);
                kv_.re_moved.push_back(moved);
            }
            k.started = now_;
            const std::int64_t prefill = k.prompt - hit;
            Prefill& prefill_s = prefills_[static_cast<std::size_t>(eng->klass)];
            if (hit) k.skipped = prefill_s(k.prompt) - prefill_s(prefill);
            push(now_ + prefill_s(prefill), EV_PREFILL_DONE, gid, 0);
        }
        refresh_busy(eng);
    }

    // KvReuse.prefilled: the prompt is computed; its prefix segments are cached (held by
    // the request until it ends), taken out of what the request reserves for itself.
    void kv_prefilled(PrefixCache& kv, std::int64_t gid, Task& k) {
        kv_.ttft_jobs.push_back(job_index_[static_cast<std::size_t>(gid)]);
        kv_.ttft.push_back(now_ - k.landed);
        auto& chain = kv_.chain;
        kv_chain(gid, k, chain);
        if (chain.empty() || !kv_.reuse) return;
        const std::int64_t seg = k.kv_segment;
        const std::int64_t base = seg >= 0 ? kv.segment(seg).end : 0;
        const std::int64_t top = deepest(kv, chain);
        const std::int64_t already = (top >= 0 ? kv.segment(top).end : 0) - base;
        std::size_t missing = chain.size();
        if (top >= 0) {
            const std::int64_t top_key = kv.segment(top).key;
            for (std::size_t i = 0; i < chain.size(); ++i)
                if (chain[i].first == top_key) {
                    missing = i;
                    break;
                }
        }
        std::int64_t leaf = top;
        for (std::size_t i = missing; i-- > 0;)
            leaf = kv.insert(chain[i].first, leaf, chain[i].second, now_, -INF, 0.0);
        kv.hold(leaf);
        kv.release(seg);
        engine(k.server, k.model)->kv_used -= already;
        k.kv_private -= chain.front().second - base;
        k.kv_segment = leaf;
    }

    // KvReuse.finished: the call's context (prompt + output) stays cached for the
    // session's next turn unless evicted; the rest of its reservation is freed.
    void kv_finished(Engine* eng, PrefixCache& kv, std::int64_t gid, Task& k) {
        std::int64_t priv = k.kv_private;
        const std::int64_t seg = k.kv_segment;
        k.kv_segment = -1;
        if (k.prefix_key != 0 && kv_.reuse) {
            const std::int64_t end = k.prompt + k.output;
            const std::int64_t tokens = end - (seg >= 0 ? kv.segment(seg).end : 0);
            if (kv.get(gid) < 0) {
                const auto [expiry, credit] = kv_terms(kv.policy(), gid, k);
                if (credit == 0.0 && kv.policy() == KV_AGENT_AWARE) kv.drop_credit(seg);
                kv.insert(gid, seg, end, now_, expiry, credit);
            } else {
                eng->kv_used -= tokens;  // a hedged copy cached it first
            }
            priv -= tokens;
        }
        kv.release(seg);
        eng->n_active -= 1;
        eng->kv_used -= priv;
    }

    // KvReuse.terms: (TTL expiry, agent-aware credit) of a finished call's segment.
    std::pair<double, double> kv_terms(std::int32_t policy, std::int64_t gid, const Task& k) {
        if (policy == KV_LRU) return {-INF, 0.0};
        const Job& j = job_of(gid);
        const std::int64_t i = gid - j.offset;
        if (policy == KV_TTL) {
            double tool_s = 0.0;
            bool has_tool = false, continues = false;
            for (std::int64_t e = k.children_at; e < k.children_at + k.n_children; ++e) {
                const std::int64_t ci = j.children[static_cast<std::size_t>(e)];
                const Task& child = j.tasks[static_cast<std::size_t>(ci)];
                if (!child.llm) {
                    const double est = child.cpu_work / kv_.mean_core_speed + child.ext_est;
                    tool_s = has_tool ? py_max(tool_s, est) : est;
                    has_tool = true;
                } else if (child.context_of == i) {
                    continues = true;
                }
            }
            if (has_tool)  // cache.kv.ttl_expiry
                return {now_ + py_min(kv_.ttl_margin * tool_s + kv_.ttl_slack_s, kv_.ttl_max_s), 0.0};
            return {continues ? now_ + kv_.ttl_slack_s : -INF, 0.0};
        }
        std::int64_t agent = gid;
        if (k.context_of >= 0) {
            kv_chain(gid, k, kv_.chain);
            agent = agent_of(kv_.chain);
        }
        const auto [waiting, continues] = kv_waiting_on(j, i);
        if (!continues) return {-INF, 0.0};
        const auto known = kv_.reentries.find(agent);
        const std::int64_t reentries = known == kv_.reentries.end() ? 0 : known->second;
        return {-INF, static_cast<double>(waiting * (1 + reentries))};
    }

    // KvReuse.waiting_on: unfinished tasks of the job downstream of task ``i`` that exist
    // already, and whether one of them continues ``i``'s context.
    std::pair<std::int64_t, bool> kv_waiting_on(const Job& j, std::int64_t i) {
        auto& seen = kv_.seen;
        seen.assign(j.tasks.size(), 0);
        std::vector<std::int64_t>& stack = kv_.stack;
        stack.clear();
        const Task& root = j.tasks[static_cast<std::size_t>(i)];
        for (std::int64_t e = root.children_at; e < root.children_at + root.n_children; ++e)
            stack.push_back(j.children[static_cast<std::size_t>(e)]);
        std::int64_t count = 0;
        bool continues = false;
        while (!stack.empty()) {
            const std::int64_t c = stack.back();
            stack.pop_back();
            const Task& t = j.tasks[static_cast<std::size_t>(c)];
            if (seen[static_cast<std::size_t>(c)] || t.done) continue;
            const std::int64_t rb = t.revealed_by;
            if (rb >= 0 && rb != i && !j.tasks[static_cast<std::size_t>(rb)].done) continue;
            seen[static_cast<std::size_t>(c)] = 1;
            ++count;
            continues = continues || t.context_of == i;
            for (std::int64_t e = t.children_at; e < t.children_at + t.n_children; ++e)
                stack.push_back(j.children[static_cast<std::size_t>(e)]);
        }
        return {count, continues};
    }

    // -- tools (sim.tools) ----------------------------------------------------------------
    // A repeated tool call whose original has finished takes its result: done after
    // lookup_s_, holding no core (sim.tools.ToolServers.cache_hit). False: run it.
    bool cache_hit(std::int64_t gid, Task& k) {
        const Job& j = job_of(gid);
        if (!j.tasks[static_cast<std::size_t>(k.repeat_of)].done) return false;
        const std::int64_t s = k.server;
        const double speed = speed_[static_cast<std::size_t>(s)];
        k.started = now_;
        b_.a.cpu_backlog[s] = py_max(0.0, b_.a.cpu_backlog[s] - k.cpu_work / speed);
        b_.a.tools_in_flight[s] -= 1;
        const double saved = k.cpu_work / speed + k.ext_latency - lookup_s_;
        hit_jobs_.push_back(job_index_[static_cast<std::size_t>(gid)]);
        hit_saved_.push_back(py_max(0.0, saved));
        k.skipped = saved;
        push(now_ + lookup_s_, EV_TASK_DONE, gid, 0);
        return true;
    }

    void cpu_account(std::int64_t s) {
        const std::size_t su = static_cast<std::size_t>(s);
        cpu_area_[su] += static_cast<double>(busy_cores_[su]) * (now_ - cpu_mark_[su]);
        cpu_mark_[su] = now_;
    }

    void start_tool(std::int64_t gid, std::int64_t s, Task& k) {
        cpu_account(s);
        busy_cores_[static_cast<std::size_t>(s)] += 1;
        b_.a.busy_cores[s] += 1;
        k.started = now_;
        push(now_ + k.cpu_work / speed_[static_cast<std::size_t>(s)], EV_CPU_DONE, gid, 0);
    }

    void on_cpu_done(std::int64_t gid) {
        release_deferred();
        Task& k = task(gid);
        const std::int64_t s = k.server;
        cpu_account(s);
        busy_cores_[static_cast<std::size_t>(s)] -= 1;
        b_.a.busy_cores[s] -= 1;
        b_.a.cpu_backlog[s] =
            py_max(0.0, b_.a.cpu_backlog[s] - k.cpu_work / speed_[static_cast<std::size_t>(s)]);
        auto& queue = cpu_queue_[static_cast<std::size_t>(s)];
        if (!queue.empty()) {
            const std::int64_t nxt = queue.front();
            queue.pop_front();
            start_tool(nxt, s, task(nxt));
        }
        after_cpu(gid, task(gid));
    }

    void after_cpu(std::int64_t gid, Task& k) {
        b_.a.tools_in_flight[k.server] -= 1;
        if (k.ext_latency > 0) {
            push(now_ + k.ext_latency, EV_TASK_DONE, gid, 0);
        } else {
            finish_task(gid);
        }
    }

    // -- LLM serving (sim.llm_serving) ---------------------------------------------------
    Engine* new_engine(std::int64_t s, std::int64_t m, double tp) {
        const std::size_t key = sm(s, m);
        Engine& eng = engines_[key];
        eng = Engine{};
        if (kv_.on) eng.kv.cache = std::make_unique<PrefixCache>(kv_.eviction, kv_.horizon_s);
        eng.server = s;
        eng.model = m;
        eng.tp = tp;
        eng.klass = engine_class_[key];
        if (eng.klass < 0 || eng.klass >= static_cast<std::int64_t>(classes_.size()))
            throw std::out_of_range("compiled run: engine class out of range");
        live_[key] = 1;
        order_[static_cast<std::size_t>(s)].push_back(static_cast<std::int64_t>(key));
        return &eng;
    }

    const EngineClass& klass(const Engine* eng) const {
        return classes_[static_cast<std::size_t>(eng->klass)];
    }

    // An engine the Python simulation made resident before the run (a deployment's, pinned
    // at time 0: its GPUs and state are in the books already).
    void resident(std::int64_t s, std::int64_t m, double tp) {
        Engine* eng = new_engine(s, m, tp);
        eng->state = ENG_READY;
    }

    void llm_arrive(std::int64_t gid, std::int64_t s, Task& k) {
        const std::int64_t m = k.model;
        Engine* eng = engine(s, m);
        if (eng == nullptr) {
            eng = new_engine(s, m, std::trunc(tp_[sm(s, m)]));  // int(t.tp[s, m])
            b_.a.engine_state[sm(s, m)] = ENG_LOADING;
            request_gpus(eng);
        }
        if (k.priority == INF) {
            eng->waiting.push_back(gid);
        } else {  // kernel.llm_engine.queue_by_priority: behind equal or smaller ones
            auto& waiting = eng->waiting;
            auto at = waiting.begin();
            while (at != waiting.end() && !(task(*at).priority > k.priority)) ++at;
            waiting.insert(at, gid);
        }
        if (eng->replica_at >= 0) ++replicas_.calls;
        eng->last_used = now_;
        set_idle(eng);
        if (eng->state == ENG_READY) admit(eng);
    }

    void admit(Engine* eng) {
        if (eng->kv.cache) {
            kv_admit(eng, *eng->kv.cache);
            return;
        }
        while (!eng->waiting.empty()) {
            const std::int64_t gid = eng->waiting.front();
            Task& k = task(gid);
            if (!eng->fits(klass(eng), k.prompt, k.output)) break;
            eng->waiting.pop_front();
            eng->n_active += 1;
            eng->kv_used += k.prompt + k.output;
            k.started = now_;
            push(now_ + prefills_[static_cast<std::size_t>(eng->klass)](k.prompt), EV_PREFILL_DONE,
                 gid, 0);
        }
        refresh_busy(eng);
    }

    void on_prefill_done(std::int64_t gid) {
        Task& k = task(gid);
        Engine* eng = engine(k.server, k.model);
        if (eng->kv.cache) kv_prefilled(*eng->kv.cache, gid, k);
        advance(eng);
        eng->n_decoding += 1;
        eng->ctx_sum += k.prompt + floor_div(k.output, 2);
        const std::int64_t steps = k.output > 1 ? k.output : 1;
        eng->marks.push_back(Mark{eng->vclock + static_cast<double>(steps), gid});
        std::push_heap(eng->marks.begin(), eng->marks.end(), MarkAfter{});
        reschedule(eng);
    }

    void advance(Engine* eng) {
        if (eng->n_decoding) eng->vclock += (now_ - eng->last_update) / eng->step;
        eng->last_update = now_;
    }

    void reschedule(Engine* eng) {
        const std::int64_t version = eng->version = seq_++;
        if (!eng->n_decoding) {
            if (!eng->marks.empty()) throw std::logic_error("compiled run: a mark without decoding");
            return;
        }
        eng->step = eng->step_s(klass(eng));
        const double left = py_max(0.0, eng->marks.front().at - eng->vclock);
        const double due = now_ + left * eng->step;
        const std::int64_t seq = seq_++;
        eng->due = due;
        eng->due_seq = seq;
        eng->due_version = version;
        if (eng->pending < 0 || due < eng->pending_at) {
            push_seq(due, seq, EV_DECODE, eng->server * n_models_ + eng->model, version);
            eng->pending = version;
            eng->pending_at = due;
        } else {
            ++decode_retimes_;
        }
    }

    bool decode_live(std::int64_t key, std::int64_t version) {
        Engine* eng = live_[static_cast<std::size_t>(key)] ? &engines_[static_cast<std::size_t>(key)]
                                                           : nullptr;
        if (eng != nullptr && version == eng->version) return true;
        ++decode_skipped_;
        if (eng == nullptr || version != eng->pending) return false;
        if (eng->due_version == eng->version) {
            push_seq(eng->due, eng->due_seq, EV_DECODE, key, eng->version);
            eng->pending = eng->version;
            eng->pending_at = eng->due;
        } else {
            eng->pending = -2;
        }
        return false;
    }

    void on_decode(std::int64_t key) {
        Engine* eng = &engines_[static_cast<std::size_t>(key)];
        const std::int64_t s = eng->server, m = eng->model;
        eng->pending = -2;
        advance(eng);
        auto& marks = eng->marks;
        if (!marks.empty()) eng->vclock = py_max(eng->vclock, marks.front().at);
        finished_.clear();
        while (!marks.empty() && marks.front().at <= eng->vclock + TOKEN_EPS) {
            std::pop_heap(marks.begin(), marks.end(), MarkAfter{});
            finished_.push_back(marks.back().gid);
            marks.pop_back();
        }
        for (std::int64_t gid : finished_) {
            Task& k = task(gid);
            eng->n_decoding -= 1;
            eng->ctx_sum -= k.prompt + floor_div(k.output, 2);
            if (eng->kv.cache) {
                kv_finished(eng, *eng->kv.cache, gid, k);
            } else {
                eng->n_active -= 1;
                eng->kv_used -= k.prompt + k.output;
            }
            eng->last_used = now_;
            b_.a.engine_batch[sm(s, m)] -= 1;
            b_.a.engine_ctx[sm(s, m)] -= static_cast<double>(k.prompt + floor_div(k.out_est, 2));
        }
        admit(eng);
        reschedule(eng);
        refresh_busy(eng);
        set_idle(eng);
        const std::vector<std::int64_t> done(finished_);
        for (std::int64_t gid : done) finish_task(gid);
        if (eng->idle && !gpu_wait_[static_cast<std::size_t>(s)].empty()) serve_gpu_wait(s);
    }

    void refresh_busy(Engine* eng) {
        const bool busy = eng->state == ENG_LOADING || eng->n_active > 0;
        if (busy == eng->busy) return;
        const std::size_t su = static_cast<std::size_t>(eng->server);
        gpu_area_[su] += busy_gpus_[su] * (now_ - gpu_mark_[su]);
        gpu_mark_[su] = now_;
        busy_gpus_[su] += busy ? eng->tp : -eng->tp;
        eng->busy = busy;
    }

    void set_idle(Engine* eng) {
        const bool idle = eng->state == ENG_READY && eng->n_requests() == 0;
        if (idle != eng->idle) {
            eng->idle = idle;
            b_.a.idle_gpus[eng->server] += idle ? eng->tp : -eng->tp;
            if (idle && eng->replica_at >= 0) arm_release(eng);
        }
    }

    // -- residency (sim.residency) --------------------------------------------------------
    void request_gpus(Engine* eng) {
        const std::int64_t s = eng->server;
        const std::size_t su = static_cast<std::size_t>(s);
        if (free_[su] < eng->tp) evict_for(s, eng->tp);
        if (free_[su] >= eng->tp) {
            start_load(eng);
        } else {
            gpu_wait_[su].push_back(static_cast<std::int64_t>(sm(s, eng->model)));
            const double guess = b_.a.est_work[s] / py_max(1.0, b_.a.n_assigned[s]);
            b_.a.engine_ready_at[sm(s, eng->model)] = now_ + load_s_[sm(s, eng->model)] + guess;
        }
    }

    // kernel.llm_engine.lru_evictions over the server's idle engines in the order they
    // were created (a dict's order), then sorted stably by last use.
    void evict_for(std::int64_t s, double need) {
        std::vector<Engine*> idle;
        for (std::int64_t key : order_[static_cast<std::size_t>(s)]) {
            Engine* e = &engines_[static_cast<std::size_t>(key)];
            if (e->idle) idle.push_back(e);
        }
        std::stable_sort(idle.begin(), idle.end(),
                         [](const Engine* x, const Engine* y) { return x->last_used < y->last_used; });
        double free = free_[static_cast<std::size_t>(s)];
        // ``free + sum(e.tp for e in order) < need``: the sum first, then the free GPUs
        double tps = 0.0;
        for (const Engine* e : idle) tps += e->tp;
        if (free + tps < need) return;
        std::vector<Engine*> victims;
        for (Engine* e : idle) {
            if (free >= need) break;
            victims.push_back(e);
            free += e->tp;
        }
        for (Engine* e : victims) unload(e);
    }

    void unload(Engine* e) {
        const std::int64_t s = e->server, m = e->model;
        const std::size_t su = static_cast<std::size_t>(s);
        if (e->kv.cache) kv_.lost += e->kv.cache->resident;
        e->idle = false;
        b_.a.idle_gpus[s] -= e->tp;
        if (e->replica_at >= 0) replica_gone(e);
        auto& order = order_[su];
        const std::int64_t key = static_cast<std::int64_t>(sm(s, m));
        order.erase(std::find(order.begin(), order.end(), key));
        const double tp = e->tp;
        live_[sm(s, m)] = 0;
        engines_[sm(s, m)] = Engine{};
        free_[su] += tp;
        b_.a.free_gpus[s] += tp;
        b_.a.engine_state[sm(s, m)] = ENG_ABSENT;
        note_held();
    }

    void start_load(Engine* eng) {
        const std::int64_t s = eng->server, m = eng->model;
        free_[static_cast<std::size_t>(s)] -= eng->tp;
        b_.a.free_gpus[s] -= eng->tp;
        eng->state = ENG_LOADING;
        ++model_loads_;
        const double ready_at = now_ + load_s_[sm(s, m)];
        b_.a.engine_ready_at[sm(s, m)] = ready_at;
        refresh_busy(eng);
        push(ready_at, EV_LOAD_DONE, s, m);
        note_held();
    }

    void on_load_done(std::int64_t s, std::int64_t m) {
        Engine* eng = engine(s, m);
        eng->state = ENG_READY;
        eng->last_update = now_;
        b_.a.engine_state[sm(s, m)] = ENG_READY;
        for (std::int64_t gid : eng->waiting) task(gid).loaded = now_;
        admit(eng);
        refresh_busy(eng);
        set_idle(eng);
        if (eng->idle && !gpu_wait_[static_cast<std::size_t>(s)].empty()) serve_gpu_wait(s);
        release_deferred();
    }

    void serve_gpu_wait(std::int64_t s) {
        auto& wait = gpu_wait_[static_cast<std::size_t>(s)];
        while (!wait.empty()) {
            Engine* eng = &engines_[static_cast<std::size_t>(wait.front())];
            if (free_[static_cast<std::size_t>(s)] < eng->tp) evict_for(s, eng->tp);
            if (free_[static_cast<std::size_t>(s)] < eng->tp) return;
            wait.pop_front();
            start_load(eng);
        }
    }

    // sim.redeploy.Redeployments.note_held: the GPUs held, one log entry per instant; the
    // sum of the free GPUs is Python's own builtin sum (its algorithm changed in 3.12).
    void note_held() {
        nb::list free;
        for (double f : free_) free.append(nb::float_(f));
        const double held = gpus_total_ - nb::cast<double>(held_sum_(free));
        if (!held_log_.empty() && held_log_.back().first == now_) {
            held_log_.back().second = held;
        } else {
            held_log_.emplace_back(now_, held);
        }
    }

    // -- completion (Simulation._finish, RunLedger.finish and release_children) ----------
    void finish_task(std::int64_t x) {
        Job& j = job_of(x);
        const std::int64_t ji = job_index_[static_cast<std::size_t>(x)];
        const std::int64_t i = x - j.offset;
        Task& k = j.tasks[static_cast<std::size_t>(i)];
        k.ended = now_;
        if (k.started == k.started) b_.a.attained[ji] += now_ - k.started;
        k.done = true;
        if (!j.ranks.empty() && j.rank_shape->decider[static_cast<std::size_t>(i)])
            j.ranks.clear();  // more of the workflow is revealed
        ++tasks_completed_;
        if (record_trace_)
            on_trace_(j.job, i, k.server, k.ready, k.landed, k.started, now_, k.loaded,
                      k.skipped);
        // unassign
        const std::int64_t s = k.server;
        b_.a.n_assigned[s] -= 1;
        b_.a.est_work[s] = b_.a.n_assigned[s] > 0 ? b_.a.est_work[s] - k.est : 0.0;
        release_deferred();
        // release_children
        for (std::int64_t c = 0; c < k.n_children; ++c) {
            const std::int64_t ci = j.children[static_cast<std::size_t>(k.children_at + c)];
            Task& child = j.tasks[static_cast<std::size_t>(ci)];
            child.missing -= 1;
            if (child.missing == 0) {
                child.ready = now_;
                pending_.push_back(j.offset + ci);
            }
        }
        j.left -= 1;
        if (!on_finished_.is_none()) on_finished_(ji, i, j.left == 0);
        if (j.left) return;
        job_end_[static_cast<std::size_t>(ji)] = now_;
        ++workflows_completed_;
        if (streamed_) retire(ji);
        in_system_ -= 1;
        if (done() && replicas_.loads) drop_replica_events();
        if (!on_done_.is_none()) on_done_(workflows_completed_);
    }

    // Simulation.done: every workflow has finished.
    bool done() const { return workflows_completed_ == n_jobs_; }

    // -- scale-out: timers and books (sim.replicas) ----------------------------------------
    // Replicas.arm_release: a replica fell idle; unload it at ``idle_s`` from now unless it
    // is used again (a later timer's mark supersedes this one).
    void arm_release(Engine* eng) {
        if (std::isinf(eng->idle_s) || done()) return;
        eng->idle_mark = replicas_.marks++;
        push(now_ + eng->idle_s, EV_RELEASE, static_cast<std::int64_t>(sm(eng->server, eng->model)),
             eng->idle_mark);
    }

    void on_release(std::int64_t key, std::int64_t mark) {
        const std::int64_t s = key / n_models_, m = key % n_models_;
        Engine* eng = engine(s, m);
        if (eng == nullptr || eng->idle_mark != mark || !eng->idle) return;
        unload(eng);
        ++replicas_.released;
        if (!gpu_wait_[static_cast<std::size_t>(s)].empty()) serve_gpu_wait(s);
        release_deferred();
    }

    // Replicas.gone: a replica leaves (released, or evicted for another model).
    void replica_gone(Engine* e) {
        replicas_.gpu_s += e->tp * (now_ - e->replica_at);
        auto& live = replicas_.live;
        live.erase(std::find(live.begin(), live.end(),
                             static_cast<std::int64_t>(sm(e->server, e->model))));
        e->replica_at = -1.0;
    }

    // Replicas.drop_events: every workflow is done; release timers and loads nothing waits
    // for must not run the clock on.
    void drop_replica_events() {
        heap_.erase(std::remove_if(heap_.begin(), heap_.end(),
                                   [](const Event& e) {
                                       return e.kind == EV_RELEASE || e.kind == EV_LOAD_DONE;
                                   }),
                    heap_.end());
        std::make_heap(heap_.begin(), heap_.end(), EventAfter{});
    }


    // A streamed run keeps the measured jobs' queue delays (tasks in id order) and drops
    // the job (RunLedger._retire_job).
    void retire(std::int64_t ji) {
        if (window_first_ <= ji && ji <= window_last_) {
            for (const Task& k : jobs_[static_cast<std::size_t>(ji)]->tasks)
                if (k.started == k.started) queue_delays_.push_back(k.started - k.landed);
        }
        jobs_[static_cast<std::size_t>(ji)].reset();
    }

    // -- the accounts' window marks (sim.accounts) -------------------------------------------
    void mark_window() {
        for (std::int64_t s = 0; s < t_.n; ++s) {
            const std::size_t su = static_cast<std::size_t>(s);
            cpu_account(s);
            gpu_area_[su] += busy_gpus_[su] * (now_ - gpu_mark_[su]);
            gpu_mark_[su] = now_;
        }
        marks_.emplace_back(gpu_area_, cpu_area_);
        marks_in_system_.push_back(in_system_area_);
    }

    const StaticTables& t_;
    const std::vector<ModelColumns>& cols_;
    std::vector<EngineClass> classes_;
    std::vector<Prefill> prefills_;
    std::vector<std::vector<std::int64_t>> model_classes_;
    std::int64_t n_models_;
    std::vector<double> tp_;
    std::vector<std::int64_t> engine_class_;
    std::vector<double> load_s_;
    std::vector<std::int64_t> cores_;
    std::vector<double> speed_;
    double gpus_total_;
    Books b_;
    std::vector<double> free_;
    std::vector<double> arrivals_;
    std::int64_t window_first_, window_last_;
    bool streamed_, record_trace_;
    nb::object job_at_, on_done_, on_trace_;
    TaskCosts* costs_;
    nb::object held_sum_;
    nb::dict model_index_;
    nb::str llm_ = nb::str("llm"), empty_ = nb::str("");
    // The attribute names read off the jobs, made once (a read by a str object skips
    // building one from a C string each time).
    struct Names {
        nb::str workflow{"workflow"}, tasks{"tasks"}, parents{"parents"}, children{"children"};
        nb::str edge_bytes{"edge_bytes"}, get{"get"}, kind{"kind"}, model{"model"};
        nb::str prompt_tokens{"prompt_tokens"}, output_tokens{"output_tokens"};
        nb::str output_tokens_est{"output_tokens_est"}, cpu_work{"cpu_work"};
        nb::str ext_latency{"ext_latency"}, ext_latency_est{"ext_latency_est"};
        nb::str revealed_by{"revealed_by"}, repeat_of{"repeat_of"}, prefix_id{"prefix_id"};
        nb::str prefix_tokens{"prefix_tokens"}, context_of{"context_of"};
    } names_;

    std::int64_t n_jobs_ = 0, n_tasks_ = 0;
    std::vector<Event> heap_;
    std::int64_t seq_ = 0;
    double now_ = 0.0;
    std::deque<std::int64_t> pending_;
    std::vector<std::int64_t> deferred_;          // offered again when capacity is freed
    struct ReplicaBooks {                         // sim.replicas.Replicas
        std::int64_t requests = 0, loads = 0, released = 0, calls = 0, marks = 0;
        double gpu_s = 0.0;
        std::vector<std::int64_t> live;  // engine keys, in load order
    } replicas_;
    std::unordered_set<std::int64_t> must_place_;  // offered with nothing left to happen
    std::int64_t deferrals_ = 0;
    JobStore jobs_;
    std::vector<std::int64_t> job_index_;
    std::vector<Engine> engines_;  // by server * models + model, live_ where resident
    std::vector<std::uint8_t> live_;
    std::vector<std::vector<std::int64_t>> order_;   // per server, in creation order
    std::vector<std::deque<std::int64_t>> gpu_wait_;  // per server, engines waiting for GPUs
    std::vector<std::deque<std::int64_t>> cpu_queue_;
    std::vector<std::int64_t> busy_cores_;
    std::vector<double> busy_gpus_, gpu_area_, cpu_area_, gpu_mark_, cpu_mark_;
    std::vector<double> job_end_, queue_delays_;
    std::vector<std::pair<std::vector<double>, std::vector<double>>> marks_;
    std::vector<double> marks_in_system_;
    std::vector<std::pair<double, double>> held_log_;
    std::vector<double> prefill_row_;
    std::vector<std::int64_t> parent_servers_, finished_;
    std::vector<std::uint8_t> every_server_;  // a tool's mask: every server
    std::vector<double> zeros_;             // a tool's imposed delay
    std::int32_t policy_ = POLICY_EFT;
    nb::object tokens_of_;
    nb::object token_head_obj_ = nb::none();  // tail's lengths in C++ (use_token_head)
    const TokenHead* token_head_ = nullptr;
    nb::object truths_of_ = nb::none();  // a redrawn task's truths by id (adopt), or None
    nb::object on_finished_ = nb::none();
    bool ranks_known_ = false, rank_order_ = false;
    MeanTransfer transfer_;
    bool placed_log_ = false;  // run_until: keep each placement in placed_
    // A --kv-policy run's KV reuse (use_kv): its settings, what KVRecord carries, and the
    // agents' re-entries so far.
    struct KvState {
        bool on = false, reuse = false;
        std::int32_t eviction = KV_LRU;
        double horizon_s = 0.0, mean_core_speed = 1.0;
        double ttl_margin = 0.0, ttl_slack_s = 0.0, ttl_max_s = 0.0;
        std::int64_t lost = 0;
        std::vector<std::int64_t> call_jobs, prompt, cached, ttft_jobs, re_agents, re_jobs;
        std::vector<double> ttft;
        std::vector<std::uint8_t> re_miss, re_moved;
        std::unordered_map<std::int64_t, std::int64_t> reentries;
        std::unordered_map<std::string, std::int64_t> prefix_keys;
        std::vector<std::pair<std::int64_t, std::int64_t>> chain;  // scratch
        std::vector<std::uint8_t> seen;
        std::vector<std::int64_t> stack;
    } kv_;
    Pcg64 rng_;  // p2c's and soft_eft's generator (use_rng)
    SoftSampler soft_;  // soft_eft's weights (use_soft_eft)
    std::vector<std::int64_t> feasible_;
    bool tool_cache_ = false;  // use_tool_cache
    double lookup_s_ = 0.0;
    std::vector<std::int64_t> hit_jobs_;
    std::vector<double> hit_saved_;
    std::vector<std::pair<std::int64_t, std::int64_t>> placed_;
    std::int64_t ticks_ = 0;  // events run, for the signal check
    std::int64_t in_system_ = 0;
    double in_system_area_ = 0.0;
    std::int64_t events_ = 0, decisions_ = 0, model_loads_ = 0, tasks_completed_ = 0;
    std::int64_t workflows_completed_ = 0, decode_retimes_ = 0, decode_skipped_ = 0;
    double bytes_moved_ = 0.0;
};

}  // namespace scalesched
