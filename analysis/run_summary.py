#!/usr/bin/python3
"""Summarise one lab run: run_summary.py RUN_DIR.

Writes RUN_DIR/summary.json and prints the same as text.  Exits 1 with
the reason when the run cannot be summarised.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memcg_lab.run import RunError, format_summary, summarise  # noqa: E402


def main(argv):
    if len(argv) != 2:
        print("usage: run_summary.py RUN_DIR", file=sys.stderr)
        return 2
    try:
        summary = summarise(argv[1])
    except RunError as e:
        print(f"run_summary: {e}", file=sys.stderr)
        return 1
    with open(os.path.join(argv[1], "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    print(format_summary(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
