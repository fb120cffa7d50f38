"""The kernel's cgroup selftests per arm: kselftest.csv of cgroup-selftests
runs (scenarios/shapes/kselftest-cgroup.sh), one row per
program and test, with each arm's results over its runs."""
import csv
import os

from memcg_lab import load

RESULTS = ("pass", "fail", "skip")
HEADER = ["program", "number", "test", "result"]


class KselftestError(Exception):
    pass


def load_run(run_dir):
    """(arm, [(program, test, result)]) of one run folder."""
    # The run folder's one reader: provenance.txt's arm, else the folder's.
    arm = load.Run(run_dir).arm
    if not arm:
        raise KselftestError(f"{run_dir}: no arm in provenance.txt or the folder's name")
    path = os.path.join(run_dir, "kselftest.csv")
    rows = []
    try:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            if next(reader, None) != HEADER:
                raise KselftestError(f"{path}: header is not {','.join(HEADER)}")
            seen = set()
            for lineno, row in enumerate(reader, start=2):
                if len(row) != 4 or row[3] not in RESULTS:
                    raise KselftestError(f"{path}:{lineno}: not program,number,test,result")
                if (row[0], row[1]) in seen:
                    raise KselftestError(f"{path}:{lineno}: a second result for {row[0]} test "
                                         f"{row[1]} (output printed again by a forked child?)")
                seen.add((row[0], row[1]))
                rows.append((row[0], row[2], row[3]))
    except FileNotFoundError:
        raise KselftestError(f"{path}: missing (did the guest run the selftests?)") from None
    return arm, rows


def table(run_dirs):
    """{(program, test): {arm: {result: runs}}}, and {arm: runs}."""
    out, runs = {}, {}
    for d in run_dirs:
        arm, rows = load_run(d)
        runs[arm] = runs.get(arm, 0) + 1
        for program, test, result in rows:
            cell = out.setdefault((program, test), {}).setdefault(arm, {})
            cell[result] = cell.get(result, 0) + 1
    return out, runs


def differing(results, runs):
    """The tests whose results are not the same in every run of every arm."""
    def outcome(cell, arm):
        # A test missing from some runs (its program was killed) differs.
        got = {r for r, n in cell.get(arm, {}).items() if n}
        return got if sum(cell.get(arm, {}).values()) == runs[arm] else got | {"missing"}
    keep = []
    for key, cell in results.items():
        outcomes = [frozenset(outcome(cell, arm)) for arm in runs]
        if len(set(outcomes)) > 1 or any(len(o) > 1 for o in outcomes):
            keep.append(key)
    return keep


def format_table(results, runs):
    arms = sorted(runs)
    width = max([len(t) for _, t in results] + [4])
    lines = ["program          " + "test".ljust(width) + " "
             + "  ".join(f"{a} ({runs[a]} runs)".ljust(22) for a in arms)]
    for (program, test), cell in sorted(results.items()):
        parts = []
        for a in arms:
            c = cell.get(a, {})
            parts.append(" ".join(f"{r} {c[r]}" for r in RESULTS if c.get(r)).ljust(22) or "-")
        lines.append(f"{program:16s} {test.ljust(width)} " + "  ".join(parts))
    return "\n".join(lines)
