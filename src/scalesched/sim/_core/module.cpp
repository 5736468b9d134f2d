// Python bindings of the compiled simulation core (nanobind): the decision build
// (decision.hpp), the per-workflow estimates (task_costs.hpp), the task requests
// (requests.hpp) and tail's output lengths (token_head.hpp). The numpy arrays are read
// in place, never copied: the static tables are bound once per ClusterTables
// (DecisionCore), the live state's arrays are found on the view at each call (kept while
// they are the same objects).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <nanobind/stl/unique_ptr.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "decision.hpp"
#include "event_core.hpp"
#include "numpy_sum.hpp"
#include "prefix_cache.hpp"
#include "soft_eft.hpp"
#include "requests.hpp"
#include "task_costs.hpp"
#include "token_head.hpp"

namespace nb = nanobind;
using namespace scalesched;

template <typename T, typename... Extra>
using Arr = nb::ndarray<T, nb::device::cpu, Extra...>;
using F1 = Arr<const double, nb::ndim<1>, nb::c_contig>;
using I1 = Arr<const std::int64_t, nb::ndim<1>, nb::c_contig>;
using B1 = Arr<const bool, nb::ndim<1>, nb::c_contig>;
using F2 = Arr<const double, nb::ndim<2>>;
using S2 = Arr<const std::int8_t, nb::ndim<2>>;
using Out2 = Arr<double, nb::ndim<2>, nb::c_contig>;

namespace {

void need_len(std::int64_t got, std::int64_t want, const char* what) {
    if (got != want)
        throw std::invalid_argument(std::string(what) + ": length " + std::to_string(got) +
                                    ", expected " + std::to_string(want));
}

template <typename T, typename A>
Column<T> column(const A& a, std::int64_t m, std::int64_t n, const char* what) {
    need_len(static_cast<std::int64_t>(a.shape(0)), n, what);
    if (m < 0 || m >= static_cast<std::int64_t>(a.shape(1)))
        throw std::out_of_range(std::string(what) + ": model out of range");
    return Column<T>{a.data() + m * a.stride(1), a.stride(0)};
}

}  // namespace

// The static tables of one ClusterTables, bound once: it keeps every array alive.
class DecisionCore {
  public:
    DecisionCore(std::int64_t n, F1 decode_attn, F1 lin_flat, F1 inc_flat, I1 kv_capacity,
                 I1 max_batch, F1 nic, double latency_s, F1 cores, F1 core_speed,
                 std::vector<B1> masks, std::vector<bool> all_feasible, std::vector<I1> kk,
                 std::vector<I1> base, std::vector<F1> load, std::vector<nb::ndarray<>> tp)
        : decode_attn_(decode_attn), lin_flat_(lin_flat), inc_flat_(inc_flat),
          kv_capacity_(kv_capacity), max_batch_(max_batch), nic_(nic), cores_(cores),
          core_speed_(core_speed), masks_(masks), kk_(kk), base_(base), load_(load), tp_(tp) {
        for (int i = 0; i < N_NAMES; ++i) names_[i] = nb::str(NAMES[i]);
        for (int i = 0; i < 10; ++i) arrays_[i] = nb::str(ARRAYS[i]);
        const std::int64_t n_classes = static_cast<std::int64_t>(decode_attn.shape(0));
        need_len(static_cast<std::int64_t>(kv_capacity.shape(0)), n_classes, "kv_capacity");
        need_len(static_cast<std::int64_t>(max_batch.shape(0)), n_classes, "max_batch");
        need_len(static_cast<std::int64_t>(inc_flat.shape(0)),
                 static_cast<std::int64_t>(lin_flat.shape(0)), "increase table");
        for (auto* a : {&nic, &cores, &core_speed})
            need_len(static_cast<std::int64_t>(a->shape(0)), n, "per-server table");
        const std::size_t n_models = masks.size();
        if (all_feasible.size() != n_models || kk.size() != n_models ||
            base.size() != n_models || load.size() != n_models || tp.size() != n_models)
            throw std::invalid_argument("one column of each kind per model");
        t_ = StaticTables{n,
                          n_classes,
                          decode_attn.data(),
                          lin_flat.data(),
                          inc_flat.data(),
                          static_cast<std::int64_t>(lin_flat.shape(0)),
                          kv_capacity.data(),
                          max_batch.data(),
                          nic.data(),
                          latency_s,
                          cores.data(),
                          core_speed.data()};
        // the distinct NIC bandwidths and core speeds (read once here: nothing changes them
        // during a run, unlike the decode tables); few kinds (server types): the decision
        // divides once per kind
        if (distinct_kinds(nic.data(), n, nic_kind_, nic_kinds_)) {
            t_.nic_kind = nic_kind_.data();
            t_.nic_kinds = nic_kinds_.data();
            t_.n_nic_kinds = static_cast<std::int64_t>(nic_kinds_.size());
        }
        if (distinct_kinds(core_speed.data(), n, speed_kind_, speed_kinds_)) {
            t_.speed_kind = speed_kind_.data();
            t_.speed_kinds = speed_kinds_.data();
            t_.n_speed_kinds = static_cast<std::int64_t>(speed_kinds_.size());
        }
        for (std::size_t m = 0; m < n_models; ++m) {
            need_len(static_cast<std::int64_t>(masks[m].shape(0)), n, "mask");
            need_len(static_cast<std::int64_t>(kk[m].shape(0)), n, "kk");
            need_len(static_cast<std::int64_t>(base[m].shape(0)), n, "base");
            need_len(static_cast<std::int64_t>(load[m].shape(0)), n, "load");
            const nb::ndarray<>& t = tp[m];
            if (t.ndim() != 1 || static_cast<std::int64_t>(t.shape(0)) != n)
                throw std::invalid_argument("tp: one (n,) column per model");
            ModelColumns c{reinterpret_cast<const std::uint8_t*>(masks[m].data()),
                           static_cast<bool>(all_feasible[m]),
                           kk[m].data(),
                           base[m].data(),
                           load[m].data(),
                           {nullptr, 0},
                           {nullptr, 0}};
            if (t.dtype() == nb::dtype<double>()) {
                c.tp_f = {static_cast<const double*>(t.data()), t.stride(0)};
            } else if (t.dtype() == nb::dtype<std::int64_t>()) {
                c.tp_i = {static_cast<const std::int64_t*>(t.data()), t.stride(0)};
            } else {
                throw std::invalid_argument("tp: float64 or int64");
            }
            cols_.push_back(c);
        }
    }

