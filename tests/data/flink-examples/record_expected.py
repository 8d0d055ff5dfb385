"""Re-record what PyFlink prints for each example of this folder (expected/<name>.out).

Not run by `make test`. Needs the PyFlink 2.3.0 interpreter (`make bench-flink-venv`):

    python tests/data/flink-examples/record_expected.py [--flink-python .venv-flink/bin/python] [NAME ...]

Each example runs as a script under PyFlink, in its no-argument mode (built-in input, output
printed), after renaming `airflow_flinkchain` back to `pyflink`. The example's own Python
output (its messages, logging) is sent to stderr; what stays on stdout is what Flink's print
sink wrote, less the start-up messages of PyFlink's Python workers (WORKER_NOISE). That is
the recorded file, in PyFlink's order, `N> ` subtask prefixes included.

The vendored copies of Apache Flink's examples are first checked to be the wheel's files with
only `pyflink` renamed. Examples whose output depends on when watermarks are emitted
(WATERMARK_TIMING) are also run with periodic watermarks switched off
(`set_auto_watermark_interval(0)`: no watermark until the input ends) and must print the
same records: the recorded output is that of a run in which no periodic watermark fired
before the end of the input.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]

# name -> path under this folder; the first ten are Apache Flink 2.3.0's, unchanged but renamed.
EXAMPLES = {
    "word_count": "datastream/word_count.py",
    "basic_operations": "datastream/basic_operations.py",
    "process_json_data": "datastream/process_json_data.py",
    "state_access": "datastream/state_access.py",
    "event_time_timer": "datastream/event_time_timer.py",
    "tumbling_time_window": "datastream/windowing/tumbling_time_window.py",
    "sliding_time_window": "datastream/windowing/sliding_time_window.py",
    "session_with_gap_window": "datastream/windowing/session_with_gap_window.py",
    "session_with_dynamic_gap_window": "datastream/windowing/session_with_dynamic_gap_window.py",
    "tumbling_count_window": "datastream/windowing/tumbling_count_window.py",
    "tumbling_window_continuous_trigger": "own/tumbling_window_continuous_trigger.py",
}
WATERMARK_TIMING = ("event_time_timer", "tumbling_window_continuous_trigger")

WORKER_NOISE = (
    re.compile(r"^Using Any for unsupported type: "),
    re.compile(r"^No module named google\.cloud\.bigquery_storage_v1\. "),
    re.compile(r"^PYFLINK_CYTHON_ENABLED: "),
)

# Runs one example under PyFlink: Python-level stdout to stderr, so that fd 1 carries only what
# the JVM (Flink's print sink) writes.
RUNNER = r"""
import runpy, sys
path, interval = sys.argv[1], sys.argv[2]
if interval != "default":
    from pyflink.datastream import StreamExecutionEnvironment
    create = StreamExecutionEnvironment.get_execution_environment
    def get_execution_environment(*args, **kwargs):
        env = create(*args, **kwargs)
        env.get_config().set_auto_watermark_interval(int(interval))
        return env
    StreamExecutionEnvironment.get_execution_environment = staticmethod(get_execution_environment)
sys.argv = [path]
sys.stdout = sys.stderr
runpy.run_path(path, run_name="__main__")
"""


def to_pyflink(text: str) -> str:
    return text.replace("airflow_flinkchain", "pyflink")


def check_vendored(flink_python: str) -> None:
    """The vendored examples are the wheel's, with `pyflink` renamed and nothing else."""
    root = subprocess.run(
        [flink_python, "-c", "import os, pyflink; print(os.path.join(os.path.dirname(pyflink.__file__), 'examples'))"],
        check=True, capture_output=True, text=True).stdout.strip()
    for rel in EXAMPLES.values():
        if rel.startswith("datastream/"):
            original = Path(root, rel).read_text()
            vendored = (HERE / rel).read_text()
            if original.replace("pyflink", "airflow_flinkchain") != vendored:
                sys.exit(f"{rel} differs from PyFlink's {Path(root, rel)} beyond the rename")


def run(flink_python: str, rel: str, interval: str = "default") -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp, Path(rel).name)
        script.write_text(to_pyflink((HERE / rel).read_text()))
        env = {**os.environ, "PATH": f"{Path(flink_python).parent}{os.pathsep}{os.environ['PATH']}"}
        proc = subprocess.run([flink_python, "-c", RUNNER, str(script), interval], cwd=tmp, env=env,
                              capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"{rel} failed under PyFlink:\n{proc.stderr[-4000:]}")
    return [line for line in proc.stdout.splitlines() if not any(p.match(line) for p in WORKER_NOISE)]


def without_subtask(lines: list[str]) -> Counter:
    return Counter(re.sub(r"^\d+> ", "", line) for line in lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flink-python", default=os.environ.get("FLINKCHAIN_FLINK_PYTHON",
                                                                 str(REPO / ".venv-flink/bin/python")))
    parser.add_argument("names", nargs="*", help=f"examples to re-record (default: all): {', '.join(EXAMPLES)}")
    args = parser.parse_args()
    unknown = set(args.names) - set(EXAMPLES)
    if unknown:
        parser.error(f"unknown examples: {', '.join(sorted(unknown))}")
    check_vendored(args.flink_python)
    for name in args.names or EXAMPLES:
        rel = EXAMPLES[name]
        lines = run(args.flink_python, rel)
        if name in WATERMARK_TIMING:
            quiet = run(args.flink_python, rel, interval="0")
            if without_subtask(quiet) != without_subtask(lines):
                sys.exit(f"{name}: with periodic watermarks off PyFlink printed {quiet}, by default {lines}")
        (HERE / "expected" / f"{name}.out").write_text("".join(f"{line}\n" for line in lines))
        print(f"{name}: {len(lines)} records")


if __name__ == "__main__":
    main()
