#!/usr/bin/env bash
# Check patches/series against pristine Debian linux-source 6.1.
#
#   check-series.sh [--checkpatch-only | --final-only | --n-vs-vanilla | --full]
#
# --checkpatch-only  apply the series to a scratch index of the pristine
#                    tree (no checkout, no build) and run
#                    scripts/checkpatch.pl --strict on every patch; fast,
#                    for CI
# --final-only       the above, then build the whole series twice, with
#                    CONFIG_LRU_IMMEDIATE=y and =n
# --n-vs-vanilla     the checkpatch steps, then compile N_DIRS (mm/ and
#                    fs/proc/) of the pristine tree and of the series with
#                    CONFIG_LRU_IMMEDIATE=n, from one config, and compare
#                    every object (lab/compare-objects.sh): only the
#                    objects patches 1-2 change (the attribution
#                    tracepoint and the policy sysctl, in
#                    N_DIFFERS_ALLOWED) and those the series reorders
#                    (N_REORDERED) may differ; then compile the patches
#                    before the one that adds the option, which must
#                    match =n in every object but N_REORDERED
# --full (default)   all of the above, plus a build after every patch (each
#                    prefix of the series, CONFIG_LRU_IMMEDIATE=y where the
#                    option exists) and the debug kernel
#                    (lab/build-kernel.sh --debug: lab/kernel/debug.config,
#                    the kernel `make scenario DEBUG=1` boots)
#
# Builds run in a git worktree of the cache's kernel repository, checked
# out at its "pristine" tag ($LAB_CACHE/check-series/linux), into
# $LAB_CACHE/check-series/kbuild-{y,n}, with x86_64_defconfig plus
# lab/kernel/memcg-lab.config, like lab/build-kernel.sh.  Prints a table
# of results and exits 1 if any step failed, 2 on bad usage.
#
# checkpatch: any ERROR or WARNING fails, and so does any CHECK except
# the types in ALLOWED_CHECKS, which the kernel's own code triggers by
# design: the TRACE_EVENT() layout (OPEN_ENDED_LINE,
# PARENTHESIS_ALIGNMENT) and page flag names in PAGEFLAG() (CAMELCASE).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

KERNEL_REPO=${MEMCG_LAB_KERNEL_REPO:-$LAB_CACHE/linux-6.1}
PRISTINE_REF=pristine
CHECK_ROOT=${MEMCG_LAB_CHECK_ROOT:-$LAB_CACHE/check-series}
CHECK_TREE=$CHECK_ROOT/linux
FRAGMENT=$LAB_ROOT/lab/kernel/memcg-lab.config
JOBS=${MEMCG_LAB_JOBS:-$(nproc)}
ALLOWED_CHECKS=(OPEN_ENDED_LINE PARENTHESIS_ALIGNMENT CAMELCASE)
# Directories --n-vs-vanilla compiles: every .c file the series changes
# and the lab's config builds is in them, and the series' headers reach
# all of their objects.  (drivers/base/node.c and kernel/power/snapshot.c
# need NUMA and HIBERNATION, which the config leaves out; the series
# changes them only under #ifdef CONFIG_LRU_IMMEDIATE.)
N_DIRS=(mm/ fs/proc/)
# Patches 1-2 are not under CONFIG_LRU_IMMEDIATE: with =n, their
# tracepoint and sysctl are the only code the series adds.
N_DIFFERS_ALLOWED=(mm/vmscan.o)
# Objects whose =n code the series reorders without changing what it
# does: compaction's isolate_abort sets PG_lru back before it drops
# lru_lock rather than after (patch 8: under the lock is what lets it
# unpark a folio whose writeback ended meanwhile); memcontrol's
# mem_cgroup_wb_stats() calls mem_cgroup_dirty_stats(), which has its
# body, for the memcg of its wb (patch 16: page-writeback calls it for a
# writer's memcg).
N_REORDERED=(mm/compaction.o mm/memcontrol.o)

MODE=full
RESULTS=()
FAILED=0

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

parse_args() {
	case ${1:-} in
	--checkpatch-only) MODE=checkpatch ;;
	--final-only) MODE=final ;;
	--n-vs-vanilla) MODE=n_vs_vanilla ;;
	--full | '') MODE=full ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die_usage "unknown option: $1" ;;
	esac
	[ $# -le 1 ] || die_usage "one option at most"
}

# One row of the results table: step, PASS/FAIL, detail.
# Also said as it happens: a --full run takes over an hour.
record_result() {
	RESULTS+=("$1"$'\t'"$2"$'\t'"$3")
	[ "$2" = PASS ] || FAILED=1
	log "$1: $2 ($3)"
}

