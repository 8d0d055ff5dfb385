"""Chains and cross-chain edges match what Flink 2.x produced (vendored cases),
plus our own cases written in the same step language."""

from __future__ import annotations

import pytest

from conformance_cases import build_case, chain_operator_names, cross_chain_edges, load_cases

FLINK_CASES = load_cases()

# Our own cases, expectations derived from Flink's StreamGraphGenerator /
# StreamingJobGraphGenerator rules (same format as cases.json).
EXTRA = [
    {
        "name": f"{kind}_p1",
        "steps": [["src", "src", {}], ["map", "m1", "src", {}], ["part", kind, "m1"],
                  ["map", "m2", f"m1.{kind}", {}], ["sink", "out", "m2", {}]],
        "flink_chains": [["src", "m1"], ["m2", "out"]],
        "flink_edges": [["m1", "m2", kind.upper(), None]],
    }
    for kind in ("rescale", "shuffle", "broadcast", "global")
] + [
    {
        "name": "explicit_forward_equal_p",
        "steps": [["src", "src", {}], ["map", "m1", "src", {}], ["part", "forward", "m1"],
                  ["map", "m2", "m1.forward", {}], ["sink", "out", "m2", {}]],
        "flink_chains": [["src", "m1", "m2", "out"]],
        "flink_edges": [],
    },
    {
        "name": "slot_sharing_group_inherited",
        "steps": [["src", "src", {}], ["map", "m1", "src", {}], ["map", "m2", "m1", {"ssg": "g"}],
                  ["map", "m3", "m2", {}], ["sink", "out", "m3", {}]],
        "flink_chains": [["src", "m1"], ["m2", "m3", "out"]],
        "flink_edges": [["m1", "m2", "FORWARD", None]],
    },
    {
        "name": "slot_sharing_group_mixed_inputs_fall_back_to_default",
        "steps": [["src", "a", {"ssg": "g"}], ["src", "b", {}], ["union", "u", ["a", "b"]],
                  ["map", "m", "u", {}], ["sink", "out", "m", {}]],
        "flink_chains": [["a"], ["b"], ["m", "out"]],
        "flink_edges": [["a", "m", "FORWARD", None], ["b", "m", "FORWARD", None]],
    },
    {
        "name": "diamond",
        "steps": [["src", "src", {}], ["map", "m1", "src", {}], ["filter", "f1", "m1", {}],
                  ["map", "m2", "m1", {}], ["union", "u", ["f1", "m2"]], ["map", "m3", "u", {}],
                  ["sink", "out", "m3", {}]],
        "flink_chains": [["src", "m1", "f1", "m2"], ["m3", "out"]],
        "flink_edges": [["f1", "m3", "FORWARD", None], ["m2", "m3", "FORWARD", None]],
    },
    {
        "name": "union_with_itself",
        "steps": [["src", "src", {}], ["map", "m1", "src", {}], ["union", "u", ["m1", "m1"]],
                  ["map", "m2", "u", {}], ["sink", "out", "m2", {}]],
        "flink_chains": [["src", "m1"], ["m2", "out"]],
        "flink_edges": [["m1", "m2", "FORWARD", None], ["m1", "m2", "FORWARD", None]],
    },
    {
        "name": "union_of_one_stream_still_chains",
        "steps": [["src", "src", {}], ["map", "m1", "src", {}], ["union", "u", ["m1"]],
                  ["map", "m2", "u", {}], ["sink", "out", "m2", {}]],
        "flink_chains": [["src", "m1", "m2", "out"]],
        "flink_edges": [],
    },
    {
        "name": "side_output_rebalanced_across_chains",
        "options": {"parallelism": 2},
        "steps": [["src", "src", {}], ["process_side", "proc", "src", {}],
                  ["sink", "outMain", "proc", {}], ["side", "odd", "proc"], ["part", "rebalance", "odd"],
                  ["map", "m", "odd.rebalance", {}], ["sink", "outOdd", "m", {}]],
        "flink_chains": [["src"], ["proc", "outMain"], ["m", "outOdd"]],
        "flink_edges": [["src", "proc", "REBALANCE", None], ["proc", "m", "REBALANCE", "odd"]],
    },
    {
        "name": "pipeline_chaining_disabled",
        "options": {"disable_chaining": True},
        "steps": [["src", "src", {}], ["map", "m1", "src", {}], ["sink", "out", "m1", {}]],
        "flink_chains": [["src"], ["m1"], ["out"]],
        "flink_edges": [["src", "m1", "FORWARD", None], ["m1", "out", "FORWARD", None]],
    },
    {
        "name": "hash_at_equal_parallelism_breaks_chain",
        "steps": [["src", "src", {}], ["key_reduce", "r", "src", {}], ["sink", "out", "r", {}]],
        "flink_chains": [["src"], ["r", "out"]],
        "flink_edges": [["src", "r", "HASH", None]],
    },
]
for case in EXTRA:  # the process_side step needs a tag
    for step in case["steps"]:
        if step[0] == "process_side":
            step[3].setdefault("tag", "odd")


def _check(case: dict) -> None:
    pipeline, _ = build_case(case)
    plan = pipeline.plan()
    assert chain_operator_names(plan) == case["flink_chains"]
    assert cross_chain_edges(plan) == case["flink_edges"]


@pytest.mark.parametrize("case", FLINK_CASES, ids=lambda c: c["name"])
def test_flink_conformance_case(case):
    _check(case)


@pytest.mark.parametrize("case", EXTRA, ids=lambda c: c["name"])
def test_extra_case(case):
    _check(case)
