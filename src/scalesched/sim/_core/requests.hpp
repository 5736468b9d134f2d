// RequestBuilder: what a scheduler sees of a task (kernel.ledger.RunTasks.request and
// kernel.requests.task_request), built in C++ into the same frozen TaskRequest.
//
// Why this is exact: every field holds the very object the Python code would put there
// (the task's own ints, floats and strings, the run's server ids, the edge sizes), or the
// result of the same Python operation done through the C API (``now - job.arrival``,
// ``float(attained[ji])``, the rank from the ranks' own ``rank``). The object is allocated
// and its slots set directly, which is what the dataclass's __init__ does
// (object.__setattr__ on a frozen class); the field names are checked against the
// dataclass when bound, so a field added in Python and not here is an error, not a
// silently missing value.
#pragma once

#include <nanobind/nanobind.h>
#include <structmember.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace scalesched {

namespace nb = nanobind;

class RequestBuilder {
  public:
    // request_type: TaskRequest; fields: its field names in order; defaults: the default of
    // each field that task_request leaves to the dataclass (the prefix identity).
    RequestBuilder(nb::handle request_type, nb::list fields, nb::dict defaults,
                   nb::dict model_index)
        : type_(nb::borrow(request_type)), defaults_(std::move(defaults)),
          model_index_(std::move(model_index)) {
        if (!PyType_Check(type_.ptr())) throw std::invalid_argument("request_type: a class");
        for (int i = 0; i < N_NAMES; ++i) names_[i] = nb::str(NAMES[i]);
        for (int f = FIRST_FIELD; f < N_NAMES; ++f) {
            const std::size_t k = static_cast<std::size_t>(f - FIRST_FIELD);
            if (k >= nb::len(fields) || !nb::str(fields[k]).equal(names_[f]))
                throw std::invalid_argument(std::string("TaskRequest's fields changed: ") +
                                            NAMES[f] + " expected at position " +
                                            std::to_string(k));
        }
        if (nb::len(fields) != static_cast<std::size_t>(N_NAMES - FIRST_FIELD))
            throw std::invalid_argument("TaskRequest's fields changed: more fields");
        for (int f = PREFIX_ID; f <= CONTEXT_KEY; ++f)
            if (!defaults_.contains(names_[f]))
                throw std::invalid_argument(std::string("no default for ") + NAMES[f]);
        llm_ = nb::str("llm");
        zero_ = nb::float_(0.0);
        find_slots();
    }

    // RunTasks.request(gid, servers, now, attained) on ``tasks`` (a RunTasks); ``rank``,
    // where not None, is the task's HEFT rank as the caller knows it (the compiled core's,
    // ranks.hpp: the same double), instead of asking the ranks of ``tasks``.
    nb::object request(nb::handle tasks, nb::handle gid, nb::handle servers, nb::handle now,
                       nb::handle attained, nb::handle rank_known) {
        nb::object ji = item(attr(tasks, JOB_OF), gid);
        nb::object job = item(attr(tasks, JOBS), ji);
        nb::object off = item(attr(tasks, OFFSET), ji);
        nb::object i = steal(PyNumber_Subtract(gid.ptr(), off.ptr()));
        nb::object wf = attr(job, WORKFLOW);
        nb::object parents = item(attr(wf, PARENTS), i);
        nb::object task = item(attr(wf, TASKS), i);
        nb::object rank;
        if (rank_known.is_none()) {
            nb::object ranks = attr(tasks, RANKS);
            rank = steal(PyObject_CallMethodObjArgs(ranks.ptr(), names_[RANK].ptr(), ji.ptr(),
                                                    i.ptr(), nullptr));
        } else {
            rank = nb::borrow(rank_known);
        }
        nb::object age = steal(PyNumber_Subtract(now.ptr(), attr(job, ARRIVAL).ptr()));
        nb::object got = item(attained, ji);
        nb::object attained_s = steal(PyNumber_Float(got.ptr()));

        nb::object out = steal(reinterpret_cast<PyTypeObject*>(type_.ptr())
                                   ->tp_alloc(reinterpret_cast<PyTypeObject*>(type_.ptr()), 0));
        nb::object kind = attr(task, KIND);
        set(out, KIND, kind);
        set(out, MODEL, model_of(task, kind));
        for (Name n : {PROMPT_TOKENS, OUTPUT_TOKENS_EST, CPU_WORK, EXT_LATENCY_EST})
            set(out, n, attr(task, n));
        set(out, PARENT_SERVERS, parent_servers(parents, off, servers));
        set(out, PARENT_BYTES, parent_bytes(wf, parents, i));
        set(out, RANK_FIELD, rank);
        set(out, WORKFLOW_AGE, age);
        set(out, ATTAINED_S, attained_s);
        set(out, ROLE, attr(task, ROLE));
        set(out, PATTERN, attr(wf, PATTERN));
        set(out, DIFFICULTY_HINT, attr(task, DIFFICULTY_HINT));
        nb::object prefix = attr(task, PREFIX_ID);
        if (prefix.is_none()) {
            for (int f = PREFIX_ID; f <= CONTEXT_KEY; ++f)
                set(out, static_cast<Name>(f), defaults_[names_[f]]);
        } else {
            with_prefix(out, wf, task, i, prefix);
        }
        return out;
    }