print_results() {
	local row step result detail
	printf '\n%-44s %-6s %s\n' STEP RESULT DETAIL
	printf '%-44s %-6s %s\n' ---- ------ ------
	for row in "${RESULTS[@]}"; do
		IFS=$'\t' read -r step result detail <<<"$row"
		printf '%-44s %-6s %s\n' "$step" "$result" "$detail"
	done
}

require_kernel_repo() {
	git -C "$KERNEL_REPO" rev-parse -q --verify "$PRISTINE_REF^{commit}" \
		>/dev/null ||
		die "$KERNEL_REPO has no '$PRISTINE_REF' tag (run lab/build-kernel.sh once)"
}

# Applies every patch, in order, to a scratch index holding the pristine
# tree: proves the series applies without touching any work tree.
check_series_applies() {
	local index p failed=''
	index=$(mktemp)
	GIT_INDEX_FILE=$index git -C "$KERNEL_REPO" read-tree "$PRISTINE_REF"
	for p in "${PATCHES[@]}"; do
		if ! GIT_INDEX_FILE=$index git -C "$KERNEL_REPO" \
			apply --cached "$p" 2>/dev/null; then
			failed=$(basename "$p")
			break
		fi
	done
	rm -f "$index"
	if [ -n "$failed" ]; then
		record_result "apply onto $PRISTINE_REF" FAIL "$failed does not apply"
		return 1
	fi
	record_result "apply onto $PRISTINE_REF" PASS "${#PATCHES[@]} patches"
}

# Prints "TYPE" for every checkpatch finding not in ALLOWED_CHECKS, and
# counts the allowed ones in ALLOWED_FOUND.
checkpatch_findings() {
	local out=$1 line type allowed a
	ALLOWED_FOUND=0
	while IFS= read -r line; do
		case $line in
		ERROR:* | WARNING:* | CHECK:*) ;;
		*) continue ;;
		esac
		type=${line#*:}
		type=${type%%:*}
		allowed=0
		if [ "${line%%:*}" = CHECK ]; then
			for a in "${ALLOWED_CHECKS[@]}"; do
				[ "$type" = "$a" ] && allowed=1
			done
		fi
		if [ $allowed -eq 1 ]; then
			ALLOWED_FOUND=$((ALLOWED_FOUND + 1))
		else
			printf '%s\n' "${line%%:*}:$type"
		fi
	done <"$out"
}

run_checkpatch() {
	local p out bad name checkpatch=$KERNEL_REPO/scripts/checkpatch.pl
	[ -x "$checkpatch" ] || die "$checkpatch not found"
	out=$(mktemp)
	for p in "${PATCHES[@]}"; do
		name=$(basename "$p")
		# checkpatch looks for the kernel tree in the current directory.
		(cd "$KERNEL_REPO" && "$checkpatch" --strict --show-types \
			--no-summary "$p") >"$out" 2>&1 || true
		checkpatch_findings "$out" >"$out.bad"
		bad=$(sort "$out.bad" | uniq -c |
			awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}')
		if [ -n "$bad" ]; then
			record_result "checkpatch ${name:0:33}" FAIL "$bad"
			sed -n '/^\(ERROR\|WARNING\|CHECK\):/,/^$/p' "$out" >&2
		else
			record_result "checkpatch ${name:0:33}" PASS \
				"$ALLOWED_FOUND allowed CHECKs"
		fi
	done
	rm -f "$out" "$out.bad"
}

# A worktree of the kernel repository at the pristine tag, cleaned.
prepare_check_tree() {
	mkdir -p "$CHECK_ROOT"
	if [ ! -e "$CHECK_TREE/.git" ]; then
		log "adding worktree $CHECK_TREE at $PRISTINE_REF (once)"
		git -C "$KERNEL_REPO" worktree add -q --detach "$CHECK_TREE" \
			"$PRISTINE_REF"
	fi
	git -C "$CHECK_TREE" am --abort >/dev/null 2>&1 || true
	git -C "$CHECK_TREE" checkout -q -f --detach "$PRISTINE_REF"
	git -C "$CHECK_TREE" clean -q -fdx
}

apply_patch() {
	git -C "$CHECK_TREE" -c user.name=memcg-lab -c user.email=lab@localhost \
		am -q --committer-date-is-author-date "$1"
}