    // make_decision's LLM branch into out's rows: 0 transfer (computed unless given; then
    // left unwritten), 1 wait, 2 load, 3 exec, 4 finish, 5 imposed, 6 resident. The task's
    // fields and the view's arrays are read off the objects themselves, so that a decision
    // costs one call: the arrays of the view seen last are kept, and converted again only
    // when an attribute holds another object (another view: a fork, a shadow state).
    void llm_view(nb::handle view, nb::handle task, F1 prefill, Out2 out,
                  std::optional<F1> transfer) {
        const std::int64_t m = nb::cast<std::int64_t>(attr(task, TASK_MODEL));
        const std::int64_t prompt = nb::cast<std::int64_t>(attr(task, TASK_PROMPT));
        const std::int64_t out_est = nb::cast<std::int64_t>(attr(task, TASK_OUTPUT));
        const double now = nb::cast<double>(attr(view, VIEW_NOW));
        const std::int64_t n = t_.n;
        if (m < 0 || m >= static_cast<std::int64_t>(cols_.size()))
            throw std::out_of_range("model out of range");
        need_len(static_cast<std::int64_t>(prefill.shape(0)), t_.n_classes, "prefill");
        refresh(view, 0, 8);
        const ViewArrays& a = view_;
        LlmState v{column<std::int8_t>(a.state, m, n, "engine_state"),
                   column<double>(a.f2[0], m, n, "engine_batch"),
                   column<double>(a.f2[1], m, n, "engine_ctx"),
                   column<double>(a.f2[2], m, n, "engine_ready_at"),
                   a.f1[0].data(),
                   a.f1[1].data(),
                   a.f1[2].data(),
                   a.f1[3].data(),
                   now};
        Outputs o = outputs(out, 7);
        read_parents(task);
        llm_decision(t_, cols_[static_cast<std::size_t>(m)], v, prompt, out_est, prefill.data(),
                     transfer_in(servers_, bytes_, transfer, o), o);
    }

    // make_decision's tool branch into out's rows 0 (transfer, unless given), 1 wait, 3 exec
    // and 4 finish (see llm_view).
    void tool_view(nb::handle view, nb::handle task, Out2 out, std::optional<F1> transfer) {
        const double cpu_work = nb::cast<double>(attr(task, TASK_CPU));
        const double ext = nb::cast<double>(attr(task, TASK_EXT));
        refresh(view, 8, 10);
        Outputs o = outputs(out, 5);
        read_parents(task);
        tool_decision(t_, cpu_work, ext, view_.f1[4].data(), view_.f1[5].data(),
                      transfer_in(servers_, bytes_, transfer, o), o);
    }

