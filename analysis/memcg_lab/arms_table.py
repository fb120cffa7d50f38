"""The lab's arms, read from the one place that defines them:
scenarios/arms.tsv (its comment header says what each column means).

The analysis takes from it the order reports show arms in (the first,
DEFAULT, is the fallback baseline), each arm's colour, the arms whose
precondition is an outcome of their policy, and the old names earlier
runs carry (canonical() maps them to today's arm).
"""
import csv
import os
from collections import namedtuple

TABLE = os.path.join(os.path.dirname(__file__), "..", "..", "scenarios", "arms.tsv")
COLUMNS = ["arm", "guest_write", "kernel_needs", "colour", "precondition_is_outcome",
           "old_names", "description"]
NONE = "-"

Arm = namedtuple("Arm", ["name", "guest_write", "kernel_needs", "colour",
                         "precondition_is_outcome", "old_names", "description"])


class ArmsTableError(ValueError):
    pass


def _list(field):
    return [] if field == NONE else field.split(",")


def read_table(path=TABLE):
    """The arms, in the table's order.  Raises ArmsTableError naming the
    line of a malformed table (the shell reader, scenarios/lib/arms.sh,
    refuses the same ones)."""
    with open(path, newline="") as f:
        rows = [(n, row) for n, row in enumerate(csv.reader(f, delimiter="\t"), start=1)
                if row and not row[0].startswith("#")]
    if not rows:
        raise ArmsTableError(f"{path}: no header")
    (_, header), body = rows[0], rows[1:]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise ArmsTableError(f"{path}: the header has no column {', '.join(missing)}")
    arms, seen = [], set()
    for n, row in body:
        if len(row) != len(header):
            raise ArmsTableError(f"{path}:{n}: {len(row)} fields, the header has {len(header)}")
        f = dict(zip(header, row))
        if f["precondition_is_outcome"] not in ("yes", "no"):
            raise ArmsTableError(f"{path}:{n}: precondition_is_outcome is yes or no, "
                                 f"got {f['precondition_is_outcome']!r}")
        arm = Arm(f["arm"], f["guest_write"], _list(f["kernel_needs"]), f["colour"],
                  f["precondition_is_outcome"] == "yes", _list(f["old_names"]), f["description"])
        for name in [arm.name] + arm.old_names:
            if name in seen:
                raise ArmsTableError(f"{path}:{n}: {name} stands twice in the table")
            seen.add(name)
        arms.append(arm)
    if not arms:
        raise ArmsTableError(f"{path}: no arms")
    return arms


ARMS = read_table()
ORDER = [a.name for a in ARMS]
# The table's first arm: what a run without ARM= runs.
DEFAULT = ORDER[0]
COLOURS = {a.name: a.colour for a in ARMS}
PRECONDITION_IS_OUTCOME = {a.name for a in ARMS if a.precondition_is_outcome}
RENAMED = {old: a.name for a in ARMS for old in a.old_names}


def canonical(name):
    """Today's name of an arm a run recorded: an old name (a run folder,
    provenance.txt or params-resolved.env from before a rename) is read
    as the arm it became; any other name, known or not, as it is."""
    return RENAMED.get(name, name)
