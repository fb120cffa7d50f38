"""run-scenario.sh's reset_first_boot_for_test, the boot-reset retry
test's stand-in for a guest that resets during boot: called every tick
with the seconds since QEMU started, it resets once, when both the
seconds asked for have passed and the kernel has printed a console line
(a reset at 2 s alone once came during the firmware, on a loaded host,
and the boot test found no kernel line), and never once the agent has
spoken.  QMP is a script that records the call."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNEL_LINE = "\x00[    0.909580] mtrr: your CPUs had inconsistent fixed MTRR settings\n"
AGENT_LINE = "[    9.378501] memcg-lab-agent[111]: memcg-lab-agent: scenario=smoke\n"


def ticks(tmp_path, consoles):
    """Calls reset_first_boot_for_test once per (seconds, console text);
    returns the QMP calls and the log."""
    run = tmp_path / "run"
    run.mkdir()
    fake = tmp_path / "root" / "lab"
    fake.mkdir(parents=True)
    (fake / "qmp.py").write_text(f"#!/bin/sh\necho \"$@\" >>{tmp_path}/qmp-calls\n")
    (fake / "qmp.py").chmod(0o755)
    for i, (_, text) in enumerate(consoles):
        (tmp_path / f"console-{i}").write_text(text)
    steps = "; ".join(f"cp {tmp_path}/console-{i} {run}/console.log; reset_first_boot_for_test {s}"
                      for i, (s, _) in enumerate(consoles))
    script = (f"source <(sed '$d' {ROOT}/lab/run-scenario.sh); RUN={run}; QMP=/q.sock; "
              f"LAB_ROOT={tmp_path}/root; MEMCG_LAB_TEST_RESET_S=2; {steps}")
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                       cwd=os.path.join(ROOT, "lab"))
    assert p.returncode == 0, p.stderr
    calls = tmp_path / "qmp-calls"
    return (calls.read_text().splitlines() if calls.exists() else []), p.stderr


def test_the_reset_waits_for_the_kernels_first_line(tmp_path):
    calls, log = ticks(tmp_path, [(1, ""), (2, ""), (3, ""), (4, KERNEL_LINE),
                                  (5, KERNEL_LINE)])
    assert calls == ["reset /q.sock"]
    assert "resetting the guest (4 s in)" in log


def test_no_reset_before_the_seconds_asked_for(tmp_path):
    calls, _ = ticks(tmp_path, [(0, KERNEL_LINE), (1, KERNEL_LINE)])
    assert calls == []


def test_no_reset_once_the_agent_has_spoken(tmp_path):
    calls, log = ticks(tmp_path, [(1, ""), (3, KERNEL_LINE + AGENT_LINE)])
    assert calls == []
    assert "the agent already started, no reset" in log
