// One engine's prefix cache of KV segments and its eviction order (cache.kv.PrefixCache),
// for KV reuse inside the compiled core: the same tree, counters and eviction choices,
// statement for statement, so that a run with ``--kv-policy`` can stay in C++.
//
// What has to match Python exactly, and how:
// * the eviction heap's order is (priority, sequence number) with unique numbers, so any
//   binary heap pops the same entries as heapq;
// * a rebuilt heap (``_compact``) numbers the evictable leaves in the dict's order, which
//   is their creation order (a key is only ever inserted while absent): segments are kept
//   in a map by creation number;
// * ``evict`` keeps popping the heap it started on when an offer inside it rebuilds the
//   heap, and puts the protected leaves back into that one, as the Python method (which
//   holds the old list in a local) does: heaps are shared, a rebuild makes a new one;
// * segments are named by creation number, so that a stale heap entry of a dropped
//   segment is recognised (Python compares objects);
// * keys are integers: a call's global task id (>= 0), or an application prompt's
//   ``prefix_id`` mapped by the caller to a negative number.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace scalesched {

enum KvEviction : std::int32_t { KV_LRU = 0, KV_TTL = 1, KV_AGENT_AWARE = 2 };

// cache.kv.Segment; ``parent`` is a creation number (-1: a root).
struct KvSegment {
    std::int64_t key, parent, end, tokens;
    std::int64_t children = 0, refs = 0;
    double last = 0.0, bonus = 0.0, prio = 0.0;
    double expiry = -std::numeric_limits<double>::infinity();
};

class PrefixCache {
  public:
    // ``policy``: KvEviction; ``agent_horizon_s``: cache.kv.AGENT_HORIZON_S.
    PrefixCache(std::int32_t policy, double agent_horizon_s)
        : policy_(policy), horizon_(agent_horizon_s), heap_(std::make_shared<Heap>()) {}
    // A fork's copy: its own heap (the shared one is an alias only inside ``evict``).
    PrefixCache(const PrefixCache& other)
        : resident(other.resident), held(other.held), evicted(other.evicted),
          policy_(other.policy_), horizon_(other.horizon_), segments_(other.segments_),
          by_key_(other.by_key_), heap_(std::make_shared<Heap>(*other.heap_)),
          seq_(other.seq_), next_id_(other.next_id_) {}
    PrefixCache& operator=(const PrefixCache&) = delete;

    std::int64_t resident = 0;  // tokens held by cached segments
    std::int64_t held = 0;      // tokens of the segments running requests hold
    std::int64_t evicted = 0;   // tokens evicted so far

    std::int32_t policy() const { return policy_; }
    std::int64_t evictable() const { return resident - held; }
    std::size_t size() const { return segments_.size(); }

    // The segment cached under ``key`` (its number), or -1.
    std::int64_t get(std::int64_t key) const {
        const auto it = by_key_.find(key);
        return it == by_key_.end() ? -1 : it->second;
    }
    const KvSegment& segment(std::int64_t id) const { return segments_.at(id); }
    // The cached segments' numbers, in the dict's order.
    std::vector<std::int64_t> ids() const {
        std::vector<std::int64_t> out;
        out.reserve(segments_.size());
        for (const auto& entry : segments_) out.push_back(entry.first);
        return out;
    }

    // A cache under way taken over (a run adopted mid-way): ``segments`` in the dict's
    // order, each ``parent`` an index into them (-1: a root); ``heap`` entries as
    // (priority, sequence number, index), -1 for a segment no longer cached (a stale entry);
    // ``seq``: the next sequence number. Only on an empty cache.
    void restore(const std::vector<KvSegment>& segments,
                 const std::vector<std::tuple<double, std::int64_t, std::int64_t>>& heap,
                 std::int64_t seq, std::int64_t resident_tokens, std::int64_t held_tokens,
                 std::int64_t evicted_tokens) {
        if (!segments_.empty() || next_id_) throw std::logic_error("PrefixCache.restore: not empty");
        for (const KvSegment& s : segments) {
            by_key_[s.key] = next_id_;
            segments_.emplace(next_id_++, s);
        }
        std::int64_t dead = -2;
        heap_->clear();
        for (const auto& [prio, entry_seq, index] : heap)
            heap_->push_back(Entry{prio, entry_seq, index >= 0 ? index : dead--});
        std::make_heap(heap_->begin(), heap_->end(), After{});
        seq_ = seq;
        resident = resident_tokens;
        held = held_tokens;
        evicted = evicted_tokens;
    }

    // -- use (-1: no segment) -------------------------------------------------------------
    void hold(std::int64_t id) {
        for (; id >= 0; id = seg(id).parent) {
            KvSegment& s = seg(id);
            if (s.refs == 0) held += s.tokens;
            s.refs += 1;
        }
    }

    void release(std::int64_t id) {
        while (id >= 0) {
            KvSegment& s = seg(id);
            s.refs -= 1;
            if (s.refs == 0) {
                held -= s.tokens;
                offer(id);
            }
            id = s.parent;
        }
    }

    void drop_credit(std::int64_t id) {
        for (; id >= 0; id = seg(id).parent) {
            KvSegment& s = seg(id);
            if (s.bonus != 0.0) {
                s.bonus = 0.0;
                s.prio = s.last;
            }
        }
    }

