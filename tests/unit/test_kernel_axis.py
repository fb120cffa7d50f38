"""The kernel axis, host side: the options every lab kernel needs (one
list in lab/lib.sh, checked on made-up .config files), lab/build-kernel.sh's
labels, sources and registered build folders (its functions on made-up
trees; nothing here configures or compiles a kernel), run-scenario.sh's
kernel labels and folder names, and the Makefile's KERNEL, LABEL, KSRC,
KBUILD and KERNELS."""
import os
import re
import subprocess
import tarfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB = os.path.join(ROOT, "lab")


def bash(script, tmp_path, env=None, cwd=LAB):
    full = {**os.environ, "MEMCG_LAB_CACHE": str(tmp_path / "cache"), **(env or {})}
    for k in ("MEMCG_LAB_KERNEL", "MEMCG_LAB_DEBUG", "MEMCG_LAB_KBUILD"):
        if k not in (env or {}):
            full.pop(k, None)
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=cwd, env=full)


def needed_options(tmp_path):
    """LAB_NEEDED_KERNEL_OPTIONS as (symbol, value) pairs."""
    p = bash('. ./lib.sh; printf "%s\\n" "${LAB_NEEDED_KERNEL_OPTIONS[@]}"', tmp_path)
    assert p.returncode == 0, p.stderr
    return [tuple(line.split(" ", 1)[0].split("=")) for line in p.stdout.splitlines()]


def full_config(tmp_path, drop=(), extra=""):
    """A .config with every needed option as the lab wants it, but drop;
    extra lines appended."""
    lines = []
    for sym, val in needed_options(tmp_path):
        if sym in drop:
            continue
        lines.append(f"# {sym} is not set" if val == "n" else f"{sym}={val}")
    path = tmp_path / "config"
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def test_the_needed_list_names_what_runs_and_measurements_use(tmp_path):
    opts = dict(needed_options(tmp_path))
    # Each entry is CONFIG_X=y|n and a reason.
    assert all(re.fullmatch(r"CONFIG_[A-Z0-9_]+", s) and v in "yn" for s, v in opts.items())
    for sym in ("CONFIG_VIRTIO_PCI", "CONFIG_VIRTIO_BLK", "CONFIG_NET_9P", "CONFIG_NET_9P_VIRTIO",
                "CONFIG_9P_FS", "CONFIG_PSI", "CONFIG_MEMCG", "CONFIG_CGROUP_WRITEBACK",
                "CONFIG_FTRACE", "CONFIG_HIST_TRIGGERS", "CONFIG_VFAT_FS", "CONFIG_EXT4_FS",
                "CONFIG_DEVTMPFS", "CONFIG_SERIAL_8250_CONSOLE"):
        assert opts[sym] == "y", sym
    assert opts["CONFIG_PSI_DEFAULT_DISABLED"] == "n"


def test_the_lab_fragment_never_contradicts_the_needed_list(tmp_path):
    fragment = {}
    with open(os.path.join(LAB, "kernel", "memcg-lab.config")) as f:
        for line in f:
            if line.startswith("CONFIG_"):
                sym, val = line.strip().split("=", 1)
                fragment[sym] = val
    for sym, val in needed_options(tmp_path):
        assert fragment.get(sym, val) == val, sym


def test_a_config_with_every_needed_option_passes(tmp_path):
    config = full_config(tmp_path)
    p = bash(f". ./lib.sh; missing_needed_options {config}; check_needed_options {config} k",
             tmp_path)
    assert p.returncode == 0 and p.stdout == "" and p.stderr == ""


