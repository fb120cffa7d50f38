"""run-scenario.sh's laid-out disks per layout recipe: which runs share a
recipe (every arm of one scenario, SET and machine), and what a run does
with the cache (boot on a copy, lay out and keep, or neither)."""
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def host(tmp_path, commands, name="dirty-neighbour", arm="activate", set_words=(), env=None):
    """Runs commands after run-scenario.sh's functions are loaded, with a
    kernel build (any ELF with a build id stands in for vmlinux) and
    MEMCG_LAB_CACHE in tmp_path; returns stdout."""
    kbuild = tmp_path / "kbuild"
    if not kbuild.exists():
        kbuild.mkdir()
        shutil.copy("/bin/true", kbuild / "vmlinux")
    words = " ".join(f"'{w}'" for w in set_words)
    script = (f"source <(sed '$d' {ROOT}/lab/run-scenario.sh); NAME={name}; ARM={arm}; "
              f"SET_ASSIGNMENTS=({words}); GUEST_MEM_MB=1024; GUEST_CPUS=2; STICK_SIZE_MB=2560; "
              f"FAST_SIZE_MB=2048; KERNEL_FLAVOUR=lab; KERNEL_SLOWDOWN=1; KBUILD={kbuild}; "
              f"IMAGE=/x/rootfs-abc.ext4; {commands}")
    env = {"MEMCG_LAB_LAYOUT_CACHE": "on", **(env or {})}
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                       cwd=os.path.join(ROOT, "lab"),
                       env=dict(os.environ, MEMCG_LAB_CACHE=str(tmp_path / "cache"), **env))
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_every_arm_of_a_scenario_shares_its_recipe_and_set_or_scenario_change_it(tmp_path):
    key = host(tmp_path, "layout_key")
    assert len(key) == 16
    assert host(tmp_path, "layout_key", arm="immediate") == key
    assert host(tmp_path, "layout_key", set_words=["NEIGHBOUR_S=30"]) != key
    assert host(tmp_path, "layout_key", name="pinned-floor") != key


def test_a_run_boots_on_a_kept_layout_else_lays_out_and_keeps_it(tmp_path):
    key = host(tmp_path, "layout_key")
    assert host(tmp_path, 'choose_layout; echo "$LAYOUT $LAYOUT_KEY"') == f"save {key}"
    kept = tmp_path / "cache" / "layouts" / key
    kept.mkdir(parents=True)
    (kept / "stick.img").write_bytes(b"stick")
    (kept / "fast.img").write_bytes(b"fast")
    assert host(tmp_path, 'choose_layout; echo "$LAYOUT"') == "cached"
    # Off unless asked for: a run on kept disks is not yet the same
    # experiment (RESULTS.md, "Laid-out disks").
    for value in ("off", ""):
        assert host(tmp_path, 'choose_layout; echo "$LAYOUT"',
                    env={"MEMCG_LAB_LAYOUT_CACHE": value}) == "fresh"
    # The run's disks are copies: the kept images stay as they were.
    run = tmp_path / "run"
    run.mkdir()
    host(tmp_path, f'choose_layout; RUN={run}; KSELFTEST_DIR=; make_scratch_disks; '
                   'echo x >>"$DISKS/stick.img"; cat "$DISKS/fast.img"')
    assert (kept / "stick.img").read_bytes() == b"stick"


def test_the_host_keeps_the_disks_the_guest_asked_for_and_answers(tmp_path):
    run = tmp_path / "run"
    disks = tmp_path / "disks"
    run.mkdir()
    disks.mkdir()
    (disks / "stick.img").write_bytes(b"laid-out stick")
    (disks / "fast.img").write_bytes(b"laid-out fast")
    (run / "console.log").write_text("memcg-lab: [20.1] disks: save layout\n")
    key = host(tmp_path, f'choose_layout; RUN={run}; DISKS={disks}; answer_layout_request; '
                         'answer_layout_request; echo "$LAYOUT_KEY"')
    assert (run / "layout.state").read_text() == "saved\n"
    kept = tmp_path / "cache" / "layouts" / key
    assert (kept / "stick.img").read_bytes() == b"laid-out stick"
    assert sorted(os.listdir(tmp_path / "cache" / "layouts")) == [key]


def test_an_image_copy_keeps_the_originals_allocation_zeros_included(tmp_path):
    """copy-image.py: data extents stay written blocks (zeros too), holes
    stay holes; cp would make the zeros holes."""
    src, dst = tmp_path / "src.img", tmp_path / "dst.img"
    with open(src, "wb") as f:
        f.truncate(64 << 20)
        f.seek(8 << 20)
        f.write(bytes(4 << 20))          # a laid-out file: zeros, allocated
        f.seek(40 << 20)
        f.write(b"metadata")
        os.fsync(f.fileno())
    subprocess.run([os.path.join(ROOT, "lab", "copy-image.py"), str(src), str(dst)], check=True)
    assert dst.read_bytes() == src.read_bytes()
    assert os.stat(dst).st_blocks == os.stat(src).st_blocks >= (4 << 20) // 512
    p = subprocess.run([os.path.join(ROOT, "lab", "copy-image.py"), str(tmp_path / "none"),
                        str(dst)], capture_output=True, text=True)
    assert p.returncode == 1 and "none" in p.stderr
