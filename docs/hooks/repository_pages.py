"""MkDocs hooks: pages that show facts kept elsewhere in the repository, read at build time.

- The home page is README.md (placeholder `<!-- readme -->`), its `docs/` links made
  relative to the site.
- The benchmarks page shows the committed report: the figures live in one place,
  `benchmarks/results/report.json` (written by `make bench`), and the plots next to
  it; the placeholder `<!-- bench-table -->` becomes `benchmarks.bench_table`'s Markdown, and
  `<!-- state-figures -->` (the state backends page) its state section.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mkdocs.structure.files import File

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
README_PLACEHOLDER = "<!-- readme -->"
BENCH_PLACEHOLDER = "<!-- bench-table -->"
STATE_PLACEHOLDER = "<!-- state-figures -->"
VECTORIZED_PLACEHOLDER = "<!-- vectorized-figures -->"


def on_files(files, config):
    for png in sorted(RESULTS.glob("*.png")):
        files.append(File.generated(config, f"img/benchmarks/{png.name}", abs_src_path=str(png)))
    return files


def on_page_markdown(markdown, page, config, files):
    if README_PLACEHOLDER in markdown:
        readme = (REPO / "README.md").read_text().replace("](docs/", "](")
        markdown = markdown.replace(README_PLACEHOLDER, readme)
    if BENCH_PLACEHOLDER in markdown or STATE_PLACEHOLDER in markdown or VECTORIZED_PLACEHOLDER in markdown:
        sys.path.insert(0, str(REPO))
        try:
            from benchmarks.bench_table import state_table, table, vectorized_table
        finally:
            sys.path.pop(0)
        report = json.loads((RESULTS / "report.json").read_text())
        markdown = markdown.replace(BENCH_PLACEHOLDER, table(report))
        state = report.get("state")
        markdown = markdown.replace(STATE_PLACEHOLDER, state_table(report) if isinstance(state, dict)
                                    and "runs" in state else "(not measured yet: `make bench BENCH_ARGS=\"--only state --merge\"`)")
        markdown = markdown.replace(VECTORIZED_PLACEHOLDER, "\n".join(vectorized_table(report))
                                    or "(not measured in the committed report)")
    return markdown
