"""Markdown table of a `make bench` report (what docs/benchmarks.md shows).

    python -m benchmarks.bench_table [benchmarks/results/report.json]
"""

from __future__ import annotations

import json
import sys


def _rps(s: dict) -> str:
    return f"{s['median'] / 1e3:,.1f}k ({s['min'] / 1e3:,.1f}–{s['max'] / 1e3:,.1f}k)"


def _sec(s: dict) -> str:
    return f"{s['median']:.2f} s ({s['min']:.2f}–{s['max']:.2f})"


def _runs(report: dict) -> str:
    default = report["settings"]["repeat"]
    per = {s: report[s].get("repeat") or default
           for s in ("runtime", "vectorized", "aggregations", "scale", "parse", "airflow", "flink", "eventtime", "join",
                     "state")
           if isinstance(report.get(s), dict) and "error" not in report[s] and "status" not in report[s]
           or (isinstance(report.get(s), dict) and report[s].get("status") == "measured")}
    if len(set(per.values())) <= 1:
        return f"{next(iter(per.values()), default)} runs"
    return "the runs per figure: " + ", ".join(f"{s} {n}" for s, n in per.items())


def state_table(report: dict) -> str:
    """The state section (also shown on the state backends page)."""
    st = report["state"]
    out = ["| keyed state, one subtask | records/s in | peak RSS | snapshot (128 key groups) | "
           "one key touched: re-snapshot | restore (peak RSS) |", "|---|---|---|---|---|---|"]
    for r in st["runs"]:
        t = r["touch_one_key"]
        out.append(f"| {r['backend']}, {r['keys']:,} keys | {r['ingest_records_per_s'] / 1e3:,.1f}k | "
                   f"{r['ingest_peak_rss_bytes'] / 2**20:.0f} MiB | {r['snapshot_bytes'] / 2**20:.0f} MiB in "
                   f"{r['snapshot_seconds']:.1f} s | {t['rewritten_files']} group, "
                   f"{t['rewritten_bytes'] / 2**10:.0f} KiB in {t['seconds']:.2f} s | {r['restore_seconds']:.1f} s "
                   f"({r['restore_peak_rss_bytes'] / 2**20:.0f} MiB) |")
    measured = st.get("measured", {})
    out.append(f"\nMeasured {measured.get('date', '?')} (commit {str(measured.get('commit'))[:10]}), one run, "
               f"load average {(measured.get('load_average_before') or [float('nan')])[0]:.1f} before.\n")
    return "\n".join(out)


def vectorized_table(report: dict) -> list:
    """The vectorized section's lines (also shown on docs/vectorized.md)."""
    vc = report.get("vectorized")
    if not vc or "ratios" not in vc:
        return []
    out = []
    for at in [vc, *vc.get("at_other_sizes", {}).values()]:
        out += [f"| vectorized, {at['records']:,} records, local[{at['parallelism']}], Parquet in and out "
                f"| records/s | this ÷ native (target vectorized >= {at['target_vectorized_over_native']}) "
                f"| this ÷ native, per CPU second |", "|---|---|---|---|"]
        for v, s in at["records_per_s"].items():
            ratio = at["ratios"].get(f"{v}_over_native")
            cpu = at.get("cpu_ratios", {}).get(f"{v}_over_native")
            out.append(f"| {v}: {at['variants'][v]} | {_rps(s)} | {'' if ratio is None else f'{ratio:.2f}'} "
                       f"| {'' if cpu is None else f'{cpu:.2f}'} |")
        ceilings = [f"{k.replace('_over_', ' ÷ ')} {r:.2f}" for k, r in at["ratios"].items()
                    if "_over_" in k and not k.endswith("_over_native")]
        out += ["", "Ceilings: " + ", ".join(ceilings) + ".", ""] if ceilings else [""]
    if vc.get("baseline_note"):
        out += [vc["baseline_note"], ""]
    measured = vc.get("measured") or {}
    out += ["", f"Median (min–max) of {vc.get('repeat')} runs, measured {measured.get('date', '?')}, load average "
                f"{(measured.get('load_average_before') or [float('nan')])[0]:.1f} before the section.", ""]
    return out


