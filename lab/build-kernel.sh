#!/usr/bin/env bash
# Build a kernel the lab boots, out of tree, in the cache folder, and
# print the path of its build folder (bzImage, .config, vmlinux) on
# stdout.  Each kernel has a label (lab/lib.sh: the kernel axis), and its
# build folder is $LAB_CACHE/kbuild-<label>.
#
#   build-kernel.sh                     label lab: Debian's linux-source 6.1
#                                       + patches/series + lab/kernel/*.config
#   build-kernel.sh --debug             label debug: lab + kernel/debug.config
#   build-kernel.sh --label NAME [--source TARBALL|DIR]
#                                       pristine-6.1, debian-6.12 (from their
#                                       Debian packages, installed when
#                                       missing), lab, debug; any other NAME
#                                       needs --source: a kernel tarball or
#                                       tree (a git checkout), built out of
#                                       tree with the lab's fragment
#   build-kernel.sh --label NAME --kbuild DIR
#                                       register a finished build folder as
#                                       NAME (checked, not built)
#
# Every build gets lab/kernel/memcg-lab.config merged onto the tree's
# x86_64_defconfig, ccache, and the check of the options the lab needs
# (LAB_NEEDED_KERNEL_OPTIONS in lib.sh), which fails naming each missing
# one.  The series' own builds (lab, debug) also fail on any fragment
# line olddefconfig dropped; another tree's may lack symbols the
# fragment names (CONFIG_LRU_IMMEDIATE), which are listed, not fatal.
#
# The series' source tree is a git repository whose first commit is the
# pristine tarball, so a series whose kernel part changed is applied
# onto a clean tree, and a no-change rebuild, or a change to the
# selftest alone (kernel_series_hash), touches nothing.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

TARBALL=${MEMCG_LAB_KERNEL_TARBALL:-/usr/src/linux-source-6.1.tar.xz}
SERIES_SRC=$LAB_CACHE/linux-6.1

# Sets LABEL, SOURCE (a tarball or tree for a label built without the
# series, else empty), KBUILD_GIVEN, SRC, OUT, FRAGMENTS and
# OBJECTS_RECORD from the arguments.
parse_arguments() {
	LABEL=$DEFAULT_KERNEL_LABEL SOURCE='' KBUILD_GIVEN=''
	while [ $# -gt 0 ]; do
		case $1 in
		--debug) LABEL=debug ;;
		--label) [ $# -ge 2 ] || die_usage "--label needs a name"; LABEL=$2; shift ;;
		--source) [ $# -ge 2 ] || die_usage "--source needs a tarball or a tree"; SOURCE=$2; shift ;;
		--kbuild) [ $# -ge 2 ] || die_usage "--kbuild needs a build folder"; KBUILD_GIVEN=$2; shift ;;
		*) die_usage "unknown argument '$1' (build-kernel.sh [--debug] | --label NAME [--source TARBALL|DIR | --kbuild DIR])" ;;
		esac
		shift
	done
	is_valid_kernel_label "$LABEL" ||
		die_usage "kernel label '$LABEL': letters, digits, '.', '_' and '-', at most 40, starting with a letter or digit"
	[ -z "$SOURCE" ] || [ -z "$KBUILD_GIVEN" ] || die_usage "--source and --kbuild exclude each other"
	case $LABEL in
	lab | debug)
		[ -z "$SOURCE$KBUILD_GIVEN" ] ||
			die_usage "label $LABEL is the patch series' build; give another label to a tree of your own"
		;;
	*)
		if pristine_label_package "$LABEL" >/dev/null; then
			[ -z "$SOURCE$KBUILD_GIVEN" ] ||
				die_usage "label $LABEL is built from Debian's $(pristine_label_package "$LABEL"); give another label to a tree of your own"
			SOURCE=$(pristine_label_tarball "$LABEL")
		elif [ -z "$SOURCE$KBUILD_GIVEN" ]; then
			die_usage "label $LABEL: the lab builds $SHIPPED_KERNEL_LABELS itself; another label needs --source TARBALL|DIR or --kbuild DIR (make kernel LABEL=$LABEL KSRC=... or KBUILD=...)"
		fi
		;;
	esac
	OUT=$LAB_CACHE/kbuild-$LABEL
	if [ -n "$SOURCE" ] && [ -d "$SOURCE" ]; then
		SRC=$(realpath "$SOURCE")
	elif [ -n "$SOURCE" ]; then
		SRC=$LAB_CACHE/src-$LABEL
	else
		SRC=$SERIES_SRC
	fi
	FRAGMENTS=("$LAB_ROOT/lab/kernel/memcg-lab.config")
	[ "$LABEL" != debug ] || FRAGMENTS+=("$LAB_ROOT/lab/kernel/debug.config")
	builds_the_series || FRAGMENTS+=("$LAB_ROOT/lab/kernel/later-kernels.config")
	# The objects ("  CC" lines of build.log) this build folder's last full
	# build compiled: the total the next build's progress counts towards.
	OBJECTS_RECORD=$OUT/.memcg-lab-objects
}

