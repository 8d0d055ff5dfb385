"""The state section of `make bench` at tiny sizes (structure, never speed)."""

from __future__ import annotations

from benchmarks.bench_state import run_state, summary_lines


def test_state_section_measures_both_backends_and_the_incremental_snapshot(tmp_path):
    st = run_state(str(tmp_path), heap_keys=1_500, rocksdb_keys=3_000)
    assert [(r["backend"], r["keys"]) for r in st["runs"]] == [("hashmap", 1_500), ("rocksdb", 1_500),
                                                               ("rocksdb", 3_000)]
    assert st["restored_ok"] and st["incremental_rewrites_one_group"]
    for r in st["runs"]:
        touch = r["touch_one_key"]
        assert touch["changed_key_groups"] == [touch["key_group"]]
        assert r["snapshot_files"] == 128 and r["snapshot_bytes"] > touch["rewritten_bytes"] > 0
    # both backends cut the same portable snapshot
    assert st["runs"][0]["snapshot_bytes"] == st["runs"][1]["snapshot_bytes"]
    assert len(summary_lines(st)) == 3