def aggregations_table(report: dict) -> list:
    """The aggregations section: our variants beside Spark's, then stream runs beside AvailableNow."""
    ag = report.get("aggregations")
    if not ag or "ratios" not in ag:
        return []
    out = [f"| aggregations, {ag['records']:,} records, {ag['keys']:,} keys, parallelism {ag['parallelism']} "
           "| records/s | this ÷ Spark's |", "|---|---|---|"]
    for v, s in ag["records_per_s"].items():
        spark = "spark_groupby" if v.startswith("sum") else "spark_window"
        ratio = ag["ratios"].get(f"{v}_over_{spark}")
        out.append(f"| {v.replace('_', ' ')} | {_rps(s)} | {'' if ratio is None else f'{ratio:.2f}'} |")
    equal = all(ag["results_equal_spark"].values())
    out += ["", f"Every variant's sums equal Spark's: {'yes' if equal else 'NO'}.", ""]
    sr = ag.get("stream_runs") or {}
    if "stream_runs" in sr:
        out += [f"| {sr['slices']} slices of the same rows, one pass | total | per run | records/s |", "|---|---|---|---|"]
        for key, label in (("stream_runs", "stream runs (+ drain)"), ("spark_available_now", "Spark AvailableNow")):
            d = sr[key]
            out.append(f"| {label} | {d['total_seconds']:.1f} s | {d['seconds_per_run']:.2f} s | "
                       f"{d['records_per_s'] / 1e3:,.1f}k |")
        out += ["", f"Drain {sr['drain_seconds']:.2f} s; {sr['windows_compared']:,} windows equal "
                    f"({sr['compared']}).", ""]
    return out


def connectors_table(report: dict) -> list:
    cn = report.get("connectors")
    if not cn or "connectors" not in cn:
        return []
    out = [f"| connector, one stream run of {cn['records']:,} records, parallelism {cn['parallelism']} | records/s "
           "| this ÷ file source |", "|---|---|---|"]
    for name, d in cn["connectors"].items():
        if "records_per_s" not in d:
            out.append(f"| {name.replace('_', ' ')} | {d['status']} | |")
            continue
        ratio = (cn.get("over_file_source") or {}).get(name)
        out.append(f"| {name.replace('_', ' ')} | {d['records_per_s'] / 1e3:,.1f}k | "
                   f"{'' if ratio is None else f'{ratio:.2f}'} |")
    return out + ["", "One run each.", ""]


