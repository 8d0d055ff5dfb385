"""PNG plots of a `make bench` report (matplotlib, Agg backend)."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

VARIANT_LABELS = {"chain": "chain runtime", "fused": "(a) hand-fused\nmapInArrow",
                  "pyarrow": "(a') hand-fused in\npyarrow tasks", "rdd": "(b) rdd.\nmapPartitions",
                  "native": "(c) native\nDataFrame", "staged": "(d) one stage\nper operator"}


def _err(stat: dict) -> list:
    return [[stat["median"] - stat["min"]], [stat["max"] - stat["median"]]]


def plot_runtime(rt: dict, path: str) -> None:
    shapes = list(rt["pipelines"])
    variants = list(VARIANT_LABELS)
    fig, axes = plt.subplots(1, len(shapes), figsize=(6 * len(shapes), 4.5), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        data = rt["pipelines"][shape]["records_per_s"]
        for i, v in enumerate(variants):
            s = data.get(v)
            if s is None:  # a report from before this variant existed
                continue
            ax.bar(i, s["median"] / 1e3, yerr=[[e / 1e3 for e in es] for es in _err(s)], capsize=4,
                   color="tab:orange" if v == "chain" else "tab:blue")
        ax.set_xticks(range(len(variants)), [VARIANT_LABELS[v] for v in variants], fontsize=8)
        ax.set_ylabel("thousand input records / s (median, min-max)")
        d = rt["pipelines"][shape]
        ax.set_title(f"{shape.replace('_', ' ')}: {rt['records']:,} records, P={rt['parallelism']}\n"
                     f"chain / hand-fused = {d['ratios']['chain_over_fused']:.2f} (target >= "
                     f"{d['target_chain_over_fused']})", fontsize=10)
        ax.set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _two_bars(path: str, bars: list, highlight: int, ylabel: str, title: str) -> None:
    """Two bars [(label, seconds summary)], the `highlight` one in orange."""
    fig, ax = plt.subplots(figsize=(5, 4))
    for i, (_, s) in enumerate(bars):
        ax.bar(i, s["median"], yerr=_err(s), capsize=4, color="tab:orange" if i == highlight else "tab:blue")
    ax.set_xticks(range(len(bars)), [label for label, _ in bars])
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_airflow(af: dict, path: str) -> None:
    _two_bars(path, [(f"{k}\n({af['tasks'].get(k)} task instances)", af["seconds"][k])
                     for k in ("chained", "unchained")], 0, "DAG run wall-clock, s",
              f"Airflow + spark-submit, {af['records']:,} records\n"
              f"unchained / chained = {af['ratio_unchained_over_chained']:.2f}x (target >= 3x)")


def plot_parse(pc: dict, path: str) -> None:
    _two_bars(path, [("DAG file\nwithout pipeline", pc["seconds"]["baseline"]),
                     (f"with {pc['operators']}-operator\npipeline ({pc['airflow_tasks'].get('with_pipeline')} tasks)",
                      pc["seconds"]["with_pipeline"])], 1, "DagBag parse, s",
              f"Parse cost: +{pc['extra_seconds']:.2f} s (target < 1 s)")


def plot_scale(sc: dict, path: str) -> None:
    pts = sc["points"]
    n = [p["records"] for p in pts]
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4.2))
    for v, color in (("chain", "tab:orange"), ("fused", "tab:blue")):
        secs = [p[v]["seconds"]["median"] for p in pts]
        a1.errorbar(n, secs, yerr=[[p[v]["seconds"]["median"] - p[v]["seconds"]["min"] for p in pts],
                                   [p[v]["seconds"]["max"] - p[v]["seconds"]["median"] for p in pts]],
                    marker="o", color=color, label=VARIANT_LABELS[v].replace("\n", " "), capsize=3)
        a2.plot(n, [p[v]["records_per_s"]["median"] / 1e3 for p in pts], marker="o", color=color,
                label=VARIANT_LABELS[v].replace("\n", " "))
        a3.plot(n, [p[v]["peak_worker_rss_bytes"] / 2**20 for p in pts], marker="o", color=color,
                label=VARIANT_LABELS[v].replace("\n", " "))
    a1.set(xlabel="input records", ylabel="wall-clock, s", title="cost (median, min-max)")
    a2.set(xlabel="input records", ylabel="thousand records / s", title="throughput")
    a3.set(xlabel="input records", ylabel="MiB", title="peak RSS of a Python worker")
    a3.set_ylim(bottom=0)
    for a in (a1, a2, a3):
        a.legend(fontsize=8)
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_plots(report: dict, out: str) -> list:
    made = []
    for key, fn in (("runtime", plot_runtime), ("airflow", plot_airflow), ("parse", plot_parse),
                    ("scale", plot_scale)):
        section = report.get(key)
        if isinstance(section, dict) and "error" not in section and "status" not in section:
            path = os.path.join(out, f"{key}.png")
            fn(section, path)
            made.append(os.path.basename(path))
    return made
