"""The KTAP output of a kselftest_harness.h program as 6.1's harness prints
it, and the checks the series' test_lru_immediate prints inside its tests.

    TAP version 13
    1..14
    # Starting 14 tests from 2 test cases.
    #  RUN           lru_immediate.park ...
    # pass: a writer over its memory.max parks folios
    # FAIL: ...                      (a check; also "skip:" and "known:")
    #            OK  lru_immediate.park
    ok 2 lru_immediate.park
    ok 3 # SKIP <reason>             (6.1 prints the reason, not the name)
    not ok 4 lru_immediate.toggle
    # Totals: pass:12 fail:1 xfail:0 xpass:0 skip:1 error:0

A result takes its test's name from the harness's "RUN" line before it."""
import re
from dataclasses import dataclass, field

CHECK_KINDS = ("pass", "FAIL", "skip", "known")
TOTALS_KEYS = ("pass", "fail", "xfail", "xpass", "skip", "error")

_RUN = re.compile(r"^#\s+RUN\s+(\S+) \.\.\.$")
_CHECK = re.compile(r"^# (pass|FAIL|skip|known): (.*)$")
_RESULT = re.compile(r"^(not )?ok (\d+)(?: (.*))?$")
_PLAN = re.compile(r"^1\.\.(\d+)")
_TOTALS = re.compile(r"^# Totals: " + " ".join(rf"{k}:(\d+)" for k in TOTALS_KEYS))


@dataclass
class Test:
    number: int
    name: str
    result: str          # pass, fail or skip
    reason: str = ""     # a skip's reason
    checks: list = field(default_factory=list)   # (kind, text), in order

    def checks_of(self, kind):
        return [text for k, text in self.checks if k == kind]


@dataclass
class Report:
    version: str = ""
    plans: list = field(default_factory=list)
    tests: list = field(default_factory=list)
    totals: dict = None

    def test(self, name):
        found = [t for t in self.tests if t.name == name]
        return found[0] if len(found) == 1 else None


def parse(text):
    """A Report of TEXT; lines it does not know (logs, diagnostics) are
    skipped."""
    report = Report()
    lines = text.splitlines()
    if lines:
        report.version = lines[0]
    name, checks = None, []
    for line in lines:
        m = _RUN.match(line)
        if m:
            name, checks = m.group(1), []
            continue
        m = _CHECK.match(line)
        if m:
            checks.append((m.group(1), m.group(2)))
            continue
        m = _PLAN.match(line)
        if m:
            report.plans.append(int(m.group(1)))
            continue
        m = _TOTALS.match(line)
        if m:
            report.totals = dict(zip(TOTALS_KEYS, map(int, m.groups())))
            continue
        m = _RESULT.match(line)
        if m:
            rest = m.group(3) or ""
            if rest.startswith("# SKIP"):
                result, reason = "skip", rest[len("# SKIP"):].strip()
            else:
                result, reason = ("fail" if m.group(1) else "pass"), ""
                if rest and name and rest != name:
                    # A result that is not the RUN line's test's.
                    name = rest
            report.tests.append(Test(int(m.group(2)), name or rest, result, reason, checks))
            name, checks = None, []
    return report