# x86_64_defconfig + the lab fragment + CONFIG_LRU_IMMEDIATE=$2 in $1.
configure_build() {
	local out=$1 want=$2 extra got
	mkdir -p "$out"
	extra=$out/lru-immediate.config
	if [ "$want" = y ]; then
		echo CONFIG_LRU_IMMEDIATE=y >"$extra"
	else
		echo '# CONFIG_LRU_IMMEDIATE is not set' >"$extra"
	fi
	{
		make -C "$CHECK_TREE" O="$out" x86_64_defconfig &&
			"$CHECK_TREE/scripts/kconfig/merge_config.sh" -m -O "$out" \
				"$out/.config" "$FRAGMENT" "$extra" &&
			make -C "$CHECK_TREE" O="$out" olddefconfig
	} >"$out/config.log" 2>&1 || return 1
	# Before the patch that adds the option, it cannot be set.
	grep -q '^config LRU_IMMEDIATE$' "$CHECK_TREE/mm/Kconfig" || return 0
	got=$(grep -E '^CONFIG_LRU_IMMEDIATE=' "$out/.config" | cut -d= -f2 || true)
	[ "${got:-n}" = "$want" ] ||
		{ echo "CONFIG_LRU_IMMEDIATE=${got:-n}, wanted $want" >>"$out/config.log"; return 1; }
}

# Builds bzImage in $2 and records the result as step $1.
build_bzimage() {
	local step=$1 out=$2 start secs
	setup_kernel_cc
	export KBUILD_BUILD_USER=memcg-lab KBUILD_BUILD_HOST=lab
	start=$(date +%s)
	log "$step: building bzImage in $out"
	if nice -n 19 make -C "$CHECK_TREE" O="$out" -j"$JOBS" CC="$KERNEL_CC" \
		bzImage >"$out/build.log" 2>&1; then
		secs=$(($(date +%s) - start))
		record_result "$step" PASS "${secs}s, $(config_summary "$out")"
	else
		secs=$(($(date +%s) - start))
		record_result "$step" FAIL "${secs}s, log: $out/build.log"
		grep -E 'error|Error' "$out/build.log" | head -n 10 >&2 || true
	fi
}

config_summary() {
	if grep -q '^CONFIG_LRU_IMMEDIATE=y' "$1/.config"; then
		echo LRU_IMMEDIATE=y
	elif grep -q 'CONFIG_LRU_IMMEDIATE' "$1/.config"; then
		echo LRU_IMMEDIATE=n
	else
		echo 'no LRU_IMMEDIATE option'
	fi
}

configure_and_build() {
	local step=$1 out=$2 want=$3
	if ! configure_build "$out" "$want"; then
		record_result "$step" FAIL "configure failed: $out/config.log"
		return 0
	fi
	build_bzimage "$step" "$out"
}

# A build after each patch, incrementally in one build folder.
build_each_prefix() {
	local i=0 p
	prepare_check_tree
	for p in "${PATCHES[@]}"; do
		i=$((i + 1))
		if ! apply_patch "$p"; then
			record_result "build after patch $i" FAIL "git am failed"
			return 0
		fi
		configure_and_build "build after patch $i (=y)" "$CHECK_ROOT/kbuild-y" y
	done
}

build_final_series() {
	local p
	prepare_check_tree
	for p in "${PATCHES[@]}"; do
		apply_patch "$p" || { record_result "final series" FAIL "git am failed"; return 0; }
	done
	if [ "$MODE" = final ]; then
		configure_and_build "final series, LRU_IMMEDIATE=y" "$CHECK_ROOT/kbuild-y" y
	fi
	configure_and_build "final series, LRU_IMMEDIATE=n" "$CHECK_ROOT/kbuild-n" n
}

# The debug flavour is built by build-kernel.sh, in its own cache folder,
# so that the kernel checked here is the one DEBUG=1 scenarios boot.
build_debug_kernel() {
	local start secs log=$CHECK_ROOT/build-debug.log
	mkdir -p "$CHECK_ROOT"
	start=$(date +%s)
	if "$LAB_ROOT/lab/build-kernel.sh" --debug >"$log" 2>&1; then
		secs=$(($(date +%s) - start))
		record_result "debug kernel (debug.config)" PASS "${secs}s"
	else
		secs=$(($(date +%s) - start))
		record_result "debug kernel (debug.config)" FAIL "${secs}s, log: $log"
		tail -n 10 "$log" >&2
	fi
}

# Compiles N_DIRS of CHECK_TREE into $1 from the config $2 (the =n
# build's: the pristine Kconfig drops its one LRU_IMMEDIATE line).
compile_objects() {
	local out=$1 config=$2
	setup_kernel_cc
	rm -rf "$out"
	mkdir -p "$out"
	cp "$config" "$out/.config"
	{
		make -C "$CHECK_TREE" O="$out" olddefconfig &&
			nice -n 19 make -C "$CHECK_TREE" O="$out" -j"$JOBS" CC="$KERNEL_CC" \
				"${N_DIRS[@]}"
	} >"$out/build.log" 2>&1
}

