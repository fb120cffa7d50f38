#!/usr/bin/env bash
# Build kernel selftests for the guest and print the folder that holds
# them.
#
#   build-kselftests.sh [cgroup | lru-immediate]
#
# cgroup (the default): the programs of KSELFTEST_PROGS from
# tools/testing/selftests/cgroup of the pristine Debian 6.1 tree (the
# series does not change them); the cgroup-selftests scenario runs them.
#
# lru-immediate: the series' own kselftest, test_lru_immediate (its
# selftest patch, tools/testing/selftests/cgroup/test_lru_immediate.c),
# from the pristine tree with the selftests part of every patch in
# patches/series applied; the immediate-invariants scenario runs it.
#
# Sources come from the cache's kernel repository by git archive of the
# pristine commit into a temporary folder, and the series' patches are
# applied there with git apply (limited to tools/testing/selftests/), so
# that a build never disturbs the tree a kernel build has checked out.
# Compiled as the selftests' Makefile does (KSELFTEST_CFLAGS, with
# cgroup_util.c) into $LAB_CACHE/kselftest/<set>-<pristine commit>
# [-<series hash>]-<flags hash>, once per key.  lab/run-scenario.sh
# copies the folder into the guest's lab share for a scenario that sets
# KSELFTESTS; its .built lists the programs, in the order to run them.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

KERNEL_REPO=${MEMCG_LAB_KERNEL_REPO:-$LAB_CACHE/linux-6.1}
# What the issue asked for: memory, slab, core cgroup and freezer tests.
# test_cpu and test_kill measure the scheduler and cgroup.kill, which the
# series does not change.
KSELFTEST_PROGS=(test_memcontrol test_kmem test_core test_freezer)
SELFTEST_DIR=tools/testing/selftests
# What cgroup/ includes: ../kselftest.h, ../kselftest_harness.h,
# ../clone3/ and ../pidfd/.
SELFTEST_SOURCES=("$SELFTEST_DIR/cgroup" "$SELFTEST_DIR/kselftest.h"
	"$SELFTEST_DIR/kselftest_harness.h" "$SELFTEST_DIR/clone3" "$SELFTEST_DIR/pidfd")
# The flags of tools/testing/selftests/cgroup/Makefile, and no more: no
# -O.  At -O2, gcc deletes cgroup_util.c's alloc_anon() (malloc, stores,
# free) as dead code, so test_memcontrol's max, oom_events and oom_group
# tests never allocate and fail in any guest.
KSELFTEST_CFLAGS=(-Wall -pthread)

pristine_commit() {
	git -C "$KERNEL_REPO" rev-parse --verify -q "pristine^{commit}" ||
		die "no pristine kernel tree in $KERNEL_REPO: run make kernel first"
}

flags_hash() {
	printf '%s' "${KSELFTEST_CFLAGS[*]}" | md5sum | cut -c1-8
}

# The selftest sources of pristine commit $1 into folder $2.
unpack_selftests() {
	git -C "$KERNEL_REPO" archive "$1" "${SELFTEST_SOURCES[@]}" | tar -x -C "$2" ||
		die "git archive of $SELFTEST_DIR from $KERNEL_REPO ($1) failed"
}

# Applies the selftests part of every patch of the series to folder $1
# (a patch without one adds nothing there).
apply_series_selftests() {
	local src=$1 list p
	list=$(series_patches)
	# A repository of its own: git apply outside one would apply the
	# paths relative to any repository TMPDIR happens to be in.
	git -C "$src" init -q
	while IFS= read -r p; do
		grep -q "^diff --git a/$SELFTEST_DIR/" "$p" || continue
		git -C "$src" apply --include="$SELFTEST_DIR/*" "$p" ||
			die "the $SELFTEST_DIR part of $(basename "$p") does not apply to pristine"
	done <<<"$list"
}

# Compiles programs $3... of folder $1's cgroup selftests into folder $2.
compile_programs() {
	local src=$1 out=$2 prog
	shift 2
	for prog in "$@"; do
		(cd "$src/$SELFTEST_DIR/cgroup" &&
			gcc "${KSELFTEST_CFLAGS[@]}" -o "$out/$prog" "$prog.c" cgroup_util.c) ||
			die "building $SELFTEST_DIR/cgroup/$prog failed"
	done
}

# Builds set $1 (cgroup or lru-immediate) unless its folder exists.
build_kselftests() {
	local set=$1 commit out src progs=()
	commit=$(pristine_commit)
	case $set in
	cgroup)
		progs=("${KSELFTEST_PROGS[@]}")
		out=$LAB_CACHE/kselftest/cgroup-${commit:0:12}-$(flags_hash)
		;;
	lru-immediate)
		progs=(test_lru_immediate)
		out=$LAB_CACHE/kselftest/lru-immediate-${commit:0:12}-$(series_hash)-$(flags_hash)
		;;
	*) die_usage "usage: build-kselftests.sh [cgroup | lru-immediate]" ;;
	esac
	if [ -f "$out/.built" ]; then
		echo "$out"
		return
	fi
	src=$(mktemp -d)
	trap 'rm -rf "$src"' RETURN
	unpack_selftests "$commit" "$src"
	if [ "$set" = lru-immediate ]; then
		apply_series_selftests "$src"
		[ -f "$src/$SELFTEST_DIR/cgroup/test_lru_immediate.c" ] ||
			die "patches/series adds no $SELFTEST_DIR/cgroup/test_lru_immediate.c"
	fi
	rm -rf "$out"
	mkdir -p "$out"
	compile_programs "$src" "$out" "${progs[@]}"
	printf '%s\n' "${progs[@]}" >"$out/.built"
	log "built ${progs[*]} of $SELFTEST_DIR/cgroup ($set, pristine ${commit:0:12}) in $out"
	echo "$out"
}

[ $# -le 1 ] || die_usage "usage: build-kselftests.sh [cgroup | lru-immediate]"
build_kselftests "${1:-cgroup}"
