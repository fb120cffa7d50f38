#!/usr/bin/python3
"""Report on every run under a results folder:
    report.py [--baseline ARM] [--no-notebook] RESULTS

Writes RESULTS/report/<UTC timestamp>/ (tables, figures, report.md,
cover-letter.txt) and, when Debian's nbconvert is installed, report.html
from analysis/notebooks/report.py.  Exits 1 with the reason when no
report can be made; excluded runs are listed, not fatal.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memcg_lab import arms_table, notebook, report  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("--baseline", default=arms_table.DEFAULT)
    ap.add_argument("--no-notebook", action="store_true")
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
    if not args.no_notebook:
        print(f"report: {notebook.render(out)}")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