  private:
    enum Name {
        JOB_OF, JOBS, OFFSET, RANKS, RANK, WORKFLOW, ARRIVAL, PARENTS, TASKS, EDGE_BYTES,
        NAME, PREFIX_TOKENS_OF, CONTEXT_OF, FIRST_FIELD,
        KIND = FIRST_FIELD, MODEL, PROMPT_TOKENS, OUTPUT_TOKENS_EST, CPU_WORK, EXT_LATENCY_EST,
        PARENT_SERVERS, PARENT_BYTES, RANK_FIELD, WORKFLOW_AGE, ATTAINED_S, ROLE, PATTERN,
        DIFFICULTY_HINT, PREFIX_ID, PREFIX_TOKENS, CALL_KEY, CONTEXT_KEY, N_NAMES
    };
    // Attributes read, then TaskRequest's fields in declaration order (checked when bound).
    // The task's prefix_tokens is read under PREFIX_TOKENS_OF, the same name as the field.
    static constexpr const char* NAMES[N_NAMES] = {
        "job_of", "jobs", "offset", "ranks", "rank", "workflow", "arrival", "parents", "tasks",
        "edge_bytes", "name", "prefix_tokens", "context_of",
        "kind", "model", "prompt_tokens", "output_tokens_est", "cpu_work", "ext_latency_est",
        "parent_servers", "parent_bytes", "rank", "workflow_age", "attained_s", "role",
        "pattern", "difficulty_hint", "prefix_id", "prefix_tokens", "call_key", "context_key"};

    // ``MODEL_INDEX[task.model] if task.kind == "llm" and task.model else -1``.
    nb::object model_of(nb::handle task, nb::handle kind) {
        const int eq = PyObject_RichCompareBool(kind.ptr(), llm_.ptr(), Py_EQ);
        if (eq < 0) throw nb::python_error();
        if (eq) {
            nb::object name = attr(task, MODEL);
            const int truthy = PyObject_IsTrue(name.ptr());
            if (truthy < 0) throw nb::python_error();
            if (truthy) return item(model_index_, name);
        }
        return nb::int_(-1);
    }

    // ``tuple(servers[off + p] for p in parents)``.
    static nb::object parent_servers(nb::handle parents, nb::handle off, nb::handle servers) {
        nb::list out;
        for (nb::handle p : parents) {
            nb::object k = steal(PyNumber_Add(off.ptr(), p.ptr()));
            out.append(item(servers, k));
        }
        return steal(PyList_AsTuple(out.ptr()));
    }