    const StaticTables& statics() const { return t_; }
    const std::vector<ModelColumns>& columns() const { return cols_; }

  private:
    // The transfer times a decision reads: the caller's (at_output_tokens shares them), or
    // computed into out's row 0.
    const double* transfer_in(const std::vector<std::int64_t>& servers,
                              const std::vector<double>& bytes, const std::optional<F1>& given,
                              const Outputs& o) const {
        if (given) {
            need_len(static_cast<std::int64_t>(given->shape(0)), t_.n, "transfer");
            return given->data();
        }
        transfer_rows(servers, bytes, o.transfer);
        return o.transfer;
    }

    Outputs outputs(Out2& out, std::int64_t rows) const {
        if (static_cast<std::int64_t>(out.shape(0)) != rows ||
            static_cast<std::int64_t>(out.shape(1)) != t_.n)
            throw std::invalid_argument("out: (" + std::to_string(rows) + ", n) float64");
        double* p = out.data();
        const std::int64_t n = t_.n;
        return Outputs{p,         p + n,     p + 2 * n,
                       p + 3 * n, p + 4 * n, rows > 5 ? p + 5 * n : nullptr,
                       rows > 6 ? p + 6 * n : nullptr};
    }

    void transfer_rows(const std::vector<std::int64_t>& servers, const std::vector<double>& bytes,
                       double* out) const {
        need_len(static_cast<std::int64_t>(bytes.size()), static_cast<std::int64_t>(servers.size()),
                 "parent_bytes");
        transfer_times(t_, servers.data(), bytes.data(), static_cast<std::int64_t>(servers.size()),
                       out);
    }

    enum Name {
        VIEW_NOW,
        TASK_MODEL,
        TASK_PROMPT,
        TASK_OUTPUT,
        TASK_CPU,
        TASK_EXT,
        TASK_SERVERS,
        TASK_BYTES,
        N_NAMES
    };
    static constexpr const char* NAMES[N_NAMES] = {
        "now",           "model",         "prompt_tokens",  "output_tokens_est",
        "cpu_work",      "ext_latency_est", "parent_servers", "parent_bytes"};
    // The view's arrays, in the order llm_view and tool_view read them: engine_state, the
    // three (n, models) float arrays, then six (n,) ones.
    static constexpr const char* ARRAYS[10] = {
        "engine_state", "engine_batch", "engine_ctx",     "engine_ready_at", "free_gpus",
        "idle_gpus",    "est_work",     "n_assigned",     "tools_in_flight", "cpu_backlog"};

    struct ViewArrays {
        nb::object seen[10];
        S2 state;
        F2 f2[3];
        F1 f1[6];
    };

    nb::object attr(nb::handle obj, Name name) const {
        PyObject* got = PyObject_GetAttr(obj.ptr(), names_[name].ptr());
        if (!got) throw nb::python_error();
        return nb::steal(got);
    }

    // Re-read the view's arrays [first, last) where the attribute now holds another object.
    // No implicit conversion: a copy would be stale at the next call.
    void refresh(nb::handle view, int first, int last) {
        for (int i = first; i < last; ++i) {
            PyObject* got = PyObject_GetAttr(view.ptr(), arrays_[i].ptr());
            if (!got) throw nb::python_error();
            nb::object obj = nb::steal(got);
            if (obj.is(view_.seen[i])) continue;
            try {
                if (i == 0) {
                    view_.state = nb::cast<S2>(obj, false);
                } else if (i < 4) {
                    view_.f2[i - 1] = nb::cast<F2>(obj, false);
                } else {
                    F1 arr = nb::cast<F1>(obj, false);
                    need_len(static_cast<std::int64_t>(arr.shape(0)), t_.n, ARRAYS[i]);
                    view_.f1[i - 4] = arr;
                }
            } catch (const nb::cast_error&) {
                const std::string want = i == 0  ? "an (n, models) int8 array"
                                         : i < 4 ? "an (n, models) float64 array"
                                                 : "a contiguous (n,) float64 array";
                throw nb::type_error(("compiled core: the view's " + std::string(ARRAYS[i]) +
                                      " must be " + want + " (read in place, never copied)")
                                         .c_str());
            }
            view_.seen[i] = obj;
        }
    }

    void read_parents(nb::handle task) {
        nb::object servers = attr(task, TASK_SERVERS), bytes = attr(task, TASK_BYTES);
        servers_.clear();
        bytes_.clear();
        for (nb::handle s : servers) servers_.push_back(nb::cast<std::int64_t>(s));
        for (nb::handle b : bytes) bytes_.push_back(nb::cast<double>(b));
    }

