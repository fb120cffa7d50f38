"""Assertions on a smoke run made to look hung (SET="SILENT_S=...", a
short MEMCG_LAB_HANG_S): the host saw the silence, injected an NMI, and
the guest kernel's panic dump of tasks, CPUs and memory is in
hang-dump.txt, while the run is failed for the hang, not for the panic.

LAB_HANG_RUN names the run folder (tests/run-tests.sh sets it)."""
from run_folder import RunFolder

HANG = RunFolder("LAB_HANG_RUN")
pytestmark = HANG.skip
read, status = HANG.read, HANG.status


def test_the_run_failed_for_the_silence():
    st = status()
    assert st["result"] == "failed"
    assert st["reason"].startswith("guest hang: no console output for")
    # The panic the NMI asked for is not a splat of the kernel's own.
    assert st["kernel_trouble"] == ""


def test_the_scenario_had_finished_its_write_before_the_silence():
    console = read("console.log")
    assert "phase write ends" in console
    assert "scenario smoke finished" not in console


def test_the_vcpus_were_sampled_before_the_nmi():
    lines = read("hang-pcs.txt").splitlines()
    assert lines[0].startswith("# vCPU program counters, 20 samples")
    rows = [line.split(" ", 2) for line in lines[1:]]
    # A silent guest with one sleeping scenario: 20 samples of each CPU,
    # and none of them outside idle, user space or a kernel symbol.
    for cpu in ("0", "1"):
        assert sum(int(n) for c, n, _ in rows if c == cpu) == 20
    assert all(not where.startswith("(0x") for _, _, where in rows)


def test_the_dump_holds_the_panic_every_task_every_cpu_and_memory():
    dump = read("hang-dump.txt")
    assert "Kernel panic - not syncing: NMI: Not continuing" in dump
    # show_state(): the agent's scenario sleeps in the silent phase.
    assert "task:systemd " in dump
    assert "task:sleep " in dump
    # CPU 0 takes the panic; QEMU's NMI has put every other CPU into
    # its own NMI handler, which no backtrace IPI reaches: hang-pcs.txt
    # is where the other CPUs were.
    assert "NMI backtrace for cpu 0" in dump
    assert "Mem-Info:" in dump
    # The dump is the console from the NMI on, not the whole console.
    assert "phase write begins" not in dump
