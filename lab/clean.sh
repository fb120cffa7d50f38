#!/usr/bin/env bash
# `make clean` and `make distclean`: remove the lab's builds and images,
# never its results.  Prints each folder it removes, with its size.
#
#   clean.sh [--dist] [--dry-run]
#
# clean removes
#   build/ in the repo (the guest tools), but not build/test-results (the
#       boot tests' run folders);
#   in $MEMCG_LAB_CACHE: kbuild-* (kernel builds of every label; a label
#       registered with make kernel KBUILD=... is a link, and only the
#       link goes), the contents of rootfs/
#       (mmdebstrap trees, images, the tools' build), kselftest/ (selftest
#       builds), check-series/ (its kernel worktree and builds), .unpack.*
#       (an interrupted unpack), layouts/ (laid-out disks kept per
#       recipe), shell/ (make shell's consoles) and the scratch disks in
#       disks/ of runs that are no longer running.
# --dist also removes linux-6.1/ (the unpacked, patched kernel source;
#       unpacking it again takes a few minutes), src-*/ (the unpacked
#       trees of the pristine-6.1, debian-6.12 and tarball labels) and ccache/ (the next
#       kernel build starts cold: about 16 min on 2 cores).
# --dry-run prints what would be removed and removes nothing.
#
# Never removed: results/, $MEMCG_LAB_RESULTS, the cache's results*,
# experiments/, and whatever else is in the cache (the KVM probe's
# answer, apt.log, notes).  It refuses to run while a kernel or rootfs
# build holds its lock; do not run it during `make check-series`, which
# takes none.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

DIST=0
DRY_RUN=0
RESULTS=$(realpath -m "${MEMCG_LAB_RESULTS:-$LAB_ROOT/results}")
REMOVED=0

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

parse_args() {
	local arg
	for arg in "$@"; do
		case $arg in
		--dist) DIST=1 ;;
		--dry-run) DRY_RUN=1 ;;
		-h | --help) usage; exit 0 ;;
		*) usage >&2; die_usage "unknown option: $arg" ;;
		esac
	done
}

# A cache setting gone wrong must not turn into rm -rf of a home folder.
check_cache_path() {
	local cache
	cache=$(realpath -m "$LAB_CACHE")
	case $cache in
	/ | "$(realpath -m "$HOME")" | "$(realpath -m "$LAB_ROOT")")
		die "MEMCG_LAB_CACHE is $cache: refusing to clean it" ;;
	esac
}

# Waits for no one: a build that holds its lock is running, and removing
# its folder under it would fail it half way.  The locks stay held until
# this script exits.
lock_out_builds() {
	local lock fd=20
	mkdir -p "$LAB_CACHE"
	for lock in "$LAB_CACHE/.kernel.lock" "$LAB_CACHE"/.kernel-*.lock "$LAB_CACHE/rootfs/.lock"; do
		[ -e "$lock" ] || continue
		exec {fd}>>"$lock"
		flock -n "$fd" || die "a build holds $lock: not cleaning while it runs"
	done
}

# True when the results folder is the path or inside it.
holds_results() {
	local path
	path=$(realpath -m "$1")
	[ "$RESULTS" = "$path" ] || [[ $RESULTS == "$path"/* ]]
}

# Removes one file or folder, saying what and how big.
remove_path() {
	local path=$1 size
	# A registered label's link goes even when its folder is gone.
	[ -e "$path" ] || [ -L "$path" ] || return 0
	if holds_results "$path"; then
		log "keeping $path: MEMCG_LAB_RESULTS ($RESULTS) is in it"
		return 0
	fi
	size=$(du -sh "$path" 2>/dev/null | cut -f1)
	REMOVED=$((REMOVED + 1))
	if [ "$DRY_RUN" = 1 ]; then
		log "would remove $path ($size)"
	else
		log "removing $path ($size)"
		rm -rf -- "$path"
	fi
}

# Scratch disks are named <run folder>.<pid of run-scenario.sh>, and the
# run removes them when it ends: one whose process is alive is in use.
remove_stale_disks() {
	local d pid
	for d in "$LAB_CACHE"/disks/*; do
		[ -e "$d" ] || continue
		pid=${d##*.}
		if [[ $pid =~ ^[0-9]+$ ]] && [ -d "/proc/$pid" ]; then
			log "keeping $d: its run (pid $pid) is running"
			continue
		fi
		remove_path "$d"
	done
}

# The check-series worktree is registered in the kernel repository: a
# removed one must be pruned, or check-series cannot add it again.
prune_kernel_worktrees() {
	[ "$DRY_RUN" = 0 ] && [ -d "$LAB_CACHE/linux-6.1/.git" ] || return 0
	git -C "$LAB_CACHE/linux-6.1" worktree prune
}

remove_builds() {
	local p
	for p in "$LAB_ROOT"/build/* "$LAB_ROOT"/build/.[!.]*; do
		[ -e "$p" ] || continue
		[ "$p" != "$LAB_ROOT/build/test-results" ] || continue
		remove_path "$p"
	done
	for p in "$LAB_CACHE"/kbuild-* "$LAB_CACHE"/.unpack.* "$LAB_CACHE/kselftest" \
		"$LAB_CACHE/check-series" "$LAB_CACHE/layouts" "$LAB_CACHE/shell"; do
		remove_path "$p"
	done
	prune_kernel_worktrees
	# rootfs/.lock stays: a build waiting on it must find its folder.
	for p in "$LAB_CACHE"/rootfs/* "$LAB_CACHE"/rootfs/.[!.]*; do
		[ -e "$p" ] || continue
		[ "$p" != "$LAB_CACHE/rootfs/.lock" ] || continue
		remove_path "$p"
	done
	remove_stale_disks
}

remove_source_and_ccache() {
	local p
	remove_path "$LAB_CACHE/linux-6.1"
	for p in "$LAB_CACHE"/src-*; do
		remove_path "$p"
	done
	remove_path "$LAB_CACHE/ccache"
}

main() {
	parse_args "$@"
	check_cache_path
	[ "$DRY_RUN" = 1 ] || lock_out_builds
	remove_builds
	[ "$DIST" = 0 ] || remove_source_and_ccache
	[ "$REMOVED" -gt 0 ] || log "no builds or images to remove"
	log "kept: results ($RESULTS, $LAB_CACHE/results*, $LAB_CACHE/experiments)"
	[ "$DIST" = 1 ] ||
		log "kept: the kernel source ($LAB_CACHE/linux-6.1) and ccache: make distclean removes them"
}

main "$@"; exit