    void touch(std::int64_t id, double now) {
        for (; id >= 0; id = seg(id).parent) {
            KvSegment& s = seg(id);
            s.last = now;
            s.prio = now + s.bonus;
        }
    }

    // A segment below ``parent`` (-1: a root) ending at ``end``; the one cached under
    // ``key`` already, if any. Returns its number.
    std::int64_t insert(std::int64_t key, std::int64_t parent, std::int64_t end, double now,
                        double expiry, double credit) {
        const std::int64_t found = get(key);
        if (found >= 0) return found;
        const std::int64_t id = next_id_++;
        KvSegment s{key, parent, end, end - (parent >= 0 ? seg(parent).end : 0)};
        s.last = now;
        s.prio = now;
        s.expiry = expiry;
        if (policy_ == KV_AGENT_AWARE && credit > 0) {
            s.bonus = horizon_ * std::log1p(credit);
            s.prio = now + s.bonus;
        }
        segments_.emplace(id, s);
        by_key_[key] = id;
        resident += s.tokens;
        if (parent >= 0) seg(parent).children += 1;
        offer(id);
        return id;
    }

    // Evict leaves in policy order until ``need`` tokens are freed or nothing is
    // evictable; returns the tokens freed.
    std::int64_t evict(std::int64_t need, double now) {
        std::int64_t freed = 0;
        std::vector<Entry> protected_;
        const std::shared_ptr<Heap> heap = heap_;  // an offer below may rebuild heap_
        while (freed < need && !heap->empty()) {
            std::pop_heap(heap->begin(), heap->end(), After{});
            const Entry e = heap->back();
            heap->pop_back();
            if (!evictable_at(e.id, e.prio)) continue;
            const KvSegment& s = seg(e.id);
            if (s.expiry > now) {
                protected_.push_back(Entry{s.expiry, e.seq, e.id});
                continue;
            }
            freed += drop(e.id);
        }
        std::size_t i = 0;
        if (freed < need && !protected_.empty()) {  // the one needed furthest ahead first
            std::sort(protected_.begin(), protected_.end(), [](const Entry& a, const Entry& b) {
                return a.prio != b.prio ? a.prio > b.prio : a.seq < b.seq;
            });
            for (; freed < need && i < protected_.size(); ++i)  // a leaf queued twice is
                if (segments_.count(protected_[i].id)) freed += drop(protected_[i].id);  // here twice
        }
        for (; i < protected_.size(); ++i) {  // still cached: back in the queue
            const Entry& e = protected_[i];
            // (a copy of a leaf dropped above goes back too, stale: where it sits in the
            // heap changes nothing, as it is skipped when popped)
            const auto live = segments_.find(e.id);
            const double prio = live != segments_.end() ? live->second.prio : e.prio;
            heap->push_back(Entry{prio, e.seq, e.id});
            std::push_heap(heap->begin(), heap->end(), After{});
        }
        return freed;
    }

  private:
    struct Entry {
        double prio;  // (the expiry, in evict's protected list)
        std::int64_t seq, id;
    };
    // heapq's order on (prio, seq): seq is unique.
    struct After {
        bool operator()(const Entry& a, const Entry& b) const {
            return a.prio != b.prio ? a.prio > b.prio : a.seq > b.seq;
        }
    };
    using Heap = std::vector<Entry>;

    KvSegment& seg(std::int64_t id) { return segments_.at(id); }

    std::int64_t drop(std::int64_t id) {
        const auto it = segments_.find(id);
        const KvSegment s = it->second;
        segments_.erase(it);
        by_key_.erase(s.key);
        resident -= s.tokens;
        evicted += s.tokens;
        if (s.parent >= 0) {
            seg(s.parent).children -= 1;
            offer(s.parent);
        }
        return s.tokens;
    }

    // Whether a heap entry still stands for an evictable leaf at its priority.
    bool evictable_at(std::int64_t id, double prio) const {
        const auto it = segments_.find(id);
        if (it == segments_.end()) return false;  // dropped (its key may be cached anew)
        const KvSegment& s = it->second;
        return s.prio == prio && s.refs == 0 && s.children == 0;
    }

    // Queue a segment that may have become evictable (stale entries are skipped).
    void offer(std::int64_t id) {
        const KvSegment& s = seg(id);
        if (s.refs != 0 || s.children != 0) return;
        heap_->push_back(Entry{s.prio, seq_++, id});
        std::push_heap(heap_->begin(), heap_->end(), After{});
        if (heap_->size() > 4 * segments_.size() + 64) compact();
    }

    void compact() {
        auto fresh = std::make_shared<Heap>();
        for (const auto& [id, s] : segments_)
            if (s.refs == 0 && s.children == 0) fresh->push_back(Entry{s.prio, seq_++, id});
        std::make_heap(fresh->begin(), fresh->end(), After{});
        heap_ = std::move(fresh);
    }

    std::int32_t policy_;
    double horizon_;
    std::map<std::int64_t, KvSegment> segments_;  // by creation number: the dict's order
    std::unordered_map<std::int64_t, std::int64_t> by_key_;
    std::shared_ptr<Heap> heap_;
    std::int64_t seq_ = 0, next_id_ = 0;
};

}  // namespace scalesched
