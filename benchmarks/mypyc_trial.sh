#!/bin/bash
# The compiled-core trial of issue 16 (docs/benchmarks.md, "Compiled-core trial"): compile the
# event core (sim/engine.py, decision/ledger.py, decision/llm_engine.py) with mypyc in a
# scratch copy, check that a run's metrics are identical to the pure-Python package's, then
# time both alternately (events per CPU-second, best of three repeats each).
#
# Usage: bash benchmarks/mypyc_trial.sh [SCRATCH_DIR] [PAIRS] [CORE]
# Needs the dev extra (mypy ships mypyc) and a C compiler; about 10 minutes of one core to
# compile. Nothing is installed: the compiled package lives in SCRATCH_DIR/pkg only.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
SCRATCH=${1:-/tmp/scalesched-mypyc}
PAIRS=${2:-8}
CORE=${3:-1}
MODULES="scalesched/decision/llm_engine.py scalesched/decision/ledger.py scalesched/sim/engine.py"

rm -rf "$SCRATCH" && mkdir -p "$SCRATCH" && cd "$SCRATCH"
cp -r "$REPO/src/scalesched" .
mypyc $MODULES > build.log 2>&1 || true  # its final copy into ./src fails: copied below
mkdir -p pkg && cp -r scalesched pkg/
cp build/lib.*/*__mypyc*.so pkg/
for m in $MODULES; do
    cp build/lib.*/"${m%.py}".*.so "pkg/$(dirname "$m")/"
done
PYTHONPATH="$SCRATCH/pkg" python -c "import scalesched.sim.engine as e; assert e.__file__.endswith('.so'), e.__file__"

cd "$REPO"
metrics() {  # the run's metrics without its wall time
    PYTHONPATH="$1" python -m scalesched simulate --cluster hetero-16 --workflows 300 \
        --policy eft --json | python -c \
        "import json,sys; d=json.load(sys.stdin); d.pop('sim_wall_time_s'); print(json.dumps(d, sort_keys=True))"
}
if [ "$(metrics "$SCRATCH/pkg")" = "$(metrics "$REPO/src")" ]; then
    echo "metrics identical (hetero-16, 300 workflows, eft)"
else
    echo "metrics DIFFER"; exit 1
fi
for _ in $(seq "$PAIRS"); do
    PYTHONPATH="$SCRATCH/pkg" taskset -c "$CORE" python benchmarks/bench_engine_versions.py compiled
    PYTHONPATH="$REPO/src" taskset -c "$CORE" python benchmarks/bench_engine_versions.py pure
done
