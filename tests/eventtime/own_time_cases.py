"""Event-time cases beyond Flink's shared ones, in the format of
tests/data/flink-conformance/time_cases.json (see its README), with outputs derived by hand from
Flink's documented semantics (`expected_outputs_<mode>`; the reasoning is above each case).

Rules used (Flink 2.3): bounded(D) watermark = max_ts - D - 1, after every record in STREAMING;
a window fires when the watermark reaches `window.max_timestamp()` (end - 1) and is purged then
(allowed lateness 0); an element is dropped (or sent to the late side output) when every window it
falls in has `max_timestamp() + lateness <= watermark`; sessions merge when they intersect or
touch, and a purged session is gone; an operator after several input channels takes the minimum
of their watermarks and a finished input counts as MAX. BATCH: no watermark until the end of a
key, each key's records sorted by timestamp, so nothing is late; timers and windows fire at the
end of each key.

The multi-channel cases (union, rebalance) have no record that could be late, so their outputs do
not depend on how the channels interleave (which Flink leaves open).
"""

from __future__ import annotations

OWN_TIME_CASES: list[dict] = [
    # sliding(1000, 500) windows, ProcessWindowFunction count, bounded(0) (wm = max_ts - 1).
    # A record falls in two windows: starts ts//500*500 and that - 500 ([-500, 500) for ts 100).
    # STREAMING: a@600 -> wm 599 fires a[-500,500) {100}; a@1100 -> wm 1099 fires a[0,1000)
    # {100,600} and b[0,1000) {700}; a@400 is behind both its windows (499, 999 <= 1099): dropped;
    # b@950 is late for b[0,1000) but on time for b[500,1500) (1499 > 1099): added there only;
    # b@1600 -> wm 1599 fires a[500,1500) {600,1100}, b[500,1500) {700,950}; the end (MAX) fires
    # a[1000,2000) {1100}, b[1000,2000) {1600}, b[1500,2500) {1600}.
    # BATCH: a {100,400,600,1100}, b {700,950,1600}, every window complete.
    {
        "name": "own_sliding_count",
        "desc": "sliding(1000, 500) count: a record half late lands in its on-time window only",
        "steps": [
            ["src", "src", [["a", 1, 100], ["a", 2, 600], ["b", 3, 700], ["a", 4, 1100], ["a", 5, 400],
                            ["b", 6, 950], ["b", 7, 1600]]],
            ["watermarks", "wm", "src", {"bounded": 0}],
            ["window", "win", "wm", {"assigner": ["sliding", 1000, 500], "fn": "count"}],
            ["sink", "out", "win", {}],
        ],
        "expected_outputs_streaming": {"out": [
            [["a", -500, 500, 1], 499], [["a", 0, 1000, 2], 999], [["b", 0, 1000, 1], 999],
            [["a", 500, 1500, 2], 1499], [["b", 500, 1500, 2], 1499], [["a", 1000, 2000, 1], 1999],
            [["b", 1000, 2000, 1], 1999], [["b", 1500, 2500, 1], 2499]]},
        "expected_outputs_batch": {"out": [
            [["a", -500, 500, 2], 499], [["a", 0, 1000, 3], 999], [["a", 500, 1500, 2], 1499],
            [["a", 1000, 2000, 1], 1999], [["b", 0, 1000, 2], 999], [["b", 500, 1500, 2], 1499],
            [["b", 1000, 2000, 1], 1999], [["b", 1500, 2500, 1], 2499]]},
    },
    # session(gap 500) sum, bounded(1000) (wm = max_ts - 1001).
    # STREAMING: a@0 -> a[0,500); a@900 -> a[900,1400); a@450 -> [450,950) intersects both, one
    # session a[0,1400) = 1+2+4, ts 900; b@2000 -> wm 999 fires b[100,600) (3); a@3000 -> wm 1999
    # fires a[0,1400) (purged); a@1300 -> a new [1300,1800), 1799 <= 1999: dropped; b@1600 ->
    # [1600,2100) merges with b[2000,2500) into b[1600,2500) = 5+8, ts 2000; the end fires it and
    # a[3000,3500) (6).
    # BATCH: a sorted 0,450,900,1300,3000: [0,1800) = 1+4+2+7 ts 1300, [3000,3500) = 6;
    # b 100,1600,2000: [100,600) = 3, [1600,2500) = 13 ts 2000.
    {
        "name": "own_session_bridge",
        "desc": "session(500): a record bridging two sessions merges all three; a fired session is not reopened",
        "steps": [
            ["src", "src", [["a", 1, 0], ["a", 2, 900], ["b", 3, 100], ["a", 4, 450], ["b", 5, 2000],
                            ["a", 6, 3000], ["a", 7, 1300], ["b", 8, 1600]]],
            ["watermarks", "wm", "src", {"bounded": 1000}],
            ["window", "win", "wm", {"assigner": ["session", 500], "fn": "sum"}],
            ["sink", "out", "win", {}],
        ],
        "expected_outputs_streaming": {"out": [
            [["b", 3, 100], 599], [["a", 7, 900], 1399], [["b", 13, 2000], 2499], [["a", 6, 3000], 3499]]},
        "expected_outputs_batch": {"out": [
            [["a", 14, 1300], 1799], [["a", 6, 3000], 3499], [["b", 3, 100], 599], [["b", 13, 2000], 2499]]},
    },
    # tumbling(1000) sum cascaded into tumbling(2000) sum, bounded(0); the second window assigns by
    # the first one's result timestamps (end - 1) and fires on the watermark the first forwards
    # after its results.
    # STREAMING, first window: a@1500 -> wm 1499 fires a[0,1000) (1, ts 100) @999; b@300 late
    # (999 <= 1499); a@2100 -> wm 2099 fires a[1000,2000) (2) @1999; a@900 late; b@3500 -> wm 3499
    # fires a[2000,3000) (4) @2999; a@2500 late; the end fires b[3000,4000) (6) @3999.
    # Second window: a[0,2000) gets @999 and @1999, fires at wm 2099: 1+2 ts 1500 @1999;
    # a[2000,4000) (4) and b[2000,4000) (6) fire at the end @3999.
    # BATCH, first window: a 100,900,1500,2100,2500: [0,1000) 1+5 ts 900, [1000,2000) 2,
    # [2000,3000) 4+7 ts 2500; b 300,3500: [0,1000) 3, [3000,4000) 6. Second window: a[0,2000)
    # 6+2 ts 1500, a[2000,4000) 11; b[0,2000) 3, b[2000,4000) 6.
    {
        "name": "own_cascaded_windows",
        "desc": "tumbling(1000) -> tumbling(2000): results and watermarks flow into a second window",
        "steps": [
            ["src", "src", [["a", 1, 100], ["a", 2, 1500], ["b", 3, 300], ["a", 4, 2100], ["a", 5, 900],
                            ["b", 6, 3500], ["a", 7, 2500]]],
            ["watermarks", "wm", "src", {"bounded": 0}],
            ["window", "w1", "wm", {"assigner": ["tumbling", 1000], "fn": "sum"}],
            ["window", "w2", "w1", {"assigner": ["tumbling", 2000], "fn": "sum"}],
            ["sink", "first", "w1", {}],
            ["sink", "out", "w2", {}],
        ],
        "expected_outputs_streaming": {
            "first": [[["a", 1, 100], 999], [["a", 2, 1500], 1999], [["a", 4, 2100], 2999], [["b", 6, 3500], 3999]],
            "out": [[["a", 3, 1500], 1999], [["a", 4, 2100], 3999], [["b", 6, 3500], 3999]]},
        "expected_outputs_batch": {
            "first": [[["a", 6, 900], 999], [["a", 2, 1500], 1999], [["a", 11, 2500], 2999],
                      [["b", 3, 300], 999], [["b", 6, 3500], 3999]],
            "out": [[["a", 8, 1500], 1999], [["a", 11, 2500], 3999], [["b", 3, 300], 1999],
                    [["b", 6, 3500], 3999]]},
    },
    # Two sources, each with its own bounded(300) watermarks, unioned, tumbling(1000) sum. Each
    # source is out of order by at most 200 ms, so its own watermark stays behind every window a
    # later record of it falls in, and the union's watermark (the minimum of both; MAX once a
    # source ended) is lower still: nothing is late in any interleaving, in either mode. A
    # watermark taken from one input only (or the maximum) would drop the other source's records.
    # a: [0,1000) 1+10+30 ts 700, [1000,2000) 3, [2000,3000) 4; b: [0,1000) 20, [1000,2000) 2,
    # [2000,3000) 5, [3000,4000) 40.
    {
        "name": "own_union_two_watermarked_sources",
        "desc": "union of two sources with their own watermarks: the window uses the minimum",
        "steps": [
            ["src", "s1", [["a", 1, 100], ["b", 2, 1200], ["a", 3, 1000], ["a", 4, 2500], ["b", 5, 2300]]],
            ["src", "s2", [["a", 10, 50], ["b", 20, 900], ["a", 30, 700], ["b", 40, 3100]]],
            ["watermarks", "wm1", "s1", {"bounded": 300}],
            ["watermarks", "wm2", "s2", {"bounded": 300}],
            ["union", "both", ["wm1", "wm2"]],
            ["window", "win", "both", {"assigner": ["tumbling", 1000], "fn": "sum"}],
            ["sink", "out", "win", {}],
        ],
        "expected_outputs_streaming": {"out": [
            [["a", 41, 700], 999], [["a", 3, 1000], 1999], [["a", 4, 2500], 2999], [["b", 20, 900], 999],
            [["b", 2, 1200], 1999], [["b", 5, 2300], 2999], [["b", 40, 3100], 3999]]},
        "expected_outputs_batch": {"out": [
            [["a", 41, 700], 999], [["a", 3, 1000], 1999], [["a", 4, 2500], 2999], [["b", 20, 900], 999],
            [["b", 2, 1200], 1999], [["b", 5, 2300], 2999], [["b", 40, 3100], 3999]]},
    },
    # bounded(200) watermarks at parallelism 1, rebalance to a map at parallelism 2 (x10), keyed
    # tumbling(1000) sum at parallelism 2, sink at parallelism 2: timestamps cross two exchanges
    # with the records, watermarks are broadcast to every channel. Out of order by at most 150 ms,
    # so nothing is late whatever the interleaving of the two map subtasks' channels.
    # a: [0,1000) 10+30 ts 250, [1000,2000) 50, [2000,3000) 90; b: [0,1000) 20+60 ts 950,
    # [1000,2000) 80; c: [0,1000) 40, [1000,2000) 70.
    {
        "name": "own_rebalance_parallel_window",
        "desc": "rebalance to parallelism 2 before a parallel keyed window",
        "steps": [
            ["src", "src", [["a", 1, 100], ["b", 2, 300], ["a", 3, 250], ["c", 4, 800], ["a", 5, 1100],
                            ["b", 6, 950], ["c", 7, 1900], ["b", 8, 1750], ["a", 9, 2000]]],
            ["watermarks", "wm", "src", {"bounded": 200}],
            ["rebalance", "rb", "wm"],
            ["map", "m", "rb", {"p": 2}],
            ["window", "win", "m", {"assigner": ["tumbling", 1000], "fn": "sum", "p": 2}],
            ["sink", "out", "win", {"p": 2}],
        ],
        "expected_outputs_streaming": {"out": [
            [["a", 40, 250], 999], [["a", 50, 1100], 1999], [["a", 90, 2000], 2999], [["b", 80, 950], 999],
            [["b", 80, 1750], 1999], [["c", 40, 800], 999], [["c", 70, 1900], 1999]]},
        "expected_outputs_batch": {"out": [
            [["a", 40, 250], 999], [["a", 50, 1100], 1999], [["a", 90, 2000], 2999], [["b", 80, 950], 999],
            [["b", 80, 1750], 1999], [["c", 40, 800], 999], [["c", 70, 1900], 1999]]},
    },
    # KeyedProcessFunction "debounce": ValueState count += 1, delete the key's pending timer and
    # register ts + 500; on_timer emits (key, timer, count) and clears count and pending timer.
    # bounded(100) (wm = max_ts - 101).
    # STREAMING: a: 600 deleted by a@300 (-> 800), 800 deleted by a@1000 (-> 1500), then 1800,
    # 3000; b: 900 deleted by b@1200 before wm 1099 (-> 1700), 1750 after b@1250; a@2500 ->
    # wm 2399 fires b:1750 (count 3, cleared); b@2600 -> count 1, timer 3100; the end fires
    # a:3000 (count 5) and b:3100 (count 1). Deleted timers never fire.
    # BATCH: per key sorted, only the last timer survives: a:3000 (5), b:3100 (4).
    {
        "name": "own_timer_deletion",
        "desc": "delete_event_time_timer: a deleted timer never fires, a re-registered one does",
        "steps": [
            ["src", "src", [["a", 1, 100], ["a", 2, 300], ["b", 3, 400], ["a", 4, 1000], ["b", 5, 1200],
                            ["a", 6, 1300], ["b", 7, 1250], ["a", 8, 2500], ["b", 9, 2600]]],
            ["watermarks", "wm", "src", {"bounded": 100}],
            ["timers", "tm", "wm", {"kind": "debounce", "gap": 500}],
            ["sink", "out", "tm", {}],
        ],
        "expected_outputs_streaming": {"out": [
            [["b", 1750, 3], 1750], [["a", 3000, 5], 3000], [["b", 3100, 1], 3100]]},
        "expected_outputs_batch": {"out": [[["a", 3000, 5], 3000], [["b", 3100, 4], 3100]]},
    },
    # window_all tumbling(1000), ProcessAllWindowFunction count, bounded(300) (wm = max_ts - 301),
    # late data to a side output.
    # STREAMING: @500 arrives at wm 899, on time for [0,1000); @1500 -> wm 1199 fires [0,1000)
    # {100,700,500}; @2400 -> wm 2099 fires [1000,2000) {1200,1500}; @900 and @1999 are behind
    # their windows (999, 1999 <= 2099): late side output with their own timestamps; the end
    # fires [2000,3000) {2400} and [3000,4000) {3000}.
    # BATCH: window_all is keyed by one constant key, sorted by timestamp: nothing late.
    {
        "name": "own_window_all_late",
        "desc": "window_all tumbling(1000) count with the late-data side output",
        "steps": [
            ["src", "src", [["a", 1, 100], ["b", 2, 700], ["a", 3, 1200], ["b", 4, 500], ["a", 5, 1500],
                            ["b", 6, 2400], ["a", 7, 900], ["b", 8, 1999], ["a", 9, 3000]]],
            ["watermarks", "wm", "src", {"bounded": 300}],
            ["window", "win", "wm", {"assigner": ["tumbling", 1000], "fn": "count", "all": True,
                                     "late_tag": "late"}],
            ["sink", "out", "win", {}],
            ["late", "late", "win"],
            ["sink", "late_out", "late", {}],
        ],
        "expected_outputs_streaming": {
            "out": [[[0, 1000, 3], 999], [[1000, 2000, 2], 1999], [[2000, 3000, 1], 2999], [[3000, 4000, 1], 3999]],
            "late_out": [[["a", 7, 900], 900], [["b", 8, 1999], 1999]]},
        "expected_outputs_batch": {
            "out": [[[0, 1000, 4], 999], [[1000, 2000, 3], 1999], [[2000, 3000, 1], 2999], [[3000, 4000, 1], 3999]],
            "late_out": []},
    },
]
