#!/usr/bin/python3
"""The cgroup selftests per arm: kselftest_table.py RUN_DIR...

Prints, per program and test, how many runs of each arm passed, failed
or skipped it, then the tests whose results differ between runs or arms.
Exits 1 when a run folder cannot be read."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memcg_lab.kselftest import KselftestError, differing, format_table, table  # noqa: E402


def main(argv):
    if len(argv) < 2:
        print("usage: kselftest_table.py RUN_DIR...", file=sys.stderr)
        return 2
    try:
        results, runs = table(argv[1:])
    except KselftestError as e:
        print(f"kselftest_table: {e}", file=sys.stderr)
        return 1
    print(format_table(results, runs))
    diff = differing(results, runs)
    print(f"\ntests whose results differ between runs or arms: {len(diff)}")
    for program, test in sorted(diff):
        print(f"  {program} {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
