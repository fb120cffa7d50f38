"""`make clean` removes the lab's builds and images and never its results;
`make distclean` also removes the kernel source and ccache.  The real
lab/clean.sh and lab/lib.sh, copied into a temporary repository (clean
removes the repository's build/, which the other unit tests use), on a
temporary cache laid out like ~/.cache/memcg-lab."""
import fcntl
import os
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Removed by clean.
BUILDS = [
    "repo/build/tools/lab-sampler",
    "cache/kbuild-lab/vmlinux", "cache/kbuild-lab/build.log", "cache/kbuild-lab/.memcg-lab-objects",
    "cache/kbuild-debug/arch/x86/boot/bzImage", "cache/kbuild-v2/System.map",
    "cache/rootfs/base-bookworm-f76aa09f52dcc29d/etc/hostname",
    "cache/rootfs/base-bookworm-f76aa09f52dcc29d.log",
    "cache/rootfs/rootfs-f76aa09f52dcc29d-fe4cd2a1733e543a.ext4",
    "cache/rootfs/tools-build/lab-sampler", "cache/rootfs/tools.log", "cache/rootfs/mkfs.log",
    "cache/kselftest/lru-immediate-5466bdcbee2c-3bb8e00001f13a4f-a3c6f464/test_lru_immediate",
    "cache/check-series/kbuild-y/vmlinux", "cache/check-series/n-vs-vanilla.txt",
    "cache/.unpack.4242/linux-source-6.1/Makefile",
    "cache/layouts/0123456789abcdef/stick.img", "cache/shell/smoke/20261207T000000Z-default/console.log",
]
# Removed by distclean only.
SOURCE_AND_CCACHE = ["cache/linux-6.1/Makefile", "cache/ccache/0/a/x.o"]
# Never removed.
KEPT = [
    "repo/results/dirty-neighbour/20261207T011318Z-immediate/status.txt",
    "repo/build/test-results/smoke/20261207T000000Z-default/status.txt",
    "elsewhere/results/smoke/20261207T000000Z-default/summary.json",
    "cache/results-v2/dirty-neighbour/20261207T011318Z-immediate/summary.json",
    "cache/results-debug2/immediate-invariants/x/status.txt",
    "cache/experiments/chain.sh", "cache/v2work/note-20261207.md",
    "cache/accel-673f176a-aff8-43a4-81af-42fdbe983957", "cache/apt.log", "cache/kvm-probe.log",
    "cache/rootfs/.lock", "cache/.kernel.lock", "cache/.kernel-lab.lock",
]


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def lay_out(tmp_path):
    """A repository with lab/clean.sh and lab/lib.sh, a cache and a results
    folder elsewhere; scratch disks of a finished and of a running run."""
    (tmp_path / "repo" / "lab").mkdir(parents=True)
    for f in ("clean.sh", "lib.sh"):
        shutil.copy2(os.path.join(ROOT, "lab", f), tmp_path / "repo" / "lab" / f)
    for rel in BUILDS + SOURCE_AND_CCACHE + KEPT:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    stale = f"cache/disks/20261207T011318Z-immediate.{dead_pid()}/stick.img"
    running = f"cache/disks/20261207T011622Z-activate.{os.getpid()}/stick.img"
    for rel in (stale, running):
        (tmp_path / rel).parent.mkdir(parents=True)
        (tmp_path / rel).write_text("x")
    return stale, running


def clean(tmp_path, *args, results="elsewhere/results"):
    env = dict(os.environ, MEMCG_LAB_CACHE=str(tmp_path / "cache"),
               MEMCG_LAB_RESULTS=str(tmp_path / results))
    return subprocess.run([str(tmp_path / "repo" / "lab" / "clean.sh")] + list(args),
                          capture_output=True, text=True, timeout=60, env=env)


def exists(tmp_path, rel):
    return (tmp_path / rel).exists()


