"""run-scenario.sh's classify_run on consoles of real failures: an int3
oops whose trapping byte memory no longer holds as an int3 is QEMU's
(failure_kind=emulator); the same oops over a real int3 is the kernel's."""
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STALE = os.path.join(ROOT, "tests/fixtures/console/stale-int3.log")


def classify(run_dir):
    """status.txt of a run folder, as classify_run writes it after QEMU
    exited 0 with nothing else known about the run."""
    script = (f"source <(sed '$d' {ROOT}/lab/run-scenario.sh); RUN={run_dir}; FAILURE=; "
              "QEMU_RC=0; ELAPSED_S=2; ACCEL=tcg; KBUILD=/x/kbuild-lab; classify_run")
    subprocess.run(["bash", "-c", script], check=True, timeout=300, cwd=os.path.join(ROOT, "lab"))
    with open(os.path.join(run_dir, "status.txt")) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f)


def console(tmp_path, text):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "console.log").write_text(text)
    return run_dir


def test_an_int3_memory_does_not_hold_is_an_emulator_fault(tmp_path):
    with open(STALE) as f:
        status = classify(console(tmp_path, f.read()))
    assert status["result"] == "failed"
    assert status["failure_kind"] == "emulator"
    assert status["reason"].startswith("emulator fault: the vCPU ran an int3 where memory holds 66")
    assert "int3: 0000 [#1]" in status["kernel_trouble"]


def test_an_int3_memory_holds_is_the_kernel_s(tmp_path):
    with open(STALE) as f:
        text = f.read().replace(" 66 <90>", " cc <90>")
    status = classify(console(tmp_path, text))
    assert status["failure_kind"] == "kernel"
    assert status["reason"].startswith("kernel trouble on the console: ")


def test_another_oops_is_never_blamed_on_the_emulator(tmp_path):
    text = ("[    5.0] BUG: unable to handle page fault for address: 0000000000000008\n"
            "[    5.0] Oops: 0000 [#1] PREEMPT SMP\n"
            "[    5.0] Code: 48 8b 47 08 <48> 8b 00\n")
    status = classify(console(tmp_path, text))
    assert status["failure_kind"] == "kernel"