    nb::str names_[N_NAMES];
    nb::str arrays_[10];
    ViewArrays view_;
    std::vector<std::int64_t> servers_;
    std::vector<double> bytes_;
    F1 decode_attn_, lin_flat_, inc_flat_;
    I1 kv_capacity_, max_batch_;
    F1 nic_, cores_, core_speed_;
    std::vector<B1> masks_;
    std::vector<I1> kk_, base_;
    std::vector<F1> load_;
    std::vector<nb::ndarray<>> tp_;
    StaticTables t_{};
    std::vector<ModelColumns> cols_;
    std::vector<std::int64_t> nic_kind_, speed_kind_;
    std::vector<double> nic_kinds_, speed_kinds_;

    // The distinct values of ``values`` (bit patterns: NaN and -0.0 kept apart), in the
    // order seen, and each one's index; false (kinds unused) beyond 64 of them.
    static bool distinct_kinds(const double* values, std::int64_t n,
                               std::vector<std::int64_t>& kind, std::vector<double>& kinds) {
        for (std::int64_t i = 0; i < n; ++i) {
            const double x = values[i];
            std::size_t k = 0;
            while (k < kinds.size() && std::memcmp(&kinds[k], &x, sizeof(double)) != 0) ++k;
            if (k == kinds.size()) kinds.push_back(x);
            kind.push_back(static_cast<std::int64_t>(k));
        }
        return kinds.size() <= 64;
    }
};

// eft_argmin on a decision's arrays, read in place: -1 when they are not (n,) bool, float64
// and float64 arrays of one length (the caller then answers with numpy).
using AnyRO = nb::ndarray<nb::ro, nb::device::cpu>;
std::int64_t eft_choice(AnyRO mask, AnyRO finish, AnyRO imposed) {
    if (mask.ndim() != 1 || finish.ndim() != 1 || imposed.ndim() != 1) return -1;
    const std::int64_t n = static_cast<std::int64_t>(mask.shape(0));
    if (n == 0 || static_cast<std::int64_t>(finish.shape(0)) != n ||
        static_cast<std::int64_t>(imposed.shape(0)) != n)
        return -1;
    if (mask.dtype() != nb::dtype<bool>() || finish.dtype() != nb::dtype<double>() ||
        imposed.dtype() != nb::dtype<double>())
        return -1;
    return eft_argmin(n, static_cast<const std::uint8_t*>(mask.data()), mask.stride(0),
                      static_cast<const double*>(finish.data()), finish.stride(0),
                      static_cast<const double*>(imposed.data()), imposed.stride(0));
}

// FirstMin fed the servers of ``mask`` one by one (the whole runs' folded choice), for the
// tests to hold against numpy's argmin.
std::int64_t first_min_choice(B1 mask, F1 scores) {
    need_len(static_cast<std::int64_t>(scores.shape(0)), static_cast<std::int64_t>(mask.shape(0)),
             "scores");
    FirstMin pick;
    for (std::size_t i = 0; i < mask.shape(0); ++i)
        if (mask.data()[i]) pick.offer(static_cast<std::int64_t>(i), scores.data()[i]);
    return pick.at;
}

// A whole run on the compiled core (event_core.hpp), bound to one Python Simulation: its
// live numpy books are written in place; the rest is read back by sim.compiled_run.
using W1 = Arr<double, nb::ndim<1>, nb::c_contig>;
using W2 = Arr<double, nb::ndim<2>, nb::c_contig>;
using S2w = Arr<std::int8_t, nb::ndim<2>, nb::c_contig>;
using Lin2 = Arr<const double, nb::ndim<2>, nb::c_contig>;
using Resident = std::vector<std::tuple<std::int64_t, std::int64_t, double>>;

// ``out[:] = values`` (the same length).
inline void copy_into(const std::vector<double>& values, W1& out) {
    if (out.shape(0) != values.size()) throw std::invalid_argument("copy_into: a length differs");
    std::copy(values.begin(), values.end(), out.data());
}