# Compares N_DIRS of build folders $2 and $3 (lab/compare-objects.sh,
# report $4, the rest allowed to differ) and records it as step $1.
record_comparison() {
	local step=$1 base=$2 other=$3 report=$4 summary
	shift 4
	if summary=$("$LAB_ROOT/lab/compare-objects.sh" "$base" "$other" "$report" \
		"${N_DIRS[@]}" -- "$@"); then
		record_result "$step" PASS "$summary"
	else
		record_result "$step" FAIL "$summary"
	fi
}

# With CONFIG_LRU_IMMEDIATE=n the series must compile to vanilla's code
# apart from patches 1-2: compiles N_DIRS of the series (=n) and of the
# pristine tree from one config and compares every object.
check_n_matches_vanilla() {
	local vanilla=$CHECK_ROOT/obj-vanilla n=$CHECK_ROOT/obj-n p
	local step="=n vs vanilla (${N_DIRS[*]})" report=$CHECK_ROOT/n-vs-vanilla.txt
	prepare_check_tree
	for p in "${PATCHES[@]}"; do
		apply_patch "$p" || { record_result "$step" FAIL "git am failed"; return 0; }
	done
	configure_build "$CHECK_ROOT/config-n" n ||
		{ record_result "$step" FAIL "configure failed: $CHECK_ROOT/config-n/config.log"; return 0; }
	log "compiling ${N_DIRS[*]} of the series with CONFIG_LRU_IMMEDIATE=n"
	compile_objects "$n" "$CHECK_ROOT/config-n/.config" ||
		{ record_result "$step" FAIL "=n build failed: $n/build.log"; return 0; }
	git -C "$CHECK_TREE" checkout -q -f --detach "$PRISTINE_REF"
	log "compiling ${N_DIRS[*]} of the pristine tree"
	compile_objects "$vanilla" "$CHECK_ROOT/config-n/.config" ||
		{ record_result "$step" FAIL "pristine build failed: $vanilla/build.log"; return 0; }
	if ! diff <(grep -v LRU_IMMEDIATE "$n/.config") \
		<(grep -v LRU_IMMEDIATE "$vanilla/.config") >/dev/null; then
		record_result "$step" FAIL "the two configs differ beyond LRU_IMMEDIATE"
		return 0
	fi
	record_comparison "$step" "$vanilla" "$n" "$report" "${N_DIFFERS_ALLOWED[@]}" \
		"${N_REORDERED[@]}"
	check_n_matches_prefix "$n"
}

# The allowed differences are patches 1-2's and nothing else: with =n,
# the whole series compiles to what the patches before the one adding
# CONFIG_LRU_IMMEDIATE compile to, in every object.
check_n_matches_prefix() {
	local n=$1 prefix=$CHECK_ROOT/obj-prefix p count=0
	local report=$CHECK_ROOT/n-vs-prefix.txt step
	for p in "${PATCHES[@]}"; do
		grep -q '^+config LRU_IMMEDIATE$' "$p" && break
		count=$((count + 1))
	done
	step="=n vs patches 1-$count only"
	git -C "$CHECK_TREE" checkout -q -f --detach "$PRISTINE_REF"
	for p in "${PATCHES[@]:0:count}"; do
		apply_patch "$p" || { record_result "$step" FAIL "git am failed"; return 0; }
	done
	log "compiling ${N_DIRS[*]} with patches 1-$count"
	compile_objects "$prefix" "$n/.config" ||
		{ record_result "$step" FAIL "build failed: $prefix/build.log"; return 0; }
	record_comparison "$step" "$prefix" "$n" "$report" "${N_REORDERED[@]}"
}

main() {
	parse_args "$@"
	require_kernel_repo
	mapfile -t PATCHES < <(series_patches)
	[ ${#PATCHES[@]} -gt 0 ] || die "patches/series lists no patches"
	log "checking ${#PATCHES[@]} patches (mode: $MODE)"
	if check_series_applies; then
		run_checkpatch
		if [ "$MODE" = full ]; then
			build_each_prefix
		fi
		if [ "$MODE" = final ] || [ "$MODE" = full ]; then
			build_final_series
		fi
		if [ "$MODE" = n_vs_vanilla ] || [ "$MODE" = full ]; then
			check_n_matches_vanilla
		fi
		if [ "$MODE" = full ]; then
			build_debug_kernel
		fi
	fi
	print_results
	return $FAILED
}

main "$@"
