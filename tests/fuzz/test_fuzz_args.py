"""Hostile command-line arguments to simulate, static and the other commands."""

from __future__ import annotations

from fuzzing import ROOT, check_cli, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

INT_TEXT = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["1e9", "0", "-1", "1000000000", "18446744073709551616", "x", "", "3.5"]),
)
FLOAT_TEXT = st.one_of(
    st.floats().map(repr),
    st.sampled_from(["1e-300", "1e300", "0", "-0.0", "nan", "inf", "-inf", "x", "1e-9"]),
)
CLUSTERS = st.one_of(
    st.sampled_from(["hetero-4", "hetero-16", "homogeneous-2", "homogeneous-3:cpu-64c"]),
    st.sampled_from(["hetero-0", "hetero--1", "hetero-x", "hetero-1048577", "hetero-4:l4"]),
    st.sampled_from(["homogeneous-2:nosuch", "nosuch", "", "a/b.yaml", "/", "."]),
    st.text(max_size=10),
)
POLICIES = st.one_of(
    st.sampled_from(["eft", "random", "heft_online", "scale", "mlp-16", "scale-ssm"]),
    st.sampled_from(["nosuch", "", "x.pt", "/", "."]),
)
WORKLOADS = st.one_of(
    st.sampled_from(["react", "agentic-mix", "debate", "wfcommons:montage:20"]),
    st.sampled_from(["nosuch", "", "x.json", "wfcommons:nosuch:5", "wfcommons:montage:x"]),
)
SMALL_WORKFLOWS = st.integers(min_value=1, max_value=12).map(str)


@given(
    cluster=CLUSTERS,
    policy=POLICIES,
    workload=WORKLOADS,
    workflows=st.one_of(SMALL_WORKFLOWS, INT_TEXT),
    seed=st.one_of(st.integers(0, 10).map(str), INT_TEXT),
    rate=st.one_of(st.sampled_from(["0.5", "2"]), FLOAT_TEXT),
    arrivals=st.sampled_from(["poisson", "bursty", "replay:/nonexistent", "replay:", "x"]),
)
@fuzz_settings(share=2.0)
def test_simulate_arguments(
    cluster: str, policy: str, workload: str, workflows: str, seed: str, rate: str, arrivals: str
) -> None:
    # valid but huge sizes (a million workflows, 2^20 servers) are work, not hostility
    if workflows.lstrip("-").isdigit() and 12 < int(workflows) <= 1_000_000:
        workflows = "12"
    check_cli(
        "simulate",
        "--cluster",
        cluster,
        "--policy",
        policy,
        "--workload",
        workload,
        "--workflows",
        workflows,
        "--seed",
        seed,
        "--rate",
        rate,
        "--arrivals",
        arrivals,
        "--json",
    )


@given(load=FLOAT_TEXT, workflows=INT_TEXT)
@fuzz_settings(share=0.5)
def test_bad_load_and_workflows_end_before_any_measurement(load: str, workflows: str) -> None:
    """Only hostile --load values: a valid one on an uncached cluster measures capacity."""
    try:
        ok_load = float(load) > 0 and float(load) < float("inf")
    except ValueError:
        ok_load = False
    if ok_load:
        load = "-1"
    check_cli("simulate", "--cluster", "hetero-4", "--load", load, "--workflows", workflows)


@given(
    policy=st.one_of(POLICIES, st.sampled_from(["heft", "cpop"])),
    seed=st.one_of(st.integers(0, 5).map(str), INT_TEXT),
    workflow=st.sampled_from(
        [str(ROOT / "configs" / "workflows" / "wfcommons-blast-small.json"), "nosuch.json", ""]
    ),
)
@fuzz_settings(share=0.5)
def test_static_arguments(policy: str, seed: str, workflow: str) -> None:
    network = str(ROOT / "configs" / "networks" / "example-4.yaml")
    check_cli(
        "static",
        "--workflow",
        workflow,
        "--network",
        network,
        "--policy",
        policy,
        "--seed",
        seed,
        "--json",
    )