class EventRun {
  public:
    // classes: per engine class (prefill spec, max_batch, kv capacity); model_classes: the
    // classes serving each model; per (server, model), row-major: tp, engine class, load
    // seconds; resident: the engines live before the run, per server in creation order.
    EventRun(nb::object decision_core, nb::object task_costs,
             std::vector<std::tuple<PrefillSpec, std::int64_t, std::int64_t>> classes,
             Lin2 decode_lin, F1 decode_attn, std::vector<std::vector<std::int64_t>> model_classes,
             std::int64_t n_models, std::vector<double> tp, std::vector<std::int64_t> engine_class,
             std::vector<double> load_s, Resident resident, std::vector<std::int64_t> cores,
             std::vector<double> speed, double gpus_total, std::vector<W1> books, S2w engine_state,
             std::vector<W2> engine_books, std::vector<W1> job_books, std::vector<double> free_list,
             std::vector<double> arrivals, std::int64_t window_first, std::int64_t window_last,
             bool streamed, bool record_trace, nb::object job_at,
             std::optional<nb::object> on_done, nb::object on_trace, nb::object held_sum,
             nb::dict model_index)
        : decision_core_(decision_core), task_costs_(task_costs), decode_lin_(decode_lin),
          books_(books), engine_state_(engine_state), engine_books_(engine_books),
          job_books_(job_books) {
        const DecisionCore& dc = nb::cast<const DecisionCore&>(decision_core);
        TaskCosts* costs = &nb::cast<TaskCosts&>(task_costs);
        const StaticTables& t = dc.statics();
        const std::int64_t n = t.n, n_classes = static_cast<std::int64_t>(classes.size());
        if (books.size() != 7 || engine_books.size() != 3 || job_books.size() != 3)
            throw std::invalid_argument("books: 7 per-server, 3 per-engine, 3 per-job arrays");
        for (const W1& b : books) need_len(static_cast<std::int64_t>(b.shape(0)), n, "book");
        for (const W1& b : job_books)
            need_len(static_cast<std::int64_t>(b.shape(0)),
                     static_cast<std::int64_t>(arrivals.size()), "per-job book");
        auto check2 = [&](std::size_t rows, std::size_t cols, const char* what) {
            need_len(static_cast<std::int64_t>(rows), n, what);
            need_len(static_cast<std::int64_t>(cols), n_models, what);
        };
        check2(engine_state.shape(0), engine_state.shape(1), "engine_state");
        for (const W2& b : engine_books) check2(b.shape(0), b.shape(1), "engine book");
        for (auto* v : {&tp, &load_s})
            need_len(static_cast<std::int64_t>(v->size()), n * n_models, "per-engine table");
        need_len(static_cast<std::int64_t>(engine_class.size()), n * n_models, "engine_class");
        // (a cluster without engines keeps a placeholder row in its decode tables)
        if (static_cast<std::int64_t>(decode_lin.shape(0)) < n_classes ||
            static_cast<std::int64_t>(decode_attn.shape(0)) < n_classes)
            throw std::invalid_argument("decode tables: a row per engine class");
        std::vector<EngineClass> engine_classes;
        std::vector<Prefill> prefills;
        const std::int64_t width = static_cast<std::int64_t>(decode_lin.shape(1));
        for (std::int64_t k = 0; k < n_classes; ++k) {
            const auto& [spec, max_batch, kv_cap] = classes[static_cast<std::size_t>(k)];
            const auto& [eng, plain, lin, max_n, slope, p2] = spec;
            prefills.emplace_back(eng, plain, PlainPrefill{lin, max_n, slope, p2});
            engine_classes.push_back(EngineClass{max_batch, kv_cap, decode_lin.data() + k * width,
                                                 width - 1, decode_attn.data()[k]});
        }
        LedgerArrays a{books[0].data(),        books[1].data(),        books[2].data(),
                       books[3].data(),        books[4].data(),        books[5].data(),
                       books[6].data(),        engine_state.data(),    engine_books[0].data(),
                       engine_books[1].data(), engine_books[2].data(), job_books[0].data(),
                       job_books[1].data(),    job_books[2].data()};
        core_ = std::make_unique<EventCore>(
            t, dc.columns(), std::move(engine_classes), std::move(prefills),
            std::move(model_classes), n_models, std::move(tp), std::move(engine_class),
            std::move(load_s), resident, std::move(cores), std::move(speed), gpus_total, a,
            std::move(free_list), std::move(arrivals), window_first, window_last, streamed,
            record_trace, std::move(job_at), on_done ? *on_done : nb::none(), std::move(on_trace), costs,
            std::move(held_sum), std::move(model_index));
    }

    // A fork: the same bindings over a copy of the run's state (its books owned).
    EventRun(const EventRun& other)
        : decision_core_(other.decision_core_), task_costs_(other.task_costs_),
          decode_lin_(other.decode_lin_), books_(other.books_),
          engine_state_(other.engine_state_), engine_books_(other.engine_books_),
          job_books_(other.job_books_), core_(std::make_unique<EventCore>(*other.core_)) {}
    EventRun(EventRun&&) = default;
    EventRun& operator=(const EventRun&) = delete;

