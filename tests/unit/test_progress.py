"""Progress on the host: every log line says the elapsed time, the kernel
build counts its objects towards the last full build's total with a time
left, and mmdebstrap's phases reach the log.  The real functions, sourced
from the real scripts without their last line (the call of main)."""
import os
import re
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PREFIX = re.compile(r"^\[memcg-lab \+(\d+:)?\d+:\d\d\] ")


def bash(script, cwd, env=None, stdin=None):
    return subprocess.run(["bash", "-c", "set -euo pipefail; " + script], input=stdin,
                          capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={**os.environ, **(env or {})})


def kernel_script(tmp_path, body, stdin=None, t0=None):
    """build-kernel.sh's functions, with the cache in tmp_path."""
    env = {"MEMCG_LAB_CACHE": str(tmp_path / "cache")}
    if t0 is not None:
        env["MEMCG_LAB_T0"] = str(t0)
    return bash(f"source <(sed '$d' {ROOT}/lab/build-kernel.sh); {body}",
                cwd=os.path.join(ROOT, "lab"), env=env, stdin=stdin)


def test_log_lines_carry_the_time_since_the_outermost_start(tmp_path):
    # An inherited start (as from the Makefile or a calling script) counts.
    t0 = int(time.time()) - 83
    p = bash(". lib.sh; log hello; die bye", cwd=os.path.join(ROOT, "lab"),
             env={"MEMCG_LAB_T0": str(t0)})
    assert p.returncode == 1
    lines = p.stderr.splitlines()
    assert re.fullmatch(r"\[memcg-lab \+1:2[3-5]\] hello", lines[0]), lines
    assert re.fullmatch(r"\[memcg-lab \+1:2[3-5]\] error: bye", lines[1]), lines
    # A fresh start is 0:00; garbage in the variable never reaches arithmetic.
    for t0 in ("", "a[$(touch pwned)]"):
        p = bash(f". {ROOT}/lab/lib.sh; log x", cwd=tmp_path, env={"MEMCG_LAB_T0": t0})
        assert p.stderr == "[memcg-lab +0:00] x\n"
        assert not (tmp_path / "pwned").exists()


def test_durations_are_minutes_then_hours():
    p = bash(". lib.sh; for s in 0 59 83 3599 3725 -5; do format_duration $s; done",
             cwd=os.path.join(ROOT, "lab"))
    assert p.stdout.split() == ["0:00", "0:59", "1:23", "59:59", "1:02:05", "0:00"]


def test_a_child_script_counts_from_its_callers_start():
    """make exports MEMCG_LAB_T0 once; a script run by a script inherits it."""
    p = subprocess.run(["make", "-s", "-C", ROOT, "-p", "help"], capture_output=True,
                       text=True, timeout=60, env={k: v for k, v in os.environ.items()
                                                   if k != "MEMCG_LAB_T0"})
    t0 = re.search(r"^MEMCG_LAB_T0 := (\d+)$", p.stdout, re.M)
    assert t0 and abs(int(t0.group(1)) - time.time()) < 60
    p = bash(". lib.sh; bash -c '. lib.sh; echo $MEMCG_LAB_T0'; echo $MEMCG_LAB_T0",
             cwd=os.path.join(ROOT, "lab"), env={"MEMCG_LAB_T0": "1700000000"})
    assert p.stdout.split() == ["1700000000", "1700000000"]


def test_progress_line_percent_and_time_left(tmp_path):
    cases = {
        "740 1480 190": "740 of ~1480 objects (50%), about 3:10 left",
        "148 1480 60": "148 of ~1480 objects (10%), about 9:00 left",
        "1480 1480 600": "1480 of ~1480 objects (100%), about 0:00 left",
        "10 1480 0": "10 of ~1480 objects (0%)",
        "1500 1480 600": "1500 objects, more than the ~1480 expected",
    }
    for args, want in cases.items():
        p = kernel_script(tmp_path, f"build_progress_line {args}")
        assert p.returncode == 0, p.stderr
        assert p.stdout == want + "\n", args


def fake_make_output(objects):
    lines = ["make[1]: Entering directory '/x/linux-6.1'", "  SYNC    include/config/auto.conf.cmd"]
    for i in range(objects):
        lines.append(f"  CC      mm/file{i}.o")
        if i % 7 == 0:
            lines.append(f"  AR      mm/built-in{i}.a")
    lines.append("  LD      vmlinux")
    return "\n".join(lines) + "\n"


def test_build_progress_logs_every_tenth_of_the_total(tmp_path):
    start = int(time.time()) - 100
    p = kernel_script(tmp_path, f"show_build_progress 200 {start}", stdin=fake_make_output(230))
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert all(PREFIX.match(line) for line in lines), lines
    body = [PREFIX.sub("", line) for line in lines]
    assert len(body) == 11  # 20, 40, ... 200, then 220 past the total
    assert re.fullmatch(r"  20 of ~200 objects \(10%\), about 15:0\d left", body[0]), body[0]
    assert body[4].startswith("  100 of ~200 objects (50%), about 1:4")
    assert body[9].startswith("  200 of ~200 objects (100%), about 0:00 left")
    assert body[10] == "  220 objects, more than the ~200 expected"


def test_a_short_build_prints_no_progress_but_never_fails(tmp_path):
    # The loop's last test is false at the end of input: pipefail must
    # not turn that into a failed build.
    p = kernel_script(tmp_path, "show_build_progress 1480 $EPOCHSECONDS", stdin=fake_make_output(3))
    assert p.returncode == 0 and p.stderr == ""


