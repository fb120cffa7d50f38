"""The Makefile and lab/run-scenario.sh refuse bad input before doing any
work: unknown scenario or arm -> exit 2 with the valid names."""
import os
import subprocess

from memcg_lab import arms_table

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make(*args):
    return subprocess.run(["make", "-s", "-C", ROOT] + list(args),
                          capture_output=True, text=True, timeout=60)


def scenarios():
    return sorted(f[:-len(".scenario")] for f in os.listdir(os.path.join(ROOT, "scenarios"))
                  if f.endswith(".scenario"))


def test_help_lists_targets_and_every_scenario():
    p = make("help")
    assert p.returncode == 0
    for target in ("scenario", "test", "kernel", "rootfs"):
        assert f"make {target}" in p.stdout
    for name in scenarios():
        assert name in p.stdout


def run_scenario(*args, env=None):
    return subprocess.run([os.path.join(ROOT, "lab/run-scenario.sh")] + list(args),
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_unknown_scenario_exits_2_listing_valid_names():
    p = run_scenario("no-such-scenario")
    assert p.returncode == 2
    assert "unknown scenario 'no-such-scenario'" in p.stderr
    for name in scenarios():
        assert name in p.stderr


def test_missing_name_exits_2():
    p = run_scenario("")
    assert p.returncode == 2 and "NAME is required" in p.stderr


def test_unknown_arm_exits_2():
    p = run_scenario("smoke", "bogus")
    assert p.returncode == 2 and "unknown arm 'bogus'" in p.stderr


def test_the_old_name_vanilla_is_refused_naming_default():
    # vanilla was the patched kernel at its default policy, never the
    # pristine kernel: a run asking for it is told the arm's new name.
    # (--check: were the refusal gone, a full run would boot.)
    p = run_scenario("--check", "smoke", "vanilla")
    assert p.returncode == 2
    assert "arm 'vanilla' is now called 'default': the kernel as it boots" in p.stderr


def test_a_run_without_an_arm_runs_the_tables_first():
    assert arms_table.DEFAULT == "default"
    p = run_scenario("--check", "smoke")
    assert p.returncode == 0, p.stderr
    p = run_scenario("--arms")
    assert p.stdout.splitlines()[-1] == "  without ARM: default"


def test_help_lists_every_arm_with_its_description():
    p = make("help")
    assert p.returncode == 0
    for arm in arms_table.ARMS:
        assert f"  {arm.name:<10} {arm.description}" in p.stdout.splitlines()


def test_set_must_be_assignments():
    p = run_scenario("smoke", env={"SET": "rm -rf /"})
    assert p.returncode == 2 and "SET entries must be VAR=value" in p.stderr


def test_kernel_slowdown_must_be_a_positive_integer():
    for bad in ("0", "-1", "fast", "1.5"):
        p = run_scenario("smoke", env={"SET": f"KERNEL_SLOWDOWN={bad}"})
        assert p.returncode == 2, bad
        assert f"KERNEL_SLOWDOWN must be a positive integer, got '{bad}'" in p.stderr


def test_make_scenario_passes_the_exit_status_through():
    p = make("scenario", "NAME=nope")
    assert p.returncode != 0
    assert "unknown scenario 'nope'" in p.stderr


def free_space_check(tmp_path, stick_mb):
    """run-scenario.sh's check_free_space, sourced without its last line."""
    script = (f"source <(sed '$d' {ROOT}/lab/run-scenario.sh); STICK_SIZE_MB={stick_mb}; "
              f"FAST_SIZE_MB=64; RESULTS={tmp_path}/results; check_free_space")
    env = dict(os.environ, MEMCG_LAB_CACHE=str(tmp_path / "cache"))
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                          cwd=os.path.join(ROOT, "lab"), env=env)


def test_a_run_without_room_for_its_disks_is_refused_before_the_boot(tmp_path):
    p = free_space_check(tmp_path, 1 << 40)
    assert p.returncode == 1
    assert f"not enough disk for the run: {tmp_path}/cache/disks has " in p.stderr
    assert (f"the scratch disks (STICK_SIZE_MB + FAST_SIZE_MB) and the run folder need "
            f"{(1 << 40) + 64 + 200} MiB") in p.stderr
    assert free_space_check(tmp_path, 16).returncode == 0


def arm_check(tmp_path, arm, config, symbols):
    """run-scenario.sh's check_arm_runs_on_kernel on a kernel build folder
    holding only the .config and System.map lines given."""
    kbuild = tmp_path / "kbuild"
    kbuild.mkdir()
    (kbuild / ".config").write_text("".join(f"{line}\n" for line in config))
    (kbuild / "System.map").write_text("".join(f"ffffffff81000000 t {s}\n" for s in symbols))
    script = (f"source <(sed '$d' {ROOT}/lab/run-scenario.sh); KBUILD={kbuild}; ARM={arm}; "
              "check_arm_runs_on_kernel")
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30,
                          cwd=os.path.join(ROOT, "lab"))


PATCHED = (["CONFIG_LRU_GEN=y", "CONFIG_LRU_IMMEDIATE=y"],
           ["reclaim_wb_policy_handler", "vm_memcg_dirty_limit"])


def test_every_arm_runs_on_the_lab_kernel(tmp_path):
    for arm in arms_table.ORDER:
        sub = tmp_path / arm
        sub.mkdir()
        assert arm_check(sub, arm, *PATCHED).returncode == 0, arm


def test_a_series_arm_is_refused_on_a_kernel_without_the_series(tmp_path):
    p = arm_check(tmp_path, "activate", ["CONFIG_LRU_GEN=y"], ["shrink_lruvec"])
    assert p.returncode == 2
    assert "arm activate needs reclaim_wb_policy_handler in System.map" in p.stderr
    assert "arm activate is the series' policy activate" in p.stderr
    assert "arms that run on any kernel: default" in p.stderr


def test_immediate_is_refused_without_lru_immediate_and_mglru_without_lru_gen(tmp_path):
    (tmp_path / "a").mkdir()
    p = arm_check(tmp_path / "a", "immediate", ["# CONFIG_LRU_IMMEDIATE is not set"],
                  ["reclaim_wb_policy_handler"])
    assert p.returncode == 2 and "arm immediate needs CONFIG_LRU_IMMEDIATE=y" in p.stderr
    (tmp_path / "b").mkdir()
    p = arm_check(tmp_path / "b", "mglru", ["# CONFIG_LRU_GEN is not set"], [])
    assert p.returncode == 2 and "arm mglru needs CONFIG_LRU_GEN=y" in p.stderr