def test_clean_removes_builds_and_images_and_keeps_results(tmp_path):
    stale, running = lay_out(tmp_path)
    p = clean(tmp_path)
    assert p.returncode == 0, p.stderr
    for rel in BUILDS + [stale]:
        assert not exists(tmp_path, rel), rel
    for rel in KEPT + SOURCE_AND_CCACHE + [running]:
        assert exists(tmp_path, rel), rel
    # Each removal is printed with its size, folders as a whole.
    for top in ("repo/build/tools", "cache/kbuild-lab", "cache/kbuild-debug", "cache/kbuild-v2",
                "cache/kselftest", "cache/check-series", "cache/.unpack.4242", "cache/layouts",
                "cache/shell",
                "cache/rootfs/rootfs-f76aa09f52dcc29d-fe4cd2a1733e543a.ext4",
                os.path.dirname(stale)):
        assert f"removing {tmp_path / top} (" in p.stderr, top
    assert f"keeping {tmp_path / os.path.dirname(running)}: its run (pid {os.getpid()}) is running" \
        in p.stderr
    assert "make distclean removes them" in p.stderr
    # Again: nothing left to remove.
    p = clean(tmp_path)
    assert p.returncode == 0 and "no builds or images to remove" in p.stderr


def test_distclean_also_removes_the_kernel_source_and_ccache(tmp_path):
    lay_out(tmp_path)
    p = clean(tmp_path, "--dist")
    assert p.returncode == 0, p.stderr
    for rel in BUILDS + SOURCE_AND_CCACHE:
        assert not exists(tmp_path, rel), rel
    for rel in KEPT:
        assert exists(tmp_path, rel), rel
    assert f"removing {tmp_path / 'cache/linux-6.1'} (" in p.stderr
    assert f"removing {tmp_path / 'cache/ccache'} (" in p.stderr


def test_dry_run_removes_nothing(tmp_path):
    lay_out(tmp_path)
    p = clean(tmp_path, "--dist", "--dry-run")
    assert p.returncode == 0, p.stderr
    for rel in BUILDS + SOURCE_AND_CCACHE + KEPT:
        assert exists(tmp_path, rel), rel
    assert f"would remove {tmp_path / 'cache/kbuild-lab'} (" in p.stderr
    assert "removing" not in p.stderr


def test_a_results_folder_inside_a_build_folder_is_kept(tmp_path):
    lay_out(tmp_path)
    p = clean(tmp_path, results="cache/kbuild-lab/my-results")
    assert p.returncode == 0, p.stderr
    assert exists(tmp_path, "cache/kbuild-lab/vmlinux")
    assert "keeping " + str(tmp_path / "cache/kbuild-lab") + ": MEMCG_LAB_RESULTS" in p.stderr
    assert not exists(tmp_path, "cache/kbuild-debug")


def test_a_running_build_stops_clean_before_it_removes_anything(tmp_path):
    lay_out(tmp_path)
    for lock in ("cache/.kernel.lock", "cache/rootfs/.lock"):
        with open(tmp_path / lock) as f:
            fcntl.flock(f, fcntl.LOCK_SH)  # as a kernel build holds it
            p = clean(tmp_path)
        assert p.returncode == 1
        assert f"a build holds {tmp_path / lock}: not cleaning while it runs" in p.stderr
        for rel in BUILDS + SOURCE_AND_CCACHE + KEPT:
            assert exists(tmp_path, rel), rel


def test_the_check_series_worktree_is_pruned_from_the_kernel_repository(tmp_path):
    lay_out(tmp_path)
    repo = tmp_path / "cache" / "linux-6.1"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "pristine"], check=True)
    subprocess.run(git + ["worktree", "add", "-q", "--detach",
                          str(tmp_path / "cache/check-series/linux")], check=True)
    assert clean(tmp_path).returncode == 0
    listed = subprocess.run(git + ["worktree", "list", "--porcelain"], capture_output=True,
                            text=True, check=True).stdout
    assert "check-series" not in listed
    # check-series can add it again.
    subprocess.run(git + ["worktree", "add", "-q", "--detach",
                          str(tmp_path / "cache/check-series/linux")], check=True)


def test_a_cache_setting_of_home_is_refused(tmp_path):
    lay_out(tmp_path)
    env = dict(os.environ, MEMCG_LAB_CACHE=str(tmp_path), HOME=str(tmp_path))
    p = subprocess.run([str(tmp_path / "repo" / "lab" / "clean.sh")], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode == 1 and "refusing to clean it" in p.stderr
    assert exists(tmp_path, "cache/kbuild-lab/vmlinux")


def test_make_clean_and_distclean_run_clean_sh():
    p = subprocess.run(["make", "-n", "-C", ROOT, "clean", "distclean", "RESULTS=r"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    assert "MEMCG_LAB_RESULTS='r' lab/clean.sh\n" in p.stdout
    assert "MEMCG_LAB_RESULTS='r' lab/clean.sh --dist\n" in p.stdout