def test_the_total_is_the_last_full_builds_count(tmp_path):
    kbuild = tmp_path / "cache" / "kbuild-lab"
    kbuild.mkdir(parents=True)
    record = kbuild / ".memcg-lab-objects"
    # No record: the stated estimate for this config.
    p = kernel_script(tmp_path, "expected_objects")
    assert p.stdout == "1480 an estimate: this folder has no count of its own yet\n"
    # A first build records its count, whatever it is.
    p = kernel_script(tmp_path, "remember_object_count 1470; expected_objects")
    assert record.read_text() == "1470\n"
    assert p.stdout == "1470 as this folder's last one\n"
    # A rebuild of a few files leaves the record alone ...
    kernel_script(tmp_path, "remember_object_count 12")
    assert record.read_text() == "1470\n"
    # ... one of at least half the record (a header change) replaces it.
    kernel_script(tmp_path, "remember_object_count 900")
    assert record.read_text() == "900\n"
    kernel_script(tmp_path, "remember_object_count 1490")
    assert record.read_text() == "1490\n"
    # Nothing compiled, nothing recorded; a damaged record is no total.
    kernel_script(tmp_path, "remember_object_count 0")
    assert record.read_text() == "1490\n"
    record.write_text("garbage\n")
    assert kernel_script(tmp_path, "expected_objects").stdout.startswith("1480 an estimate")


def test_the_debug_build_keeps_its_own_record(tmp_path):
    (tmp_path / "cache" / "kbuild-debug").mkdir(parents=True)
    p = kernel_script(tmp_path, "set -- --debug; source <(sed '$d' build-kernel.sh); "
                                "remember_object_count 1476; echo $OBJECTS_RECORD")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(tmp_path / "cache" / "kbuild-debug" / ".memcg-lab-objects")
    assert (tmp_path / "cache" / "kbuild-debug" / ".memcg-lab-objects").read_text() == "1476\n"


# What mmdebstrap 1.3.5 printed for the lab's rootfs (its log in the cache).
MMDEBSTRAP_OUTPUT = """\
I: chroot architecture amd64 is equal to the host's architecture
I: finding correct signed-by value...
W: Download is performed unsandboxed as root as file /root/.cache/memcg-lab/rootfs/base-bookworm-f76aa09f52dcc29d.tmp/var/lib/apt/lists/partial couldn't be accessed by user _apt
I: running apt-get update...
I: downloading packages with apt...
I: extracting archives...
I: installing essential packages...
I: installing remaining packages inside the chroot...
I: running --customize-hook in shell: sh -c 'chroot "$1" systemctl mask apt-daily.timer apt-daily-upgrade.timer' exec /x.tmp
Created symlink /etc/systemd/system/apt-daily.timer \u2192 /dev/null.
Created symlink /etc/systemd/system/apt-daily-upgrade.timer \u2192 /dev/null.
I: running --customize-hook in shell: sh -c 'chroot "$1" passwd -d root' exec /x.tmp
passwd: password changed.
I: cleaning package lists and apt cache...
I: success in 46.4330 seconds
"""


def fake_mmdebstrap(tmp_path, status):
    """An mmdebstrap on PATH that prints the real one's output, makes its
    target folder (the second-last argument) and exits with status."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "output.txt").write_text(MMDEBSTRAP_OUTPUT)
    script = bindir / "mmdebstrap"
    script.write_text(f"#!/bin/bash\ncat {tmp_path}/output.txt >&2\n"
                      f"mkdir -p \"${{@: -2:1}}\"\necho \"$@\" > {tmp_path}/args\nexit {status}\n")
    script.chmod(0o755)
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "MEMCG_LAB_CACHE": str(tmp_path / "cache")}
    return bash(f"source <(sed '$d' build-rootfs.sh); mkdir -p \"$OUTDIR\"; "
                f"build_base_tree \"$OUTDIR/base-test\"",
                cwd=os.path.join(ROOT, "guest-rootfs"), env=env)


def test_mmdebstrap_phases_reach_the_log_and_the_rest_stays_in_the_file(tmp_path):
    p = fake_mmdebstrap(tmp_path, 0)
    assert p.returncode == 0, p.stderr
    base = tmp_path / "cache" / "rootfs" / "base-test"
    assert base.is_dir() and not (tmp_path / "cache" / "rootfs" / "base-test.tmp").exists()
    lines = p.stderr.splitlines()
    assert all(PREFIX.match(line) for line in lines), lines
    body = [PREFIX.sub("", line) for line in lines]
    assert body[0].startswith("mmdebstrap bookworm with: ")
    phases = [b for b in body if b.startswith("  mmdebstrap: ")]
    assert len(phases) == 12
    assert "  mmdebstrap: I: downloading packages with apt..." in phases
    assert phases[-1] == "  mmdebstrap: I: success in 46.4330 seconds"
    # Long lines are cut; hooks' and dpkg's own output is not shown.
    assert all(len(b) <= len("  mmdebstrap: ") + 100 for b in phases)
    assert any(b.endswith("...") and "customize-hook" in b for b in phases)
    assert "Created symlink" not in p.stderr and "passwd:" not in p.stderr
    # The whole output is in the log file.
    log = (tmp_path / "cache" / "rootfs" / "base-test.log").read_text()
    assert log == MMDEBSTRAP_OUTPUT
    assert "--variant=minbase" in (tmp_path / "args").read_text()


def test_a_failed_mmdebstrap_fails_the_build_with_its_log(tmp_path):
    p = fake_mmdebstrap(tmp_path, 3)
    assert p.returncode == 1
    assert "mmdebstrap failed (exit 3); full log: " in p.stderr
    assert "passwd: password changed." in p.stderr  # the log's tail
    assert not (tmp_path / "cache" / "rootfs" / "base-test").exists()