def table(report: dict) -> str:
    out = []
    m = report["machine"]
    end = m.get("load_average_at_end") or next(
        (report[k]["load_average_after"] for k in reversed(list(report)) if isinstance(report[k], dict)
         and "load_average_after" in report[k]), [float("nan")])
    out.append(f"Measured {m['date']} on {m['cpu_count']} cores, {m['memory_bytes'] / 2**30:.0f} GiB, "
               f"load average {m['load_average_at_start'][0]:.1f} at start and "
               f"{end[0]:.1f} after the last section; Python {m['versions']['python']}, "
               f"PySpark {m['versions']['pyspark']}, Airflow {m['versions']['airflow']}; "
               f"median (min–max) of {_runs(report)}.\n")
    rt = report.get("runtime")
    if rt and "pipelines" in rt:
        for at in [rt, *rt.get("at_other_sizes", {}).values()]:
            out.append(f"| runtime, {at['records']:,} records, local[{at['parallelism']}] | records/s "
                       f"| chain ÷ this | chain ÷ this, per CPU second |")
            out.append("|---|---|---|---|")
            for shape, d in at["pipelines"].items():
                for v, s in d["records_per_s"].items():
                    ratio = "" if v == "chain" else f"{d['ratios'][f'chain_over_{v}']:.2f}"
                    cpu = d.get("cpu_ratios", {}).get(f"chain_over_{v}")
                    out.append(f"| {shape.replace('_', ' ')}: {v} | {_rps(s)} | {ratio} "
                               f"| {'' if cpu is None else f'{cpu:.2f}'} |")
            out.append("")
        if rt.get("baseline_note"):
            out += [rt["baseline_note"], ""]
    out += vectorized_table(report)
    out += aggregations_table(report)
    out += connectors_table(report)
    sc = report.get("scale")
    if sc and "points" in sc:
        out.append("| scale (3 operators) | chain records/s | fused records/s | chain ÷ fused | "
                   "peak worker RSS chain / fused |")
        out.append("|---|---|---|---|---|")
        for p in sc["points"]:
            out.append(f"| {p['records']:,} | {_rps(p['chain']['records_per_s'])} | "
                       f"{_rps(p['fused']['records_per_s'])} | {p['chain_over_fused']:.2f} | "
                       f"{p['chain']['peak_worker_rss_bytes'] / 2**20:.0f} / "
                       f"{p['fused']['peak_worker_rss_bytes'] / 2**20:.0f} MiB |")
        out.append("")
    pc = report.get("parse")
    if pc and "seconds" in pc:
        out.append("| parse (DagBag, fresh process) | seconds |")
        out.append("|---|---|")
        out.append(f"| DAG file without pipeline | {_sec(pc['seconds']['baseline'])} |")
        out.append(f"| with {pc['operators']}-operator pipeline ({pc['chains']} chains, "
                   f"{pc['airflow_tasks']['with_pipeline']} tasks) | {_sec(pc['seconds']['with_pipeline'])} |")
        out.append(f"| difference (target < 1 s) | {pc['extra_seconds']:.2f} s |")
        out.append("")
    af = report.get("airflow")
    if af and "seconds" in af:
        out.append(f"| Airflow DAG run, {af['records']:,} records | wall-clock |")
        out.append("|---|---|")
        for k in ("chained", "unchained"):
            out.append(f"| {k} ({af['tasks'][k]} task instances) | {_sec(af['seconds'][k])} |")
        out.append(f"| unchained ÷ chained (target >= 3x) | {af['ratio_unchained_over_chained']:.2f}x |")
        out.append("")
    et = report.get("eventtime")
    if et and "records_per_s" in et:
        out.append(f"| event time, {et['records']:,} records, {et['keys']} keys, parallelism {et['parallelism']} "
                   f"| records/s | this ÷ keyed reduce (target >= {et['target_ratio']:.2f}) |")
        out.append("|---|---|---|")
        for v, s in et["records_per_s"].items():
            ratio = et["ratios"].get(f"{v}_over_reduce_batch")
            out.append(f"| {v.replace('_', ', ')} | {_rps(s)} | {'' if ratio is None else f'{ratio:.2f}'} |")
        fe = et.get("flink") or {}
        if "records_per_s" in fe:
            out.append(f"| PyFlink window, streaming | {_rps(fe['records_per_s'])} | |")
        out.append("")
        if "records_per_s" not in fe:
            out.append(f"PyFlink (event time): {fe.get('status', 'not measured')}.\n")
    jn = report.get("join")
    if jn and "records_per_s" in jn:
        out.append(f"| two inputs, {jn['records']:,} input records, {jn['keys']:,} keys, parallelism "
                   f"{jn['parallelism']} | records/s | this ÷ keyed process |")
        out.append("|---|---|---|")
        for v, s in jn["records_per_s"].items():
            ratio = jn["ratios"].get(f"{v}_over_keyed_process")
            out.append(f"| {v.replace('_', ' ')}: {jn['shapes'][v]} | {_rps(s)} | "
                       f"{'' if ratio is None else f'{ratio:.2f}'} |")
        out.append("")
    if isinstance(report.get("state"), dict) and "runs" in report["state"]:
        out.append(state_table(report))
    fl = report.get("flink")
    if fl and "records_per_s" in fl:
        chain = (rt or {}).get("pipelines", {}).get("3_operators", {}).get("records_per_s", {}).get("chain")
        vs = f"; the chain runtime is {chain['median'] / fl['records_per_s']['median']:.1f}x of it" if chain else ""
        out.append(f"| PyFlink {fl['apache_flink']}, BATCH, parallelism {fl['parallelism']}, "
                   f"{fl['records']:,} records | records/s |")
        out.append("|---|---|")
        out.append(f"| map → filter → flat_map (3 operators) | {_rps(fl['records_per_s'])} |")
        out.append("")
        out.append(f"PyFlink: {fl['note']}{vs.replace('is ', 'is ').replace('x of it', 'x as fast')}.")
    elif fl:
        out.append(f"PyFlink: {fl.get('status', 'error')}.")
    return "\n".join(out)


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/report.json"
    with open(path) as fh:
        print(table(json.load(fh)))
