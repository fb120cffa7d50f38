"""Assertions on a smoke run whose first boot the host reset through QMP
2 s in (MEMCG_LAB_TEST_RESET_S), before the guest's agent started: the
run booted once more, kept the first console, said so in its
provenance, and the second boot ran the scenario to the end.

LAB_RETRY_RUN names the run folder (tests/run-tests.sh sets it)."""
import os
import re

from run_folder import RunFolder

RETRY = RunFolder("LAB_RETRY_RUN")
pytestmark = RETRY.skip
read, status = RETRY.read, RETRY.status


def test_the_run_is_ok_after_one_retry():
    assert status()["result"] == "ok"
    assert "boot_retries=1" in read("provenance.txt").splitlines()


def test_the_first_boot_is_kept_and_never_reached_the_agent():
    first = read("console-reset-boot.log")
    # The kernel had started (quiet: only its warnings reach the console).
    assert re.search(r"^\[\s*\d+\.\d+\] ", first, re.M)
    assert "memcg-lab-agent" not in first
    assert os.path.exists(os.path.join(RETRY.path, "qemu-reset-boot.log"))


def test_the_second_boot_ran_the_scenario():
    console = read("console.log")
    assert "memcg-lab-agent: scenario=smoke" in console
    assert "phase write ends" in console