    EventCore& core() { return *core_; }

  private:
    nb::object decision_core_, task_costs_;
    Lin2 decode_lin_;
    std::vector<W1> books_;
    S2w engine_state_;
    std::vector<W2> engine_books_;
    std::vector<W1> job_books_;
    std::unique_ptr<EventCore> core_;
};

NB_MODULE(_simcore, m) {
    m.doc() = "scalesched's compiled simulation core (the default; SCALESCHED_CORE=python for the Python engine).";
    nb::class_<DecisionCore>(m, "DecisionCore")
        .def(nb::init<std::int64_t, F1, F1, F1, I1, I1, F1, double, F1, F1, std::vector<B1>,
                      std::vector<bool>, std::vector<I1>, std::vector<I1>, std::vector<F1>,
                      std::vector<nb::ndarray<>>>())
        .def("llm_view", &DecisionCore::llm_view)
        .def("tool_view", &DecisionCore::tool_view);
    nb::class_<TaskCosts>(m, "TaskCosts")
        .def(nb::init<const std::vector<PrefillSpec>&, const std::vector<std::vector<ClassSpec>>&,
                      const std::vector<std::vector<ConfigSpec>>&, nb::dict, double, double,
                      double>())
        .def("fastest_llm", &TaskCosts::fastest_llm)
        .def("mean_llm", &TaskCosts::mean_llm)
        .def("any_llm", &TaskCosts::any_llm)
        .def("bounds", &TaskCosts::bounds)
        .def("mean_costs", &TaskCosts::mean_costs);
    nb::class_<RequestBuilder>(m, "RequestBuilder")
        .def(nb::init<nb::handle, nb::list, nb::dict, nb::dict>())
        .def("request", &RequestBuilder::request, nb::arg("tasks"), nb::arg("gid"),
             nb::arg("servers"), nb::arg("now"), nb::arg("attained"),
             nb::arg("rank") = nb::none());
    nb::class_<TokenHead>(m, "TokenHead")
        .def(nb::init<const std::vector<TokenHead::Matrix>&, const std::vector<TokenHead::Vector>&,
                      TokenHead::Vector, TokenHead::Vector, std::int64_t, nb::dict, nb::dict,
                      std::int64_t, nb::dict, double>())
        .def("workflow_lengths", &TokenHead::workflow_lengths)
        .def("workflow_values", &TokenHead::workflow_values);
    nb::class_<EventRun>(m, "EventRun")
        .def(nb::init<nb::object, nb::object,
                      std::vector<std::tuple<PrefillSpec, std::int64_t, std::int64_t>>, Lin2, F1,
                      std::vector<std::vector<std::int64_t>>, std::int64_t, std::vector<double>,
                      std::vector<std::int64_t>, std::vector<double>, Resident,
                      std::vector<std::int64_t>, std::vector<double>, double, std::vector<W1>,
                      S2w, std::vector<W2>, std::vector<W1>, std::vector<double>,
                      std::vector<double>, std::int64_t, std::int64_t, bool, bool, nb::object,
                      std::optional<nb::object>, nb::object, nb::object, nb::dict>())
        .def("run", [](EventRun& r, std::int32_t policy, std::optional<nb::object> tokens_of) {
            r.core().run(policy, tokens_of ? *tokens_of : nb::none());
        })
        .def("use_token_head", [](EventRun& r, nb::object head) {
            r.core().use_token_head(std::move(head));
        })
        .def("counters", [](EventRun& r) {
            EventCore& c = r.core();
            nb::dict d;
            d["now"] = c.now();
            d["events"] = c.events();
            d["decisions"] = c.decisions();
            d["model_loads"] = c.model_loads();
            d["bytes_moved"] = c.bytes_moved();
            d["tasks_completed"] = c.tasks_completed();
            d["workflows_completed"] = c.workflows_completed();
            d["decode_retimes"] = c.decode_retimes();
            d["decode_skipped"] = c.decode_skipped();
            d["in_system"] = c.in_system();
            d["in_system_area"] = c.in_system_area();
            d["seq"] = c.seq();
            d["n_tasks"] = c.n_tasks();
            d["deferrals"] = c.deferrals();
            return d;
        })
        .def("server_books", [](EventRun& r) {
            EventCore& c = r.core();
            return nb::make_tuple(c.busy_cores_list(), c.free_list(), c.busy_gpus(),
                                  c.gpu_area(), c.cpu_area(), c.gpu_mark(), c.cpu_mark());
        })
        .def("window_marks", [](EventRun& r) {
            EventCore& c = r.core();
            return nb::make_tuple(c.window_marks(), c.window_in_system());
        })
        .def("held_log", [](EventRun& r) { return r.core().held_log(); })
        .def("job_end", [](EventRun& r) { return r.core().job_end(); })
        // A long run's per-job and per-task results, copied into arrays the caller made
        // (a list of a million floats would cost four times their memory on the way).
        .def("job_end_into", [](EventRun& r, W1 out) { copy_into(r.core().job_end(), out); })
        .def("n_queue_delays", [](EventRun& r) { return r.core().queue_delays().size(); })
        .def("queue_delays_into",
             [](EventRun& r, W1 out) { copy_into(r.core().queue_delays(), out); })
        .def("job_left", [](EventRun& r) { return r.core().job_left(); })
        .def("per_id", [](EventRun& r, int field) { return r.core().per_id(field); })
        .def("per_id_int", [](EventRun& r, int field) { return r.core().per_id_int(field); })
        .def("per_id_done", [](EventRun& r) { return r.core().per_id_done(); })
        .def("adopt",
             [](EventRun& r, nb::handle sim, std::int64_t seq, std::int32_t policy,
                std::optional<nb::object> tokens_of, std::optional<nb::object> truths_of) {
                 r.core().adopt(sim, seq, policy, tokens_of ? *tokens_of : nb::none(),
                                truths_of ? *truths_of : nb::none());
             })
        .def("run_until",
             [](EventRun& r, std::int32_t policy, std::optional<nb::object> tokens_of,
                double end) {
                 return r.core().run_until(policy, tokens_of ? *tokens_of : nb::none(), end);
             })
        .def("next_ready", [](EventRun& r, double end) { return r.core().next_ready(end); })
        .def("next_instant", [](EventRun& r, double end) { return r.core().next_instant(end); })
        .def("apply", [](EventRun& r, std::int64_t gid, std::int64_t server, double est,
                         double priority) { r.core().apply(gid, server, est, priority); })
        .def("defer", [](EventRun& r, std::int64_t gid) { r.core().defer(gid); })
        .def("load_replica", [](EventRun& r, std::int64_t s, std::int64_t m, double idle_s) {
            r.core().load_replica(s, m, idle_s);
        })
        .def("replica_books", [](EventRun& r) { return r.core().replica_books(); })
        .def("may_defer", [](EventRun& r, std::int64_t gid) { return r.core().may_defer(gid); })
        .def("use_kv",
             [](EventRun& r, std::int32_t eviction, bool reuse, double horizon_s,
                double mean_core_speed, double ttl_margin, double ttl_slack_s, double ttl_max_s,
                std::int64_t block) {
                 r.core().use_kv(eviction, reuse, horizon_s, mean_core_speed, ttl_margin,
                                 ttl_slack_s, ttl_max_s, block);
             })
        .def("kv_records", [](EventRun& r) { return r.core().kv_records(); })
        .def("adopt_kv", [](EventRun& r, nb::handle caches, nb::handle held, nb::handle reentries,
                            std::int64_t lost) { r.core().adopt_kv(caches, held, reentries, lost); })
        .def("use_rng",
             [](EventRun& r, std::uint64_t state_hi, std::uint64_t state_lo, std::uint64_t inc_hi,
                std::uint64_t inc_lo, bool has_uint32, std::uint32_t uinteger) {
                 r.core().use_rng(Pcg64(state_hi, state_lo, inc_hi, inc_lo, has_uint32, uinteger));
             })
        .def("n_servers", [](EventRun& r) { return r.core().n_servers(); })
        .def("use_soft_eft",
             [](EventRun& r, double sharpness, nb::object log1p, nb::object exp, nb::object rel,
                nb::object weights) {
                 r.core().use_soft_eft(sharpness, std::move(log1p), std::move(exp),
                                       std::move(rel), std::move(weights));
             })
        .def("rng_state", [](EventRun& r) {
            const Pcg64& g = r.core().rng();
            return nb::make_tuple(g.state_hi(), g.state_lo(), g.inc_hi(), g.inc_lo(),
                                  g.has_uint32(), g.uinteger());
        })
        .def("use_tool_cache",
             [](EventRun& r, double lookup_s) { r.core().use_tool_cache(lookup_s); })
        .def("tool_cache_hits", [](EventRun& r) { return r.core().tool_cache_hits(); })
        .def("on_finished", [](EventRun& r, nb::object callback) {
            r.core().on_finished(std::move(callback));
        })
        .def("heft_ranks", [](EventRun& r, double latency_s, double mean_nic_bytes_per_s,
                              bool ready_order) {
            r.core().heft_ranks(latency_s, mean_nic_bytes_per_s, ready_order);
        })
        .def("rank_of", [](EventRun& r, std::int64_t gid) { return r.core().rank_of(gid); })
        .def("clock", [](EventRun& r) {
            EventCore& c = r.core();
            return nb::make_tuple(c.now(), c.in_system_area(), c.events(), c.decisions());
        })
        .def("fork", [](const EventRun& r) { return EventRun(r); })
        .def("trial", [](EventRun& r, std::int64_t gid, std::int64_t server, double est,
                         double priority, double end) {
            EventCore fork(r.core());  // the adopted state stays as it was for the next trial
            return fork.trial(gid, server, est, priority, end);
        });
    // One engine's prefix cache (prefix_cache.hpp), bound for its equivalence test with
    // cache.kv.PrefixCache; segments by creation number, -1 for none.
    nb::class_<PrefixCache>(m, "PrefixCache")
        .def(nb::init<std::int32_t, double>())
        .def("get", &PrefixCache::get)
        .def("ids", &PrefixCache::ids)
        .def("segment",
             [](const PrefixCache& c, std::int64_t id) {
                 const KvSegment& s = c.segment(id);
                 return nb::make_tuple(s.key, s.parent, s.end, s.tokens, s.children, s.refs,
                                       s.last, s.bonus, s.prio, s.expiry);
             })
        .def("hold", &PrefixCache::hold)
        .def("release", &PrefixCache::release)
        .def("drop_credit", &PrefixCache::drop_credit)
        .def("touch", &PrefixCache::touch)
        .def("insert", &PrefixCache::insert)
        .def("evict", &PrefixCache::evict)
        .def("copy", [](const PrefixCache& c) { return PrefixCache(c); })
        .def_ro("resident", &PrefixCache::resident)
        .def_ro("held", &PrefixCache::held)
        .def_ro("evicted", &PrefixCache::evicted)
        .def_prop_ro("evictable", &PrefixCache::evictable);
    // numpy's choice of two from PCG64 states (numpy_random.hpp), bound for its test.
    m.def("pcg64_choose_two", [](std::uint64_t state_hi, std::uint64_t state_lo,
                                 std::uint64_t inc_hi, std::uint64_t inc_lo, bool has_uint32,
                                 std::uint32_t uinteger, const std::vector<std::int64_t>& sizes) {
        Pcg64 g(state_hi, state_lo, inc_hi, inc_lo, has_uint32, uinteger);
        std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
        for (std::int64_t n : sizes) {
            std::int64_t a = 0, b = 0;
            g.choose_two(n, a, b);
            pairs.emplace_back(a, b);
        }
        return nb::make_tuple(pairs, nb::make_tuple(g.state_hi(), g.state_lo(), g.inc_hi(),
                                                    g.inc_lo(), g.has_uint32(), g.uinteger()));
    });
    // soft_eft's normalised cumulative weights (soft_eft.hpp) with numpy's own kernels,
    // bound for its test against numpy's: (feasible servers, their cdf).
    m.def("soft_eft_cdf", [](double sharpness, const std::vector<double>& finish,
                             const std::vector<std::uint8_t>& mask) {
        const std::int64_t n = static_cast<std::int64_t>(finish.size());
        if (mask.size() != finish.size()) throw std::invalid_argument("one mask entry per server");
        nb::module_ np = nb::module_::import_("numpy");
        SoftSampler sampler(sharpness, np.attr("log1p"), np.attr("exp"), np.attr("zeros")(n),
                            np.attr("zeros")(n), n);
        std::vector<std::int64_t> feasible;
        const std::size_t f = sampler.weigh(finish.data(), mask.data(), n, feasible);
        return nb::make_tuple(feasible, std::vector<double>(sampler.cdf(), sampler.cdf() + f));
    });
    // numpy's pairwise sum (numpy_sum.hpp), bound for its test against np.sum.
    m.def("numpy_sum", [](nb::ndarray<const double, nb::ndim<1>, nb::c_contig> a) {
        return numpy_pairwise_sum(a.data(), static_cast<std::int64_t>(a.shape(0)));
    });
    m.def("first_min_choice", &first_min_choice);
    m.def("eft_choice", &eft_choice, nb::arg("mask").noconvert(), nb::arg("finish").noconvert(),
          nb::arg("imposed").noconvert());
}
