"""make shell: the guest of the smoke scenario boots to a root shell on
the terminal, which runs what is typed into it and shuts the guest down on
exit.  Boots QEMU itself, on a pseudo-terminal as a user's would be; runs
when LAB_SHELL_TEST is set (run-tests.sh all), skipped otherwise."""
import os
import pty
import re
import select
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(not os.environ.get("LAB_SHELL_TEST"),
                                reason="LAB_SHELL_TEST not set")


class Terminal:
    """make shell on a pseudo-terminal; everything it printed in .seen."""

    def __init__(self):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(["make", "-s", "-C", ROOT, "shell", "NAME=smoke"],
                                     stdin=slave, stdout=slave, stderr=slave,
                                     start_new_session=True)
        os.close(slave)
        self.seen = ""

    def expect(self, pattern, timeout):
        end = time.monotonic() + timeout
        while not re.search(pattern, self.seen):
            left = end - time.monotonic()
            assert left > 0, f"no {pattern!r} in {timeout} s; the terminal showed:\n{self.seen[-3000:]}"
            ready, _, _ = select.select([self.master], [], [], min(left, 1))
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:     # the process closed the terminal
                    chunk = b""
                if not chunk and self.proc.poll() is not None:
                    continue
                self.seen += chunk.decode(errors="replace")
        return re.search(pattern, self.seen)

    def type(self, line):
        # The 16550's receive FIFO holds 16 bytes: type as a person would.
        for ch in line + "\r":
            os.write(self.master, ch.encode())
            time.sleep(0.02)


@pytest.fixture(scope="module")
def session():
    term = Terminal()
    # A cold set-up (kernel, image) may come first.
    term.expect(r"memcg-lab shell: kernel \S+", timeout=1800)
    term.expect(r"'exit' shuts the guest down", timeout=60)
    term.expect(r"[#$] $", timeout=60)
    yield term
    if term.proc.poll() is None:
        term.proc.kill()


def test_the_banner_names_the_disks_by_serial(session):
    assert re.search(r"/dev/vd[a-z]\s+lab-stick \(\d+ MiB\)", session.seen)
    assert re.search(r"/dev/vd[a-z]\s+lab-fast \(\d+ MiB\)", session.seen)


def test_a_typed_command_runs_in_the_guest_with_the_shares_mounted(session):
    session.type("echo answer-$((6 * 7)); grep -c ' 9p ' /proc/mounts; "
                 "grep -o memcg_lab.shell /proc/cmdline")
    session.expect(r"answer-42\s+2\s+memcg_lab\.shell", timeout=60)


def test_exit_shuts_the_guest_down_and_make_returns_0(session):
    session.type("exit")
    end = time.monotonic() + 120
    while session.proc.poll() is None and time.monotonic() < end:
        try:
            session.expect(r"$^", timeout=1)    # drain; never matches
        except AssertionError:
            pass
    assert session.proc.poll() == 0, session.seen[-3000:]
    assert "the shell's guest shut down" in session.seen
