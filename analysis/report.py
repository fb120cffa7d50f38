#!/usr/bin/python3
"""Report on every run under a results folder:
    report.py [--baseline ARM] [--no-notebook] [--figures DIR] RESULTS

Writes RESULTS/report/<UTC timestamp>/ (tables, figures, report.md,
cover-letter.txt) and, when Debian's nbconvert is installed, report.html
from analysis/notebooks/report.py.  --figures DIR: also copies each
scenario's headline figures (FIGURES, PNG) to DIR as
<scenario>-<figure>.png, the ones RESULTS.md shows, and the numbers its
tables are computed from, <scenario>-runs.csv and
<scenario>-probe-latency.csv (DATA), so that they outlive the runs.
Exits 1 with the reason when no report can be made; excluded runs are
listed, not fatal.
"""
import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memcg_lab import arms_table, notebook, report  # noqa: E402


# The figures of a scenario that RESULTS.md shows, and the size past
# which a committed figure is called too large.
FIGURES = ["neighbour-cost.png", "probe-latency-cdf.png"]
FIGURE_MAX_BYTES = 200 << 10


def copy_figures(out, dest):
    """Copies FIGURES of every scenario of report folder OUT to DEST;
    returns the paths written and warnings (a figure over the size)."""
    os.makedirs(dest, exist_ok=True)
    written, warnings = [], []
    for scenario in sorted(os.listdir(out)):
        for name in FIGURES:
            src = os.path.join(out, scenario, name)
            if not os.path.isfile(src):
                continue
            path = os.path.join(dest, f"{scenario}-{name}")
            shutil.copyfile(src, path)
            written.append(path)
            if os.path.getsize(path) > FIGURE_MAX_BYTES:
                warnings.append(f"{path}: {os.path.getsize(path) >> 10} KiB, over "
                                f"{FIGURE_MAX_BYTES >> 10} KiB")
    return written, warnings


# The tables that RESULTS.md's figures are computed from (per run:
# provenance and metrics; the probe's bursts, which pooled percentiles
# need), as the report folder names them, written per scenario beside
# the figures: the run folders live in a cache that a machine may not
# hand on.  Their absolute paths say nothing elsewhere and are left out.
DATA = {"runs.csv": "runs", "probe-latency.csv": "probe"}
DATA_DROPPED_COLUMNS = ["path"]


def copy_data(ds, dest):
    """Writes DATA of the report's dataset DS per scenario to DEST as
    <scenario>-<name>; returns the paths written."""
    os.makedirs(dest, exist_ok=True)
    written = []
    for name, table in DATA.items():
        df = getattr(ds, table)
        df = df.drop(columns=[c for c in DATA_DROPPED_COLUMNS if c in df.columns])
        for scenario, rows in df.groupby("scenario", sort=True):
            path = os.path.join(dest, f"{scenario}-{name}")
            rows.to_csv(path, index=False)
            written.append(path)
    return written


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--baseline", default=arms_table.DEFAULT)
    ap.add_argument("--no-notebook", action="store_true")
    ap.add_argument("--figures", metavar="DIR")
    args = ap.parse_args(argv[1:])
    try:
        out, ds = report.build(args.results, args.baseline)
    except report.ReportError as e:
        print(f"report: {e}", file=sys.stderr)
        return 1
    excluded = ds.excluded()
    for r in excluded.itertuples():
        print(f"report: excluded {r.run}: {r.reason}", file=sys.stderr)
    print(f"report: {int(ds.runs['valid'].sum())} runs used, {len(excluded)} excluded")
    if args.figures:
        written, warnings = copy_figures(out, args.figures)
        for w in warnings:
            print(f"report: {w}", file=sys.stderr)
        print(f"report: {len(written)} figures copied to {args.figures}")
        written = copy_data(ds, args.figures)
        print(f"report: {len(written)} tables of per-run figures written to {args.figures}")
    if not args.no_notebook:
        print(f"report: {notebook.render(out)}")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
