#!/usr/bin/env bash
# Build the lab kernel: Debian's linux-source 6.1 + patches/series +
# lab/kernel/*.config, out of tree, in the cache folder.  Prints the path
# of the build folder (bzImage, .config, vmlinux) on stdout.
#
#   build-kernel.sh [--debug]
#
# The source tree is a git repository whose first commit is the pristine
# tarball, so a series whose kernel part changed is applied onto a clean
# tree, and a no-change rebuild, or a change to the selftest alone
# (kernel_series_hash), touches nothing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

TARBALL=${MEMCG_LAB_KERNEL_TARBALL:-/usr/src/linux-source-6.1.tar.xz}
SRC=$LAB_CACHE/linux-6.1
FLAVOUR=lab
[ "${1:-}" = --debug ] && FLAVOUR=debug
OUT=$LAB_CACHE/kbuild-$FLAVOUR
FRAGMENTS=("$LAB_ROOT/lab/kernel/memcg-lab.config")
[ "$FLAVOUR" = debug ] && FRAGMENTS+=("$LAB_ROOT/lab/kernel/debug.config")
# The objects ("  CC" lines of build.log) this build folder's last full
# build compiled: the total the next build's progress counts towards.
OBJECTS_RECORD=$OUT/.memcg-lab-objects
# A full build of either flavour compiled 1476-1481 objects when
# measured: the total a build folder with no record of its own shows.
FULL_BUILD_OBJECTS_ESTIMATE=1480

unpack_pristine_tree() {
	[ -d "$SRC/.git" ] && return 0
	[ -f "$TARBALL" ] || die "$TARBALL not found (apt-get install linux-source-6.1)"
	log "unpacking $TARBALL into $SRC (once)"
	local tmp=$LAB_CACHE/.unpack.$$
	rm -rf "$tmp"
	mkdir -p "$tmp"
	tar -C "$tmp" -xf "$TARBALL"
	local top
	top=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -n 1)
	[ -f "$top/Makefile" ] || die "$TARBALL did not unpack to a kernel tree"
	git -C "$top" init -q
	git -C "$top" add -A -f  # Debian's .gitignore ignores /*
	git -C "$top" -c user.name=memcg-lab -c user.email=lab@localhost \
		commit -q -m "pristine $(basename "$TARBALL")"
	git -C "$top" tag pristine
	mv "$top" "$SRC"
	rm -rf "$tmp"
}

# True when the source tree holds the current series' kernel patches.
tree_is_current() {
	[ -d "$SRC/.git" ] &&
		[ "$(kernel_series_hash)" = "$(cat "$SRC/.memcg-lab-series" 2>/dev/null || true)" ]
}

apply_series() {
	local want have patches=()
	mapfile -t patches < <(series_patches)
	want=$(kernel_series_hash)
	have=$(cat "$SRC/.memcg-lab-series" 2>/dev/null || true)
	[ "$want" = "$have" ] && return 0
	log "applying patches/series (${#patches[@]} patches) onto pristine 6.1"
	git -C "$SRC" am --abort >/dev/null 2>&1 || true
	git -C "$SRC" checkout -q -f pristine 2>/dev/null ||
		git -C "$SRC" reset -q --hard pristine
	git -C "$SRC" clean -q -fdx
	rm -f "$SRC/.memcg-lab-series"
	local p
	for p in "${patches[@]}"; do
		git -C "$SRC" -c user.name=memcg-lab -c user.email=lab@localhost \
			am -q --committer-date-is-author-date "$p" ||
			die "patch does not apply: $p (tree left in $SRC)"
	done
	echo "$want" >"$SRC/.memcg-lab-series"
}

# Fails on any fragment line the kernel dropped: a broken or stale
# fragment must not silently build a different kernel.  A symbol set by
# several fragments is judged by the last one, as merge_config.sh merges
# them (debug.config turns back on what memcg-lab.config trims).
verify_config() {
	local frag name line sym val got bad=0
	local -A want_val=() want_frag=()
	for frag in "${FRAGMENTS[@]}"; do
		name=${frag##*/}
		while IFS= read -r line; do
			case $line in CONFIG_*=*) ;; *) continue ;; esac
			sym=${line%%=*}
			want_val[$sym]=${line#*=}
			want_frag[$sym]=$name
		done <"$frag"
	done
	for sym in "${!want_val[@]}"; do
		val=${want_val[$sym]}
		got=$(grep -E "^$sym=" "$OUT/.config" | cut -d= -f2- || true)
		if [ "$val" = n ]; then
			[ -z "$got" ] && continue
		else
			[ "$got" = "$val" ] && continue
		fi
		log "config: ${want_frag[$sym]} wants $sym=$val, got ${got:-not set}"
		bad=1
	done
	[ $bad -eq 0 ] || die "kernel config fragment not satisfied (see above)"
}