# The tarball a pristine shipped label builds from.  pristine-6.1 is the
# series' own tarball (MEMCG_LAB_KERNEL_TARBALL), without the series.
pristine_label_tarball() {
	if [ "$1" = pristine-6.1 ]; then
		echo "$TARBALL"
	else
		echo "/usr/src/$(pristine_label_package "$1").tar.xz"
	fi
}

# True for the labels built from the series' tree (lab, debug).
builds_the_series() {
	[ -z "$SOURCE" ]
}

# A full build of either flavour compiled 1476-1481 objects when
# measured: the total a build folder with no record of its own shows.
FULL_BUILD_OBJECTS_ESTIMATE=1480

unpack_pristine_tree() {
	local SRC=$SERIES_SRC
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
	[ -d "$SERIES_SRC/.git" ] &&
		[ "$(kernel_series_hash)" = "$(cat "$SERIES_SRC/.memcg-lab-series" 2>/dev/null || true)" ]
}

apply_series() {
	local SRC=$SERIES_SRC want have patches=()
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

# Prints "SYMBOL WANTED GOT FRAGMENT" for each fragment line the .config
# ($1) does not satisfy.  A symbol set by several fragments is judged by
# the last one, as merge_config.sh merges them (debug.config turns back
# on what memcg-lab.config trims).
unsatisfied_fragment_lines() {
	local config=$1 frag name line sym val got
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
		got=$(grep -E "^$sym=" "$config" | cut -d= -f2- || true)
		if [ "$val" = n ]; then
			[ -z "$got" ] && continue
		else
			[ "$got" = "$val" ] && continue
		fi
		echo "$sym $val ${got:-unset} ${want_frag[$sym]}"
	done | LC_ALL=C sort
}

# The symbols some Kconfig file of the source tree ($1) defines.
kconfig_symbols() {
	grep -rhoE --include='Kconfig*' '^[[:space:]]*(menu)?config[[:space:]]+[A-Za-z0-9_]+' "$1" |
		awk '{print "CONFIG_" $2}' | LC_ALL=C sort -u
}

# The series' builds fail on any fragment line the kernel dropped: a
# broken or stale fragment must not silently build a different kernel.
# Another tree's build lists them instead: a symbol its Kconfig does not
# have (the series' CONFIG_LRU_IMMEDIATE in a pristine tree, an option
# renamed since 6.1) and one it has but could not set as asked (its
# dependencies differ).  What the lab needs is checked either way.
verify_config() {
	local sym val got frag bad=0
	local -A in_tree=()
	if ! builds_the_series; then
		while IFS= read -r sym; do in_tree[$sym]=1; done < <(kconfig_symbols "$SRC")
	fi
	while read -r sym val got frag; do
		if builds_the_series; then
			log "config: $frag wants $sym=$val, got ${got/unset/not set}"
			bad=1
		elif [ -n "${in_tree[$sym]:-}" ]; then
			log "config note: $frag wants $sym=$val, this tree's Kconfig gave ${got/unset/not set}"
		else
			log "config note: $frag sets $sym, which this tree does not have"
		fi
	done < <(unsatisfied_fragment_lines "$OUT/.config")
	[ $bad -eq 0 ] || die "kernel config fragment not satisfied (see above)"
	check_needed_options "$OUT/.config" "kernel $LABEL ($OUT/.config)"
}

# What the build's tree is, for its configuration key and identity
# string: the series' kernel hash, a tarball's path, size and time, a
# git tree's commit (dirty or not), or another tree's path.
source_identity() {
	if builds_the_series; then
		cat "$SRC/.memcg-lab-series"
	elif [ -f "$SRC/.memcg-lab-source" ]; then
		cat "$SRC/.memcg-lab-source"
	elif git -C "$SRC" rev-parse --verify -q HEAD >/dev/null 2>&1; then
		echo "git:$(git -C "$SRC" rev-parse --short=12 HEAD)$(git -C "$SRC" diff --quiet HEAD 2>/dev/null || echo -dirty)"
	else
		echo "tree:$SRC"
	fi
}

configure_kernel() {
	local want have
	want=$(content_hash "${FRAGMENTS[@]}")-$(source_identity)
	have=$(cat "$OUT/.memcg-lab-config" 2>/dev/null || true)
	[ "$want" = "$have" ] && [ -f "$OUT/.config" ] && return 0
	log "configuring $LABEL from $SRC: x86_64_defconfig + ${FRAGMENTS[*]##*/}"
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
	log "building bzImage in $OUT (-j$jobs; make compiles what changed, at most ~$total objects, $total_from; log: $OUT/build.log)"
	# Fixed identity strings keep ccache hits and build ids reproducible.
	export KBUILD_BUILD_USER=memcg-lab KBUILD_BUILD_HOST=lab
	if builds_the_series; then
		KBUILD_BUILD_TIMESTAMP="pristine+$(source_identity)"
	else
		KBUILD_BUILD_TIMESTAMP="$LABEL+$(source_identity)"
	fi
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

# Both series labels build from one source tree: it changes only under
# the exclusive tree lock, builds read it under the shared one, and each
# build folder has its own lock, so the lab and the debug kernel build
# side by side and a scenario never waits for the other label's build.
lock_tree_and_build_folder() {
	if builds_the_series; then
		exec 9>"$LAB_CACHE/.kernel.lock"
		flock -s 9
		if ! tree_is_current; then
			flock -u 9
			flock 9
			unpack_pristine_tree
			apply_series
			flock -s 9
		fi
	elif [ ! -d "$SOURCE" ]; then
		exec 9>"$LAB_CACHE/.kernel-src-$LABEL.lock"
		flock 9
		unpack_label_tarball
	fi
	exec 8>"$LAB_CACHE/.kernel-$LABEL.lock"
	flock 8
}

# A tarball's identity: when it changes (an apt upgrade of the package),
# the label's tree is unpacked again.
tarball_identity() {
	echo "tarball:$(realpath "$1") $(stat -c '%s %Y' "$1")"
}

# The tarball of a label built without the series, unpacked into
# $LAB_CACHE/src-<label> (once per tarball identity).  A shipped label's
# missing Debian package is installed first (install-deps.sh: as root,
# else it names the apt-get command).
unpack_label_tarball() {
	local package top tmp
	if [ ! -f "$SOURCE" ] && package=$(pristine_label_package "$LABEL"); then
		log "kernel $LABEL needs Debian's $package ($SOURCE is missing)"
		"$LAB_ROOT/lab/install-deps.sh" "$package"
	fi
	[ -f "$SOURCE" ] || die "kernel $LABEL: $SOURCE is neither a kernel tarball nor a tree"
	[ "$(cat "$SRC/.memcg-lab-source" 2>/dev/null || true)" = "$(tarball_identity "$SOURCE")" ] &&
		return 0
	log "unpacking $SOURCE into $SRC"
	tmp=$LAB_CACHE/.unpack.$$
	rm -rf "$tmp" "$SRC"
	mkdir -p "$tmp"
	tar -C "$tmp" -xf "$SOURCE"
	top=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -n 1)
	[ -n "$top" ] && [ -f "$top/Makefile" ] || { rm -rf "$tmp"; die "$SOURCE did not unpack to a kernel tree"; }
	tarball_identity "$SOURCE" >"$top/.memcg-lab-source"
	mv "$top" "$SRC"
	rm -rf "$tmp"
}

# --kbuild: a build folder made elsewhere becomes a label, as a link
# $LAB_CACHE/kbuild-<label>; it is checked as run-scenario.sh boots it,
# and for the options the lab needs, never built.
register_build_folder() {
	local dir f
	dir=$(realpath -e "$KBUILD_GIVEN" 2>/dev/null) || die "--kbuild $KBUILD_GIVEN: no such folder"
	for f in arch/x86/boot/bzImage .config vmlinux System.map include/config/kernel.release; do
		[ -f "$dir/$f" ] || die "--kbuild $dir has no $f"
	done
	check_needed_options "$dir/.config" "kernel $LABEL ($dir/.config)"
	# The label's own folder, given as its build folder (a build kept
	# under the cache, as kbuild-v2 was): already registered.
	if [ "$(realpath -m "$OUT")" = "$dir" ]; then
		log "kernel $LABEL: $OUT is already its build folder"
		return 0
	fi
	if [ -e "$OUT" ] && [ ! -L "$OUT" ]; then
		die "$OUT is a build folder of the lab's own: give $dir another label"
	fi
	ln -sfn "$dir" "$OUT"
	log "kernel $LABEL: $OUT -> $dir"
}

# At the top level, so that tests which source this file without its
# last line get the folders of the label they pass.
parse_arguments "$@"

main() {
	mkdir -p "$LAB_CACHE"
	if [ -n "$KBUILD_GIVEN" ]; then
		register_build_folder
	else
		lock_tree_and_build_folder
		configure_kernel
		build_bzimage
	fi
	echo "$OUT"
}

# On one line, as in run-scenario.sh: a build runs for minutes, and bash
# must not read an edit made to this file meanwhile.
main "$@"; exit