    // ``tuple(wf.edge_bytes.get((p, i), 0.0) for p in wf.parents[i])``.
    nb::object parent_bytes(nb::handle wf, nb::handle parents, nb::handle i) {
        nb::object edges = attr(wf, EDGE_BYTES);
        const bool plain = PyDict_CheckExact(edges.ptr());
        nb::list out;
        for (nb::handle p : parents) {
            nb::object key = steal(PyTuple_Pack(2, p.ptr(), i.ptr()));
            if (!plain) {
                out.append(edges.attr("get")(key, 0.0));
                continue;
            }
            PyObject* got = PyDict_GetItemWithError(edges.ptr(), key.ptr());
            if (!got && PyErr_Occurred()) throw nb::python_error();
            out.append(got ? nb::handle(got) : nb::handle(zero_.ptr()));
        }
        return steal(PyList_AsTuple(out.ptr()));
    }

    // kernel.requests._with_prefix: the call's prefix identity.
    void with_prefix(nb::handle out, nb::handle wf, nb::handle task, nb::handle i,
                     nb::handle prefix) {
        nb::object name = attr(wf, NAME);
        set(out, PREFIX_ID, prefix);
        set(out, PREFIX_TOKENS, attr(task, PREFIX_TOKENS_OF));
        set(out, CALL_KEY, steal(PyTuple_Pack(2, name.ptr(), i.ptr())));
        nb::object ctx = attr(task, CONTEXT_OF);
        set(out, CONTEXT_KEY,
            ctx.is_none() ? nb::none() : steal(PyTuple_Pack(2, name.ptr(), ctx.ptr())));
    }

    nb::object attr(nb::handle obj, Name name) const {
        return steal(PyObject_GetAttr(obj.ptr(), names_[name].ptr()));
    }
    // Set a field of a freshly allocated request: straight into its slot when the class
    // keeps the field in a plain object slot (what the member descriptor would do: the
    // slot is empty, nothing to release), else through the generic setattr.
    void set(nb::handle obj, Name name, nb::handle value) const {
        const Py_ssize_t off = slot_[name - FIRST_FIELD];
        if (off > 0) {
            *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(obj.ptr()) + off) =
                nb::handle(value).inc_ref().ptr();
            return;
        }
        if (PyObject_GenericSetAttr(obj.ptr(), names_[name].ptr(), value.ptr()) < 0)
            throw nb::python_error();
    }

    // The slot offset of each field (0: not a plain object slot, set generically).
    void find_slots() {
        for (int f = FIRST_FIELD; f < N_NAMES; ++f) {
            Py_ssize_t& off = slot_[f - FIRST_FIELD];
            off = 0;
            // The class attribute of a slot is its member descriptor (public API, new ref).
            nb::object descr = nb::steal(PyObject_GetAttr(type_.ptr(), names_[f].ptr()));
            if (!descr.is_valid()) {
                PyErr_Clear();
                continue;
            }
            if (Py_TYPE(descr.ptr()) != &PyMemberDescr_Type) continue;
            PyMemberDef* member = reinterpret_cast<PyMemberDescrObject*>(descr.ptr())->d_member;
            if (member->type == T_OBJECT_EX && !(member->flags & READONLY))
                off = member->offset;
        }
    }
    static nb::object item(nb::handle seq, nb::handle key) {
        return steal(PyObject_GetItem(seq.ptr(), key.ptr()));
    }
    static nb::object steal(PyObject* got) {
        if (!got) throw nb::python_error();
        return nb::steal(got);
    }

    nb::object type_;
    nb::dict defaults_, model_index_;
    nb::str names_[N_NAMES];
    nb::str llm_;
    nb::object zero_;  // the 0.0 of an edge without bytes
    Py_ssize_t slot_[N_NAMES - FIRST_FIELD];
};

}  // namespace scalesched
