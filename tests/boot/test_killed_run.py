"""Assertions on a smoke run whose QEMU the test killed with SIGKILL
while the guest sat silent after its scenario: the run failed, and its
status says QEMU was killed from outside the lab, not that the scenario
or the kernel failed.

LAB_KILLED_RUN names the run folder (tests/run-tests.sh sets it)."""
from run_folder import RunFolder

KILLED = RunFolder("LAB_KILLED_RUN")
pytestmark = KILLED.skip
read, status = KILLED.read, KILLED.status


def test_the_run_failed_because_qemu_was_killed_from_outside():
    st = status()
    assert st["result"] == "failed"
    assert st["failure_kind"] == "qemu"
    assert st["reason"].startswith("QEMU was killed from outside the lab (signal 9, KILL)")
    assert st["kernel_trouble"] == ""