def test_each_missing_option_is_named_with_what_the_kernel_has(tmp_path):
    # 9p left out, PSI a module (the guest has no modules), and PSI off
    # by default: three problems, each named.
    config = full_config(tmp_path, drop=("CONFIG_9P_FS", "CONFIG_PSI", "CONFIG_PSI_DEFAULT_DISABLED"),
                         extra="CONFIG_PSI=m\nCONFIG_PSI_DEFAULT_DISABLED=y\n")
    p = bash(f". ./lib.sh; missing_needed_options {config}", tmp_path)
    lines = p.stdout.splitlines()
    assert [line.split(" ")[0] for line in lines] == [
        "CONFIG_9P_FS=y", "CONFIG_PSI=y", "CONFIG_PSI_DEFAULT_DISABLED=n"]
    assert lines[0].endswith("got: not set)") and lines[1].endswith("got: m)")
    assert "the lab and results shares" in lines[0]
    p = bash(f". ./lib.sh; check_needed_options {config} 'kernel mine'", tmp_path)
    assert p.returncode == 1
    for sym in ("CONFIG_9P_FS=y", "CONFIG_PSI=y", "CONFIG_PSI_DEFAULT_DISABLED=n"):
        assert sym in p.stderr
    assert "kernel mine lacks 3 option(s) the lab needs" in p.stderr


def build_kernel(tmp_path, args, then, env=None):
    """build-kernel.sh's functions with args parsed, without main."""
    return bash(f"set -- {args}; source <(sed '$d' build-kernel.sh); {then}", tmp_path, env)


def test_shipped_labels_build_from_their_debian_tarballs(tmp_path):
    cache = tmp_path / "cache"
    p = build_kernel(tmp_path, "--label pristine-6.1", 'echo "$SOURCE|$SRC|$OUT"',
                     env={"MEMCG_LAB_KERNEL_TARBALL": "/src/linux-source-6.1.tar.xz"})
    assert p.stdout.strip() == (f"/src/linux-source-6.1.tar.xz|{cache}/src-pristine-6.1|"
                                f"{cache}/kbuild-pristine-6.1")
    p = build_kernel(tmp_path, "--label debian-6.12", 'echo "$SOURCE|$OUT"')
    assert p.stdout.strip() == f"/usr/src/linux-source-6.12.tar.xz|{cache}/kbuild-debian-6.12"
    # the series' labels build from the series' tree
    p = build_kernel(tmp_path, "--label debug", 'echo "$SOURCE|$SRC|$OUT|${FRAGMENTS[*]##*/}"')
    assert p.stdout.strip() == (f"|{cache}/linux-6.1|{cache}/kbuild-debug|"
                                "memcg-lab.config debug.config")


@pytest.mark.parametrize("args,message", [
    ("--label mine", "another label needs --source TARBALL|DIR or --kbuild DIR"),
    ("--label lab --source /x", "label lab is the patch series' build"),
    ("--label pristine-6.1 --source /x", "label pristine-6.1 is built from Debian's linux-source-6.1"),
    ("--label 'a/b' --source /x", "kernel label 'a/b'"),
    ("--label mine --source /x --kbuild /y", "--source and --kbuild exclude each other"),
    ("--frobnicate", "unknown argument '--frobnicate'")])
def test_bad_build_requests_exit_2_saying_why(tmp_path, args, message):
    p = bash(f"./build-kernel.sh {args}", tmp_path)
    assert p.returncode == 2 and message in p.stderr, p.stderr


