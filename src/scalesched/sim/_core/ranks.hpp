// HEFT's upward ranks over the visible DAG, for the ``rank`` ready order inside the
// compiled core (kernel.ranks.upward_ranks and VisibleRanks; kernel.ledger.highest_rank):
// the same doubles in the same order, so that a rank-ordered run, and rollout's trials
// under a rank-ordered base, need no call into the Python task book.
#pragma once

#include <cstdint>
#include <vector>

namespace scalesched {

// What of a workflow its ranks need and that never changes: HEFT's mean cost of each task
// (kernel.ranks.mean_task_costs), the bytes of each edge to a child (aligned with the
// job's flattened children), each task's revealing task (-1: visible from the start) and
// which tasks reveal others. Built once per job when first asked for; forks share it.
struct RankShape {
    std::vector<double> costs;
    std::vector<double> child_bytes;
    std::vector<std::int64_t> revealed_by;
    std::vector<std::uint8_t> decider;
};

// ClusterTables.mean_transfer_s.
struct MeanTransfer {
    double latency_s = 0.0, nic_bytes_per_s = 1.0;
    double operator()(double nbytes) const {
        return nbytes <= 0 ? 0.0 : latency_s + nbytes / nic_bytes_per_s;
    }
};

// kernel.ranks.upward_ranks of one job: ``ranks`` gets one value per task. A child whose
// revealing task has not finished does not exist yet for any scheduler.
template <typename JobT>
void visible_ranks(const JobT& j, const RankShape& shape, const MeanTransfer& transfer,
                   std::vector<double>& ranks) {
    const std::size_t n = j.tasks.size();
    ranks.assign(n, 0.0);
    for (std::size_t i = n; i-- > 0;) {
        const auto& k = j.tasks[i];
        double best = 0.0;
        for (std::int64_t e = k.children_at; e < k.children_at + k.n_children; ++e) {
            const std::size_t at = static_cast<std::size_t>(e);
            const std::size_t c = static_cast<std::size_t>(j.children[at]);
            const std::int64_t rb = shape.revealed_by[c];
            if (rb >= 0 && !j.tasks[static_cast<std::size_t>(rb)].done) continue;
            const double x = transfer(shape.child_bytes[at]) + ranks[c];
            if (x > best) best = x;
        }
        ranks[i] = shape.costs[i] + best;
    }
}

// Python's ``max(waiting, key=lambda g: (rank(g), -g))``: the first of the highest rank,
// ties to the lowest id; a tuple compares its ranks by ``>`` wherever they are not equal
// (NaN included), so this does too.
inline bool ranks_before(double rank, std::int64_t gid, double best_rank, std::int64_t best) {
    if (rank != best_rank) return rank > best_rank;
    return gid < best;
}

}  // namespace scalesched