configure_kernel() {
	local want have
	want=$(content_hash "${FRAGMENTS[@]}")-$(cat "$SRC/.memcg-lab-series")
	have=$(cat "$OUT/.memcg-lab-config" 2>/dev/null || true)
	[ "$want" = "$have" ] && [ -f "$OUT/.config" ] && return 0
	log "configuring: x86_64_defconfig + ${FRAGMENTS[*]##*/}"
	mkdir -p "$OUT"
	run_logged "$OUT/config.log" make -C "$SRC" O="$OUT" x86_64_defconfig
	run_logged "$OUT/config.log" "$SRC/scripts/kconfig/merge_config.sh" \
		-m -O "$OUT" "$OUT/.config" "${FRAGMENTS[@]}"
	run_logged "$OUT/config.log" make -C "$SRC" O="$OUT" olddefconfig
	verify_config
	echo "$want" >"$OUT/.memcg-lab-config"
}

build_bzimage() {
	local jobs start total total_from compiled
	jobs=$(($(nproc) + 1))
	start=$EPOCHSECONDS
	read -r total total_from < <(expected_objects)
	log "building bzImage in $OUT (-j$jobs; a full build: ~$total objects, $total_from; log: $OUT/build.log)"
	# Fixed identity strings keep ccache hits and build ids reproducible.
	export KBUILD_BUILD_USER=memcg-lab KBUILD_BUILD_HOST=lab
	KBUILD_BUILD_TIMESTAMP="pristine+$(cat "$SRC/.memcg-lab-series")"
	export KBUILD_BUILD_TIMESTAMP
	setup_kernel_cc
	: >"$OUT/build.log"
	if ! make -C "$SRC" O="$OUT" -j"$jobs" CC="$KERNEL_CC" bzImage 2>&1 |
		tee -a "$OUT/build.log" | show_build_progress "$total" "$start"; then
		grep -E 'error|Error' "$OUT/build.log" | head -n 20 >&2 || true
		die "kernel build failed; full log: $OUT/build.log"
	fi
	compiled=$(grep -c '^  CC ' "$OUT/build.log" || true)
	remember_object_count "$compiled"
	log "bzImage ready after $(format_duration $((EPOCHSECONDS - start))) ($compiled objects compiled)"
}

# Prints the total a build's progress counts towards and where it comes
# from: "<objects> <source>".
expected_objects() {
	local n
	n=$(cat "$OBJECTS_RECORD" 2>/dev/null || true)
	if [[ $n =~ ^[1-9][0-9]{0,6}$ ]]; then
		echo "$n as this folder's last one"
	else
		echo "$FULL_BUILD_OBJECTS_ESTIMATE an estimate: this folder has no count of its own yet"
	fi
}

# Records a finished build's object count as the next build's total,
# unless it compiled fewer than half the recorded ones: a rebuild of a
# few changed files is no estimate of the next build that changes a
# header (mmzone.h rebuilds most of the tree).
remember_object_count() {
	local compiled=$1 recorded
	recorded=$(cat "$OBJECTS_RECORD" 2>/dev/null || true)
	[[ $recorded =~ ^[1-9][0-9]{0,6}$ ]] || recorded=0
	[ "$compiled" -gt 0 ] && [ $((compiled * 2)) -ge "$recorded" ] || return 0
	echo "$compiled" >"$OBJECTS_RECORD"
}

# "740 of ~1480 objects (50%), about 3:10 left": n objects compiled of
# an expected total, elapsed seconds into the build.  The time left
# assumes the rate so far holds; a count past the total says so rather
# than show more than 100%.
build_progress_line() {
	local n=$1 total=$2 elapsed=$3
	if [ "$n" -gt "$total" ]; then
		echo "$n objects, more than the ~$total expected"
	elif [ "$elapsed" -gt 0 ] && [ "$n" -gt 0 ]; then
		echo "$n of ~$total objects ($((n * 100 / total))%), about $(format_duration $((elapsed * (total - n) / n))) left"
	else
		echo "$n of ~$total objects ($((n * 100 / total))%)"
	fi
}

# Reads make's output: a log line every tenth of the expected objects
# (about every 1.5 min of a full build on 2 cores) instead of thousands
# of lines.  Arguments: the expected total and the build's start (epoch
# seconds).
show_build_progress() {
	local total=$1 start=$2 step n=0 line
	step=$((total >= 10 ? total / 10 : 1))
	while IFS= read -r line; do
		[[ $line == "  CC "* ]] || continue
		n=$((n + 1))
		if [ $((n % step)) -eq 0 ]; then
			log "  $(build_progress_line "$n" "$total" $((EPOCHSECONDS - start)))"
		fi
	done
}

# Both flavours build from one source tree: it changes only under the
# exclusive tree lock, builds read it under the shared one, and each
# build folder has its own lock, so the lab and the debug kernel build
# side by side and a scenario never waits for the other flavour's build.
lock_tree_and_build_folder() {
	exec 9>"$LAB_CACHE/.kernel.lock"
	flock -s 9
	if ! tree_is_current; then
		flock -u 9
		flock 9
		unpack_pristine_tree
		apply_series
		flock -s 9
	fi
	exec 8>"$LAB_CACHE/.kernel-$FLAVOUR.lock"
	flock 8
}

main() {
	mkdir -p "$LAB_CACHE"
	lock_tree_and_build_folder
	configure_kernel
	build_bzimage
	echo "$OUT"
}

# On one line, as in run-scenario.sh: a build runs for minutes, and bash
# must not read an edit made to this file meanwhile.
main "$@"; exit