def fake_tree(path, symbols):
    """A source tree whose Kconfig defines symbols."""
    path.mkdir(parents=True)
    (path / "Makefile").write_text("# fake\n")
    (path / "mm").mkdir()
    (path / "mm" / "Kconfig").write_text("".join(
        f"config {s[len('CONFIG_'):]}\n\tbool\n" for s in symbols[:len(symbols) // 2]))
    (path / "Kconfig").write_text("".join(
        f"menuconfig {s[len('CONFIG_'):]}\n\tbool\n" for s in symbols[len(symbols) // 2:]))
    return path


def test_another_trees_build_lists_fragment_symbols_it_lacks_but_needs_the_lab_options(tmp_path):
    needed = [s for s, _ in needed_options(tmp_path)]
    tree = fake_tree(tmp_path / "tree", needed + ["CONFIG_XFS_FS"])
    out = tmp_path / "cache" / "kbuild-mine"
    out.mkdir(parents=True)
    # What olddefconfig left: every needed option, no LRU_IMMEDIATE (not in
    # this tree), no XFS (in the tree, but not set).
    (out / ".config").write_text(full_config(tmp_path).read_text())
    p = build_kernel(tmp_path, f"--label mine --source {tree}", "verify_config")
    assert p.returncode == 0, p.stderr
    assert ("config note: memcg-lab.config sets CONFIG_LRU_IMMEDIATE, which this tree does "
            "not have") in p.stderr
    assert ("config note: memcg-lab.config wants CONFIG_XFS_FS=y, this tree's Kconfig gave "
            "not set") in p.stderr
    # ... but a needed option the tree's config lacks fails the build, by name.
    (out / ".config").write_text(full_config(tmp_path, drop=("CONFIG_HIST_TRIGGERS",)).read_text())
    p = build_kernel(tmp_path, f"--label mine --source {tree}", "verify_config")
    assert p.returncode == 1
    assert "CONFIG_HIST_TRIGGERS=y (" in p.stderr
    assert "kernel mine (" in p.stderr and "lacks 1 option(s) the lab needs" in p.stderr


def test_the_series_build_still_fails_on_any_fragment_line_dropped(tmp_path):
    out = tmp_path / "cache" / "kbuild-lab"
    out.mkdir(parents=True)
    (out / ".config").write_text(full_config(tmp_path).read_text())
    p = build_kernel(tmp_path, "", "verify_config")
    assert p.returncode == 1
    assert "config: memcg-lab.config wants CONFIG_LRU_IMMEDIATE=y, got not set" in p.stderr
    assert "kernel config fragment not satisfied" in p.stderr


def make_tarball(path, top, makefile):
    src = path.parent / (path.name + ".d") / top
    src.mkdir(parents=True)
    (src / "Makefile").write_text(makefile)
    with tarfile.open(path, "w:xz") as t:
        t.add(src, arcname=top)
    return path


def test_a_tarball_is_unpacked_once_per_identity(tmp_path):
    tarball = make_tarball(tmp_path / "linux-9.9.tar.xz", "linux-9.9", "VERSION = 9\n")
    src = tmp_path / "cache" / "src-mine"
    unpack = "mkdir -p \"$LAB_CACHE\"; unpack_label_tarball"
    p = build_kernel(tmp_path, f"--label mine --source {tarball}", unpack)
    assert p.returncode == 0, p.stderr
    assert (src / "Makefile").read_text() == "VERSION = 9\n"
    assert (src / ".memcg-lab-source").read_text().startswith(f"tarball:{tarball} ")
    assert "unpacking" in p.stderr
    # the same tarball again: nothing to do
    (src / "built-here").write_text("")
    p = build_kernel(tmp_path, f"--label mine --source {tarball}", unpack)
    assert p.returncode == 0 and "unpacking" not in p.stderr
    assert (src / "built-here").exists()
    # a new tarball at that path (an apt upgrade): unpacked anew
    os.remove(tarball)
    make_tarball(tmp_path / "linux-9.9.tar.xz", "linux-9.9b", "VERSION = 9b\n")
    os.utime(tarball, (1, 1))
    p = build_kernel(tmp_path, f"--label mine --source {tarball}", unpack)
    assert p.returncode == 0, p.stderr
    assert (src / "Makefile").read_text() == "VERSION = 9b\n"
    assert not (src / "built-here").exists()


def fake_build_folder(path, config):
    for f in ("arch/x86/boot/bzImage", "vmlinux", "System.map", "include/config/kernel.release"):
        (path / f).parent.mkdir(parents=True, exist_ok=True)
        (path / f).write_text("x\n")
    (path / ".config").write_text(config)
    return path


def test_a_build_folder_is_registered_as_a_label_only_with_the_needed_options(tmp_path):
    good = fake_build_folder(tmp_path / "mybuild", full_config(tmp_path).read_text())
    p = bash(f"./build-kernel.sh --label mine --kbuild {good}", tmp_path)
    assert p.returncode == 0, p.stderr
    link = tmp_path / "cache" / "kbuild-mine"
    assert p.stdout.strip() == str(link) and os.readlink(link) == str(good)
    bad = fake_build_folder(tmp_path / "other",
                            full_config(tmp_path, drop=("CONFIG_NET_9P_VIRTIO",)).read_text())
    p = bash(f"./build-kernel.sh --label theirs --kbuild {bad}", tmp_path)
    assert p.returncode == 1 and "CONFIG_NET_9P_VIRTIO=y (" in p.stderr
    assert not (tmp_path / "cache" / "kbuild-theirs").exists()
    os.remove(good / "System.map")
    p = bash(f"./build-kernel.sh --label mine2 --kbuild {good}", tmp_path)
    assert p.returncode == 1 and "has no System.map" in p.stderr


def test_a_label_s_own_build_folder_given_as_its_build_folder_is_kept(tmp_path):
    # A build kept in the cache under its label (kbuild-v2), registered
    # again: neither refused nor replaced by a link to itself.
    own = fake_build_folder(tmp_path / "cache" / "kbuild-v2", full_config(tmp_path).read_text())
    p = bash(f"./build-kernel.sh --label v2 --kbuild {own}", tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(own) and not os.path.islink(own)
    assert "already its build folder" in p.stderr
    other = fake_build_folder(tmp_path / "elsewhere", full_config(tmp_path).read_text())
    p = bash(f"./build-kernel.sh --label v2 --kbuild {other}", tmp_path)
    assert p.returncode == 1 and "is a build folder of the lab's own" in p.stderr


def run_scenario(tmp_path, *args, env=None):
    return bash(" ".join(["./run-scenario.sh"] + list(args)), tmp_path, env)


def test_a_run_refuses_an_unknown_kernel_listing_the_known_ones(tmp_path):
    fake_build_folder(tmp_path / "cache" / "kbuild-mine", full_config(tmp_path).read_text())
    p = run_scenario(tmp_path, "--check", "smoke", env={"MEMCG_LAB_KERNEL": "nope"})
    assert p.returncode == 2
    assert "unknown kernel 'nope'; kernels: lab debug pristine-6.1 debian-6.12 mine" in p.stderr
    for label in ("lab", "debug", "pristine-6.1", "debian-6.12", "mine"):
        p = run_scenario(tmp_path, "--check", "smoke", env={"MEMCG_LAB_KERNEL": label})
        assert p.returncode == 0, (label, p.stderr)
    p = run_scenario(tmp_path, "--check", "smoke",
                     env={"MEMCG_LAB_KERNEL": "pristine-6.1", "MEMCG_LAB_DEBUG": "1"})
    assert p.returncode == 2 and "DEBUG=1 is the kernel debug" in p.stderr


def test_the_kernel_flavour_follows_the_label(tmp_path):
    fake_build_folder(tmp_path / "cache" / "kbuild-mine",
                      full_config(tmp_path, extra="CONFIG_DEBUG_VM=y\n").read_text())
    for label, flavour in (("debug", "debug"), ("pristine-6.1", "lab"), ("mine", "debug")):
        p = run_scenario(tmp_path, "--host-parameters", "smoke", env={"MEMCG_LAB_KERNEL": label})
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines()[0] == f"KERNEL_FLAVOUR={flavour}", label


def run_scenario_functions(tmp_path, then, env=None):
    return bash(f"source <(sed '$d' run-scenario.sh); {then}", tmp_path, env)


def test_a_run_folder_and_its_parameters_carry_the_kernel_label(tmp_path):
    results = tmp_path / "results"
    p = run_scenario_functions(
        tmp_path, "NAME=smoke ARM=default MODE=run; check_kernel_label; claim_run_folder; "
        "SET_ASSIGNMENTS=(); KERNEL_FLAVOUR=lab KERNEL_SLOWDOWN=1 GUEST_CPUS=2; "
        "write_guest_parameters; echo \"$RUN\"; patch_series_of_kernel; linux_source_of_kernel",
        env={"MEMCG_LAB_KERNEL": "pristine-6.1", "MEMCG_LAB_RESULTS": str(results)})
    assert p.returncode == 0, p.stderr
    run, series, source = p.stdout.splitlines()
    assert re.fullmatch(re.escape(str(results)) + r"/smoke/\d{8}T\d{6}Z-pristine-6\.1-default", run)
    assert open(os.path.join(run, "params.env")).read().startswith("KERNEL_LABEL=pristine-6.1\n")
    assert series == "none"
    assert source.startswith("linux-source-6.1 ") or source == "unknown"
    # the same second: a second folder, never the first
    p = run_scenario_functions(
        tmp_path, f"NAME=smoke ARM=default MODE=run KERNEL_LABEL=pristine-6.1 RUN=; "
        f"mkdir -p {run}; date() {{ echo {os.path.basename(run).split('-')[0]}; }}; "
        "claim_run_folder; echo \"$RUN\"", env={"MEMCG_LAB_RESULTS": str(results)})
    assert p.stdout.strip() == run + ".2"


def test_a_registered_label_is_no_debian_package(tmp_path):
    p = run_scenario_functions(tmp_path, "KERNEL_LABEL=mine KBUILD=/k; linux_source_of_kernel; "
                                         "patch_series_of_kernel")
    assert p.stdout.splitlines() == ["not a Debian package", "external:/k"]


def make(*args):
    return subprocess.run(["make", "-s", "-C", ROOT] + list(args),
                          capture_output=True, text=True, timeout=60)


def test_make_passes_the_kernel_axis_on():
    p = make("-n", "kernel", "LABEL=mine", "KSRC=/src/linux")
    assert "lab/build-kernel.sh --label 'mine' --source '/src/linux'" in p.stdout
    p = make("-n", "kernel", "LABEL=mine", "KBUILD=/b")
    assert "lab/build-kernel.sh --label 'mine'  --kbuild '/b'" in p.stdout
    p = make("-n", "kernel", "DEBUG=1")
    assert "lab/build-kernel.sh --debug" in p.stdout
    p = make("-n", "scenario", "NAME=smoke", "KERNEL=pristine-6.1", "ARM=mglru")
    assert "MEMCG_LAB_KERNEL='pristine-6.1' lab/run-scenario.sh 'smoke' 'mglru'" in p.stdout
    # Without ARM=, run-scenario.sh picks the default arm.
    p = make("-n", "scenario", "NAME=smoke")
    assert p.stdout.rstrip().endswith("lab/run-scenario.sh 'smoke' ''")


def test_make_matrix_jobs_runs_one_matrix_per_kernel_with_its_own_ledger(tmp_path):
    p = make("matrix-jobs", "SCENARIOS=smoke", "ARMS=default", "RUNS=1",
             f"RESULTS={tmp_path}", "KERNELS=lab pristine-6.1")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 2
    assert "MEMCG_LAB_KERNEL=lab " in lines[0] and "MEMCG_LAB_KERNEL=pristine-6.1 " in lines[1]
    for label, ledger in (("", "matrix-ledger.csv"), ("pristine-6.1", "matrix-ledger-pristine-6.1.csv")):
        p = bash("source <(sed '$d' matrix.sh); echo \"$LEDGER\"", tmp_path,
                 env={"MEMCG_LAB_RESULTS": str(tmp_path), "MEMCG_LAB_KERNEL": label})
        assert p.stdout.strip() == f"{tmp_path}/{ledger}", p.stderr


def test_install_deps_checks_extra_packages_asked_for(tmp_path):
    p = bash("./install-deps.sh --check memcg-lab-no-such-package", tmp_path)
    assert p.returncode == 1 and "memcg-lab-no-such-package" in p.stdout.splitlines()
