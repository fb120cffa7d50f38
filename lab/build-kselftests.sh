#!/usr/bin/env bash
# Build the kernel's own cgroup selftests for the guest and print the
# folder that holds them.
#
#   build-kselftests.sh
#
# The programs of KSELFTEST_PROGS from tools/testing/selftests/cgroup of
# the pristine Debian 6.1 tree (the series does not touch them), taken
# with git archive from the cache's kernel repository, so that a build
# never disturbs the tree a kernel build has checked out.  Compiled as the
# selftests' Makefile does (KSELFTEST_CFLAGS, with cgroup_util.c) into
# $LAB_CACHE/kselftest/cgroup-<commit>-<flags hash>, once per pristine
# commit and set of flags.  The cgroup-selftests scenario runs them
# (lab/run-scenario.sh copies the folder into the guest's lab share).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

KERNEL_REPO=${MEMCG_LAB_KERNEL_REPO:-$LAB_CACHE/linux-6.1}
# What the issue asked for: memory, slab, core cgroup and freezer tests.
# test_cpu and test_kill measure the scheduler and cgroup.kill, which the
# series does not change.
KSELFTEST_PROGS=(test_memcontrol test_kmem test_core test_freezer)
SELFTEST_DIR=tools/testing/selftests
# The flags of tools/testing/selftests/cgroup/Makefile, and no more: no
# -O.  At -O2, gcc deletes cgroup_util.c's alloc_anon() (malloc, stores,
# free) as dead code, so test_memcontrol's max, oom_events and oom_group
# tests never allocate and fail in any guest.
KSELFTEST_CFLAGS=(-Wall -pthread)

build_kselftests() {
	local commit out src prog
	commit=$(git -C "$KERNEL_REPO" rev-parse --verify -q "pristine^{commit}") ||
		die "no pristine kernel tree in $KERNEL_REPO: run make kernel first"
	out=$LAB_CACHE/kselftest/cgroup-${commit:0:12}-$(printf '%s' "${KSELFTEST_CFLAGS[*]}" | md5sum | cut -c1-8)
	if [ -f "$out/.built" ]; then
		echo "$out"
		return
	fi
	src=$(mktemp -d)
	trap 'rm -rf "$src"' RETURN
	# cgroup/ includes ../kselftest.h, ../clone3/ and ../pidfd/.
	git -C "$KERNEL_REPO" archive "$commit" "$SELFTEST_DIR/cgroup" "$SELFTEST_DIR/kselftest.h" \
		"$SELFTEST_DIR/clone3" "$SELFTEST_DIR/pidfd" | tar -x -C "$src" ||
		die "git archive of $SELFTEST_DIR from $KERNEL_REPO ($commit) failed"
	rm -rf "$out"
	mkdir -p "$out"
	for prog in "${KSELFTEST_PROGS[@]}"; do
		(cd "$src/$SELFTEST_DIR/cgroup" &&
			gcc "${KSELFTEST_CFLAGS[@]}" -o "$out/$prog" "$prog.c" cgroup_util.c) ||
			die "building $SELFTEST_DIR/cgroup/$prog failed (source: $KERNEL_REPO at $commit)"
	done
	printf '%s\n' "${KSELFTEST_PROGS[@]}" >"$out/.built"
	log "built ${KSELFTEST_PROGS[*]} of $SELFTEST_DIR/cgroup (pristine ${commit:0:12}) in $out"
	echo "$out"
}

build_kselftests
