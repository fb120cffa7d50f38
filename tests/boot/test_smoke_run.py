"""Assertions on a real smoke run: QEMU booted the lab kernel, systemd ran
the agent, the memcgs existed, the sampler recorded them, fio wrote to
the throttled stick, and the guest shut down cleanly (a reboot: the lab
kernel has no ACPI, and QEMU runs with -no-reboot).

LAB_SMOKE_RUN names the run folder (tests/run-tests.sh sets it)."""
import csv
import json
import os

import pytest

from run_folder import RunFolder

SMOKE = RunFolder("LAB_SMOKE_RUN")
RUN = SMOKE.path
pytestmark = SMOKE.skip
read, status = SMOKE.read, SMOKE.status


def test_run_succeeded_and_guest_shut_down_after_the_scenario():
    st = status()
    assert st["result"] == "ok", st["reason"]
    assert read("guest-exit-status").strip() == "0"
    console = read("console.log")
    finished = console.find("memcg-lab-agent: scenario smoke finished, exit status 0")
    restart = console.find("reboot: Restarting system")
    assert finished >= 0
    assert restart > finished


def test_guest_ran_the_lab_kernel_under_systemd_and_cgroup_v2():
    assert read("kernel-release.txt").strip() in read("uname.txt")
    assert "memcg_lab.scenario=smoke" in read("cmdline.txt")
    assert "cgroup_fs=cgroup2fs" in read("guest-state.txt")
    # -smp alone gave the MP-table kernel one CPU: the guest must run
    # on the CPUs the host gave it.
    assert "cpus_online=2" in read("guest-state.txt")
    assert "GUEST_CPUS=2" in read("params.env")
    assert "CONFIG_MEMCG=y" in read("guest-kernel.config")
    assert "systemd" in read("journal.txt")


def test_the_guest_kept_its_tsc_when_the_host_knows_its_frequency():
    # Without tsc_early_khz the TCG guest's PIT calibration often fails
    # and every clock it has falls to jiffies (1 ms).
    provenance = dict(line.split("=", 1) for line in read("provenance.txt").splitlines()
                      if "=" in line)
    if provenance["accel"] != "tcg" or provenance["host_tsc_khz"] == "none":
        pytest.skip(f"accel {provenance['accel']}, host TSC kHz {provenance['host_tsc_khz']}")
    assert f"tsc_early_khz={provenance['host_tsc_khz']}" in read("cmdline.txt")
    assert "clocksource=tsc" in read("guest-state.txt").splitlines()


def test_memcgs_existed_with_the_parent_limit():
    assert "lab.slice/dirtier.scope" in read("cgroups-seen.txt")
    assert read("cgroups.csv") == "role,cgroup\nparent,lab.slice\ndirtier,lab.slice/dirtier.scope\n"
    params = dict(line.split("=", 1) for line in read("params-resolved.env").splitlines()
                  if "=" in line)
    want = int(params["PARENT_MAX_MB"].strip("'")) << 20
    assert int(read("parent-memory.max")) == want


def test_sampler_recorded_the_dirtier_memcg_over_time():
    with open(os.path.join(RUN, "samples.csv")) as f:
        rows = list(csv.DictReader(f))
    dirtier = [r for r in rows if r["cgroup"] == "lab.slice/dirtier.scope"]
    times = {r["time_s"] for r in dirtier}
    assert len(times) >= 2
    keys = {r["key"] for r in dirtier}
    assert {"memory.stat.file_dirty", "memory.pressure.some.total",
            "cpu.stat.system_usec"} <= keys
    assert any(r["cgroup"] == "-" and r["key"] == "vmstat.nr_dirty" for r in rows)


def test_fio_wrote_the_whole_file_to_the_stick():
    report = json.loads(read("fio-dirtier.json"))
    job = report["jobs"][0]
    assert job["error"] == 0
    params = dict(line.split("=", 1) for line in read("params-resolved.env").splitlines()
                  if "=" in line)
    assert job["write"]["io_bytes"] == int(params["DIRTY_FILE_MB"].strip("'")) << 20


def test_provenance_is_complete():
    for name in ("kernel.config", "kernel-build-id.txt", "provenance.txt",
                 "sysctl.txt", "qemu-cmdline.txt", "phases.csv"):
        assert os.path.getsize(os.path.join(RUN, name)) > 0, name
    prov = read("provenance.txt")
    assert "git_revision=" in prov and "accel=" in prov
    assert "-no-reboot" in read("qemu-cmdline.txt")


def test_the_stick_was_throttled_by_qemu_while_the_guest_wrote():
    # The guest asks, the host sets QEMU's throttle over QMP and answers.
    log = read("stick-throttle.log").splitlines()
    bps = dict(l.split("=", 1) for l in read("params-resolved.env").splitlines()
               if "=" in l).get("STICK_WRITE_BPS", "").strip("'")
    assert [l.split(" ", 1)[1] for l in log] == [
        f"request 1: on bps_wr={int(bps)}", "request 2: off bps_wr=0"]
    assert read("stick-throttle.state").strip() == "off 2"


def test_the_sticks_bdi_state_was_recorded_at_the_phase_boundaries():
    # The flusher's chunk follows the bandwidth estimate (lab/README.md).
    rows = list(csv.DictReader(read("bdi-stick.csv").splitlines()))
    bw = [(r["phase"], r["event"], int(r["value"])) for r in rows if r["key"] == "BdiWriteBandwidth"]
    # The write phase, then the runner's final drain.
    assert [(p, e) for p, e, _ in bw] == [("write", "begin"), ("write", "end"),
                                          ("drain", "begin"), ("drain", "end")]
    assert all(v > 0 for _, _, v in bw)


def test_reclaim_throttle_hist_was_set_for_the_phase():
    # The guest's hist trigger on vmscan:mm_vmscan_throttled was accepted:
    # the file has its header (a kernel without hist triggers says "not
    # available"), and any rows belong to the measured phase.
    lines = read("reclaim-throttle.csv").splitlines()
    assert lines[0] == "phase,reason,comm,pid,sleeps,delayed_us,cgroup"
    assert all(line.startswith("write,") for line in lines[1:])


def test_the_trace_events_were_enabled_at_boot_and_recording_is_off():
    # Enabling an event under load patches kernel text (lab/README.md,
    # "Tracing"): the host enables them on the command line.
    assert "trace_event=vmscan:mm_vmscan_lru_shrink_inactive_memcg," in read("cmdline.txt")
    state = dict(line.split("=", 1) for line in read("guest-state.txt").splitlines()
                 if "=" in line)
    assert "vmscan/mm_vmscan_throttled" in state["boot_trace_events"].split()


def test_the_environment_travels_with_the_run():
    provenance = dict(line.split("=", 1) for line in read("provenance.txt").splitlines()
                      if "=" in line)
    for key in ("host_cpu", "host_load_start", "host_load_end", "host_qemu_guests_start",
                "host_qemu_guests_end", "linux_source"):
        assert provenance.get(key), key
    assert provenance["linux_source"].startswith("linux-source-6.1 ")
    packages = read("rootfs-packages.txt").splitlines()
    assert any(p.startswith("fio ") for p in packages)
    assert any(p.startswith("systemd ") for p in packages)
    assert status()["failure_kind"] == ""
