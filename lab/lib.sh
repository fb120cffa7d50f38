# shellcheck shell=bash
# Shared helpers for the lab's host-side scripts.  Sourced, never run.

LAB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LAB_CACHE=${MEMCG_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memcg-lab}
export LAB_ROOT LAB_CACHE

# Log lines say how long the lab has been at work: since the outermost
# make target (the Makefile sets MEMCG_LAB_T0) or lab script started, so
# a script another one runs (run-scenario.sh -> build-kernel.sh) counts
# on from its caller's start instead of from zero.  Anything but epoch
# seconds is ignored: the value reaches shell arithmetic.
[[ ${MEMCG_LAB_T0:-} =~ ^[0-9]{1,12}$ ]] || MEMCG_LAB_T0=$EPOCHSECONDS
export MEMCG_LAB_T0

# M:SS, or H:MM:SS from an hour on; a negative duration (a clock set
# back) is 0:00.
format_duration() {
	local s=$(($1 < 0 ? 0 : $1))
	if [ "$s" -ge 3600 ]; then
		printf '%d:%02d:%02d\n' $((s / 3600)) $((s % 3600 / 60)) $((s % 60))
	else
		printf '%d:%02d\n' $((s / 60)) $((s % 60))
	fi
}

# "[memcg-lab +1:23]": the start of every host log line.
log_prefix() {
	printf '[memcg-lab +%s]\n' "$(format_duration $((EPOCHSECONDS - MEMCG_LAB_T0)))"
}

log() { printf '%s %s\n' "$(log_prefix)" "$*" >&2; }
die() { printf '%s error: %s\n' "$(log_prefix)" "$*" >&2; exit 1; }
# Exit 2 means "you asked for something that does not exist".
die_usage() { printf '%s error: %s\n' "$(log_prefix)" "$*" >&2; exit 2; }

# The kernel flavour a run boots, lab or debug: the one place that
# decides it, so that run-scenario.sh (which boots it and records it as
# KERNEL_FLAVOUR in params.env) and matrix.sh (which keeps each
# flavour's jobs and estimates apart) agree.  A kernel given with
# MEMCG_LAB_KBUILD is a debug one if its .config has DEBUG_VM.
wanted_kernel_flavour() {
	if [ -n "${MEMCG_LAB_KBUILD:-}" ]; then
		if grep -qx CONFIG_DEBUG_VM=y "$MEMCG_LAB_KBUILD/.config" 2>/dev/null; then
			echo debug
		else
			echo lab
		fi
	elif [ -n "${MEMCG_LAB_DEBUG:-}" ]; then
		echo debug
	else
		echo lab
	fi
}

# Hash of files' contents (and their names), used as a rebuild key.
content_hash() {
	local f
	for f in "$@"; do
		[ -e "$f" ] || die "missing input for hash: $f"
		printf '%s\0' "${f#"$LAB_ROOT"/}"
		if [ -d "$f" ]; then
			# Symlinks count by their target: masked units are
			# links to /dev/null.
			(cd "$f" && find . -type f -print0 | LC_ALL=C sort -z |
				xargs -0 -r sha256sum &&
				find . -type l -printf '%p -> %l\n' | LC_ALL=C sort)
		else
			sha256sum <"$f"
		fi
	done | sha256sum | cut -c1-16
}

# Patches listed in patches/series, in order, as absolute paths.
series_patches() {
	local line
	[ -f "$LAB_ROOT/patches/series" ] || die "patches/series is missing"
	while IFS= read -r line || [ -n "$line" ]; do
		line=${line%%#*}
		line=${line//[[:space:]]/}
		[ -n "$line" ] || continue
		[ -f "$LAB_ROOT/patches/$line" ] ||
			die "patches/series lists $line, which is not in patches/"
		printf '%s\n' "$LAB_ROOT/patches/$line"
	done <"$LAB_ROOT/patches/series"
}

# Hash of patches/series and every patch it lists: the series' identity
# (lab/build-kernel.sh's tree, lab/build-kselftests.sh's lru-immediate).
series_hash() {
	local patches=()
	mapfile -t patches < <(series_patches)
	content_hash "$LAB_ROOT/patches/series" "${patches[@]}"
}

# Files of the source tree that no kernel build reads: a patch that
# touches only these (the series' selftest) must not force a rebuild.
KERNEL_UNBUILT_PATHS='tools/|Documentation/|MAINTAINERS$'

# The hash of the series' patches that change what the kernel build
# reads, in series order: it names the kernel tree and the bzImage.
kernel_series_hash() {
	local p files patches=()
	while IFS= read -r p; do
		files=$(sed -n 's|^diff --git a/\([^ ]*\) .*|\1|p' "$p")
		grep -Eqv "^($KERNEL_UNBUILT_PATHS)" <<<"$files" && patches+=("$p")
	done < <(series_patches)
	[ ${#patches[@]} -gt 0 ] || { echo none; return; }
	content_hash "${patches[@]}"
}

# Sets KERNEL_CC for kernel builds: gcc through ccache when it is
# installed, with the cache and sloppiness every lab build shares (so
# the lab, debug and check-series builds hit each other's objects).
setup_kernel_cc() {
	export CCACHE_DIR=${CCACHE_DIR:-$LAB_CACHE/ccache}
	export CCACHE_SLOPPINESS=time_macros,include_file_mtime,include_file_ctime
	KERNEL_CC=gcc
	if command -v ccache >/dev/null; then
		KERNEL_CC="ccache gcc"
	fi
}

# Prints the last lines of a log when a long step fails.
run_logged() {
	local logfile=$1
	shift
	if ! "$@" >>"$logfile" 2>&1; then
		tail -n 30 "$logfile" >&2
		die "'$*' failed; full log: $logfile"
	fi
}
