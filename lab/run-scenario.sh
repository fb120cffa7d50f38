#!/usr/bin/env bash
# The front door behind `make scenario`: set up what is missing, boot the
# lab kernel in QEMU on the scenario, collect results, print a summary.
#
#   run-scenario.sh --check NAME [ARM]  validate the names and SET only
#   run-scenario.sh --shell NAME [ARM]  boot NAME's guest to a root shell on
#                                     this terminal instead of running it
#   run-scenario.sh --host-parameters NAME [ARM]
#                                     print KERNEL_FLAVOUR and TIMEOUT_S as
#                                     the run would have them (matrix.sh)
#   run-scenario.sh --arms            list the arms (scenarios/arms.tsv)
#   run-scenario.sh NAME [ARM]        ARM: one of scenarios/arms.tsv (default: DEFAULT_ARM)
#   env SET="VAR=value ..."           override scenario defaults; a value with
#                                     spaces is quoted as in the shell:
#                                     SET='SYSCTLS="vm.a=1 vm.b=2" RUNS_S=30'
#   env MEMCG_LAB_RESULTS=dir         results root (default: ./results)
#   env MEMCG_LAB_ACCEL=tcg|kvm       skip the KVM probe; QEMU's -accel options
#                                     may follow (tcg,thread=single)
#   env MEMCG_LAB_KERNEL=label        the kernel, by label (lab/lib.sh): lab
#                                     (default), debug, pristine-6.1, debian-6.12
#                                     (built when missing), or one registered by
#                                     make kernel LABEL=... KSRC=|KBUILD=...
#   env MEMCG_LAB_DEBUG=1             boot the debug kernel (DEBUG_VM, lockdep, ...),
#                                     the same as MEMCG_LAB_KERNEL=debug
#   env MEMCG_LAB_KBUILD=dir          boot the kernel build in dir, build nothing;
#                                     its label: MEMCG_LAB_KERNEL, else the
#                                     folder's name less kbuild-
#   env MEMCG_LAB_TEST_RESET_S=N      tests: reset the first boot N s in, through
#                                     QMP, once the kernel has printed a line
#                                     (the boot-reset retry's test)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# The arms, what each needs of the kernel: the table's shell reader.
. "$LAB_ROOT/scenarios/lib/arms.sh"
# The arm of a run that names none (make scenario without ARM=): the
# table's first.
DEFAULT_ARM=${ARM_NAMES[0]}

RESULTS=$(realpath -m "${MEMCG_LAB_RESULTS:-$LAB_ROOT/results}")
HANG_S=${MEMCG_LAB_HANG_S:-180}
# Console lines that make a run failed, whatever the scenario says.
CLEAN_SHUTDOWN='reboot: (Restarting system|Power down)'
# What a splat prints: panics, BUG/WARN (lockdep reports are WARNINGs,
# DEBUG_LIST corruption a WARN or BUG), DEBUG_VM's page dumps, UBSAN,
# lockups and RCU stalls.  Not "Call Trace:" alone: an OOM kill dumps one
# too, and OOM kills are a result (memory.events oom_kill), not a bug.
# die() prints "<what>: <error code> [#<count>]" (an int3 trap, an oops).
KERNEL_TROUBLE='Kernel panic|BUG: |Oops|: [0-9a-f]{4} \[#[0-9]+\]|WARNING: |general protection fault|soft lockup|hard LOCKUP|blocked for more than|detected stall|page dumped because|list_(add|del) corruption|UBSAN: '

list_scenarios() {
	local f
	for f in "$LAB_ROOT"/scenarios/*.scenario; do
		basename "$f" .scenario
	done
}

check_arguments() {
	local valid
	valid=$(list_scenarios | tr '\n' ' ')
	[ -n "$NAME" ] || die_usage "NAME is required; scenarios: $valid"
	[ -f "$LAB_ROOT/scenarios/$NAME.scenario" ] ||
		die_usage "unknown scenario '$NAME'; scenarios: $valid"
	local problem
	problem=$(arm_name_problem "$ARM") || die_usage "$problem"
	check_kernel_label
	split_set_assignments
	local kv
	for kv in "${SET_ASSIGNMENTS[@]}"; do
		[[ $kv =~ ^[A-Z][A-Z0-9_]*= ]] ||
			die_usage "SET entries must be VAR=value, got '$kv' (a value with spaces is quoted: VAR=\"a b\")"
		# Values reach scenario files that use them in $((...)), which
		# would run a command substitution hidden in one.
		[[ ${kv#*=} =~ ^[^\;\&\|\`\$]*$ ]] ||
			die_usage "SET values may not hold ; & | \` or \$, got '$kv'"
		[[ $kv != KERNEL_SLOWDOWN=* || ${kv#*=} =~ ^[1-9][0-9]*$ ]] ||
			die_usage "KERNEL_SLOWDOWN must be a positive integer, got '${kv#*=}'"
		[[ $kv != GUEST_CPUS=* || ${kv#*=} =~ ^[1-9][0-9]?$ ]] ||
			die_usage "GUEST_CPUS must be an integer from 1 to 99, got '${kv#*=}'"
	done
}

# Sets KERNEL_LABEL, the run's kernel, and refuses one the lab neither
# builds nor has registered, listing those it knows.
check_kernel_label() {
	KERNEL_LABEL=$(wanted_kernel_label)
	is_valid_kernel_label "$KERNEL_LABEL" ||
		die_usage "kernel label '$KERNEL_LABEL': letters, digits, '.', '_' and '-', at most 40"
	if [ -n "${MEMCG_LAB_DEBUG:-}" ] && [ "$KERNEL_LABEL" != debug ] && [ -z "${MEMCG_LAB_KBUILD:-}" ]; then
		die_usage "DEBUG=1 is the kernel debug; it cannot also be kernel $KERNEL_LABEL"
	fi
	[ -z "${MEMCG_LAB_KBUILD:-}" ] || return 0
	is_shipped_kernel_label "$KERNEL_LABEL" && return 0
	[ -f "$LAB_CACHE/kbuild-$KERNEL_LABEL/arch/x86/boot/bzImage" ] && return 0
	die_usage "unknown kernel '$KERNEL_LABEL'; kernels: $(known_kernel_labels) (another: make kernel LABEL=$KERNEL_LABEL KSRC=<tarball or tree> or KBUILD=<build folder>)"
}

# A kernel build folder the lab did not build itself must hold what a
# run boots and records, and every option the lab needs.
check_build_folder() {
	local f
	for f in arch/x86/boot/bzImage .config vmlinux System.map include/config/kernel.release; do
		[ -f "$KBUILD/$f" ] || die "kernel $KERNEL_LABEL: $KBUILD has no $f"
	done
	check_needed_options "$KBUILD/.config" "kernel $KERNEL_LABEL ($KBUILD/.config)"
}

# Sets KBUILD, the build folder of the run's kernel: MEMCG_LAB_KBUILD as
# given, the series' builds and the pristine labels built (or found up
# to date) by build-kernel.sh, a registered label's folder as it is.
choose_kernel_build() {
	if [ -n "${MEMCG_LAB_KBUILD:-}" ]; then
		# A kernel built elsewhere (a bisection step, a saved baseline).
		KBUILD=$(realpath "$MEMCG_LAB_KBUILD")
		check_build_folder
		log "kernel $KERNEL_LABEL: $KBUILD (MEMCG_LAB_KBUILD, not rebuilt)"
		return
	fi
	case $KERNEL_LABEL in
	lab) KBUILD=$("$LAB_ROOT/lab/build-kernel.sh" | tail -n 1) ;;
	debug)
		# The debug flavour (lab/kernel/debug.config); its page poisoning
		# is off unless asked for on the command line.
		KBUILD=$("$LAB_ROOT/lab/build-kernel.sh" --debug | tail -n 1)
		KERNEL_CMDLINE_EXTRA="debug_pagealloc=on ${KERNEL_CMDLINE_EXTRA:-}"
		;;
	*)
		if is_shipped_kernel_label "$KERNEL_LABEL"; then
			KBUILD=$("$LAB_ROOT/lab/build-kernel.sh" --label "$KERNEL_LABEL" | tail -n 1)
		else
			KBUILD=$LAB_CACHE/kbuild-$KERNEL_LABEL
			check_build_folder
			log "kernel $KERNEL_LABEL: $KBUILD (as make kernel LABEL=$KERNEL_LABEL built or registered it)"
		fi
		;;
	esac
}

# provenance.txt's patch_series: the series' kernel hash for its own
# builds, none for a pristine label, else the folder booted.
patch_series_of_kernel() {
	case $KERNEL_LABEL in
	lab | debug)
		if [ -z "${MEMCG_LAB_KBUILD:-}" ]; then
			cat "$LAB_CACHE/linux-6.1/.memcg-lab-series"
			return
		fi
		;;
	*) if [ -z "${MEMCG_LAB_KBUILD:-}" ] && pristine_label_package "$KERNEL_LABEL" >/dev/null; then
		echo none
		return
	fi ;;
	esac
	echo "external:$KBUILD"
}

# The Debian package the kernel's source came from, and its version.
linux_source_of_kernel() {
	local package=linux-source-6.1
	case $KERNEL_LABEL in
	lab | debug) ;;
	*) package=$(pristine_label_package "$KERNEL_LABEL") || { echo "not a Debian package"; return; } ;;
	esac
	dpkg-query -W -f='${Package} ${Version}' "$package" 2>/dev/null || echo unknown
}

# SET's words, split as the shell splits words (blanks outside quotes
# end a word; '...' keeps everything, "..." everything but \" and \\,
# a backslash outside quotes keeps the next character) into
# SET_ASSIGNMENTS, without eval: nothing in SET is ever run.  Refuses,
# naming the word, an unclosed quote or a trailing backslash; and a
# newline, because params.env and provenance.txt hold one entry a line.
split_set_assignments() {
	local s=${SET:-} i=0 c quote='' word='' in_word='' start=0
	SET_ASSIGNMENTS=()
	[[ $s != *$'\n'* ]] || die_usage "SET may not hold a newline, got '$s'"
	while [ "$i" -lt "${#s}" ]; do
		c=${s:i:1}
		if [ "$quote" = "'" ]; then
			if [ "$c" = "'" ]; then quote=''; else word+=$c; fi
		elif [ "$quote" = '"' ]; then
			if [ "$c" = '"' ]; then
				quote=''
			elif [ "$c" = "\\" ] && [[ ${s:i+1:1} == [\"\\] ]]; then
				i=$((i + 1))
				word+=${s:i:1}
			else
				word+=$c
			fi
		else
			case $c in
			' ' | $'\t')
				[ -z "$in_word" ] || SET_ASSIGNMENTS+=("$word")
				word='' in_word=''
				;;
			*)
				[ -n "$in_word" ] || start=$i
				in_word=yes
				case $c in
				"'" | '"') quote=$c ;;
				"\\")
					[ $((i + 1)) -lt "${#s}" ] ||
						die_usage "SET ends in a lone backslash: '${s:start}'"
					i=$((i + 1))
					word+=${s:i:1}
					;;
				*) word+=$c ;;
				esac
				;;
			esac
		fi
		i=$((i + 1))
	done
	[ -z "$quote" ] ||
		die_usage "SET has an unclosed $quote in '${s:start}' (quote a whole value: VAR=\"a b\")"
	[ -z "$in_word" ] || SET_ASSIGNMENTS+=("$word")
}

# An arm the kernel in KBUILD cannot run is refused before the boot,
# with the reason (the guest's apply_arm would fail it minutes later,
# after the set-up).  What each arm needs is the table's kernel_needs: a
# line of the build's .config, or a symbol of its System.map, for what
# no option names (the series' sysctl handler, which every build of the
# series has whatever its options).
check_arm_runs_on_kernel() {
	local config=$KBUILD/.config map=$KBUILD/System.map need needs=() missing
	[ "${ARM_KERNEL_NEEDS[$ARM]}" != - ] || return 0
	IFS=, read -ra needs <<<"${ARM_KERNEL_NEEDS[$ARM]}"
	for need in "${needs[@]}"; do
		missing=
		case $need in
		symbol:*)
			grep -q " ${need#symbol:}\$" "$map" ||
				missing="${need#symbol:} in System.map, which the kernel in $KBUILD does not have"
			;;
		CONFIG_*=*)
			grep -qx "$need" "$config" || missing="$need, which $config does not have"
			;;
		*) die "scenarios/arms.tsv: arm $ARM needs '$need': neither CONFIG_X=y nor symbol:NAME" ;;
		esac
		[ -z "$missing" ] ||
			die_usage "arm $ARM needs $missing; arm $ARM is ${ARM_DESCRIPTION[$ARM]}; arms that run on any kernel: $(arms_for_any_kernel)"
	done
}

# Host-side parameters (machine shape) of a scenario, with SET applied.
load_host_parameters() {
	local kv
	for kv in "${SET_ASSIGNMENTS[@]}"; do
		export "${kv?}"
	done
	MEM_MB=0
	# Lets a scenario build on its base fragments (scenarios/base/) and
	# on another scenario (dirty-neighbour-ext4); the guest sets it too.
	SCENARIO_DIR=$LAB_ROOT/scenarios
	# Lets a scenario pick defaults for the much slower debug kernel
	# (scenarios/README.md); the guest sees the same values through
	# params.env.
	KERNEL_FLAVOUR=$(wanted_kernel_flavour)
	if [ "$KERNEL_FLAVOUR" = debug ]; then
		: "${KERNEL_SLOWDOWN:=4}"
	else
		: "${KERNEL_SLOWDOWN:=1}"
	fi
	# shellcheck disable=SC1090
	. "$LAB_ROOT/scenarios/$NAME.scenario"
	: "${GUEST_CPUS:=2}"
}

# Refuses a run that would run out of disk, before the boot: its scratch
# disks (sparse, but the dirtier fills most of the stick and the
# neighbour its read file) in the cache, and room for the run folder
# (samples at 10 Hz, console, journal) in the results.
RUN_FOLDER_MB=200
check_free_space() {
	local disks_dir=$LAB_CACHE/disks need_cache need_results free_cache free_results
	local what="the scratch disks (STICK_SIZE_MB + FAST_SIZE_MB)"
	mkdir -p "$disks_dir" "$RESULTS"
	need_cache=$((STICK_SIZE_MB + FAST_SIZE_MB))
	# Keeping a recipe's laid-out disks copies both.
	if [ "${LAYOUT:-fresh}" = save ]; then
		need_cache=$((need_cache * 2))
		what+=" and their kept copy"
	fi
	need_results=$RUN_FOLDER_MB
	free_cache=$(df -Pm "$disks_dir" | awk 'NR == 2 {print $4}')
	free_results=$(df -Pm "$RESULTS" | awk 'NR == 2 {print $4}')
	if [ "$(stat -c %d "$disks_dir")" = "$(stat -c %d "$RESULTS")" ]; then
		need_cache=$((need_cache + need_results))
		need_results=0
		what+=" and the run folder"
	fi
	[ "$free_cache" -ge "$need_cache" ] ||
		die "not enough disk for the run: $disks_dir has $free_cache MiB free, $what need $need_cache MiB"
	[ "$free_results" -ge "$need_results" ] ||
		die "not enough disk for the run folder: $RESULTS has ${free_results} MiB free, a run needs about $RUN_FOLDER_MB MiB"
}

# Claims a fresh folder: results are never overwritten.  A shell's
# folder is in the cache, out of the results a report reads.
claim_run_folder() {
	local base n=1 parent=$RESULTS/$NAME
	[ "$MODE" != shell ] || parent=$LAB_CACHE/shell/$NAME
	# The kernel's label in the name: runs of two kernels never collide,
	# and the analysis reads the cell from it (analysis/memcg_lab/load.py).
	base=$parent/$(date -u +%Y%m%dT%H%M%SZ)-$KERNEL_LABEL-$ARM
	mkdir -p "$parent"
	RUN=$base
	until mkdir "$RUN" 2>/dev/null; do
		n=$((n + 1))
		RUN=$base.$n
	done
}

# KVM guests hang on some hosts: boot the kernel with no root under KVM
# and expect its "unable to mount root" panic within a few seconds.
# The answer is cached per host boot.
choose_accelerator() {
	if [ -n "${MEMCG_LAB_ACCEL:-}" ]; then
		ACCEL=$MEMCG_LAB_ACCEL
		[[ $ACCEL =~ ^(tcg|kvm)(,[a-z-]+=[a-z0-9-]+)*$ ]] ||
			die_usage "MEMCG_LAB_ACCEL=$ACCEL: tcg or kvm, optionally with QEMU -accel options (tcg,thread=single)"
		log "accelerator: $ACCEL (MEMCG_LAB_ACCEL)"
		return
	fi
	local cache
	cache=$LAB_CACHE/accel-$(cat /proc/sys/kernel/random/boot_id)
	if [ ! -f "$cache" ]; then
		local probe=$LAB_CACHE/kvm-probe.log
		ACCEL=tcg
		if [ -r /dev/kvm ] && timeout 20 qemu-system-x86_64 -accel kvm -m 256 \
			-nodefaults -display none -no-reboot -serial "file:$probe" \
			-kernel "$KBUILD/arch/x86/boot/bzImage" \
			-append "console=ttyS0 panic=-1" >/dev/null 2>&1 &&
			grep -q 'Kernel panic' "$probe"; then
			ACCEL=kvm
		fi
		echo "$ACCEL" >"$cache"
	fi
	ACCEL=$(cat "$cache")
	if [ "$ACCEL" = kvm ]; then
		log "accelerator: kvm (probe passed)"
	else
		log "accelerator: tcg (KVM missing or its probe guest did not finish in 20 s)"
	fi
}

# What else the host was doing, at the start and the end of a run: TCG
# guests share the host's cores, so a run beside another guest (or a
# build) is slower in wall time and CPU shares, not in page counts.
host_state() {
	echo "host_load_$1=$(cut -d' ' -f1-3 /proc/loadavg)"
	echo "host_qemu_guests_$1=$(pgrep -c -f '^qemu-system-x86_64( |$)' || true)"
}

# A scenario file and, after it, every file it sources through
# $SCENARIO_DIR (its base fragments, the scenario it varies), depth first,
# as paths under scenarios/.
scenario_source_files() {
	local rel
	echo "$1"
	while read -r rel; do
		scenario_source_files "$rel"
	done < <(sed -nE 's|^\. "\$SCENARIO_DIR/([^"]+)".*|\1|p' "$LAB_ROOT/scenarios/$1")
}

# scenario.txt: the scenario as the guest sourced it, its own file and
# the ones it sources (the values params-resolved.env resolves).
record_scenario_text() {
	local rel
	for rel in $(scenario_source_files "$NAME.scenario" | awk '!seen[$0]++'); do
		echo "# ==> scenarios/$rel <=="
		cat "$LAB_ROOT/scenarios/$rel"
	done >"$RUN/scenario.txt"
}

record_host_provenance() {
	cp "$KBUILD/.config" "$RUN/kernel.config"
	cat "$KBUILD/include/config/kernel.release" >"$RUN/kernel-release.txt"
	readelf -n "$KBUILD/vmlinux" | awk '/Build ID/ {print $3}' >"$RUN/kernel-build-id.txt"
	record_scenario_text
	{
		echo "git_revision=$(git -C "$LAB_ROOT" rev-parse HEAD 2>/dev/null || echo none)"
		echo "git_dirty=$([ -z "$(git -C "$LAB_ROOT" status --porcelain 2>/dev/null)" ] && echo no || echo yes)"
		echo "patch_series=$(patch_series_of_kernel)"
		echo "kernel_label=$KERNEL_LABEL"
		echo "rootfs_image=$(basename "$IMAGE")"
		echo "qemu=$(qemu-system-x86_64 --version | head -n 1)"
		echo "accel=$ACCEL"
		echo "host_tsc_khz=${TSC_KHZ:-none}"
		echo "kernel_flavour=$(basename "$KBUILD" | sed s/^kbuild-//)"
		echo "host=$(uname -r) $(nproc) cpus"
		host_state start
		echo "host_name=$(hostname)"
		echo "host_cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
		echo "linux_source=$(linux_source_of_kernel)"
		echo "scenario=$NAME"
		echo "arm=$ARM"
		echo "set=${SET:-}"
		[ -z "$KSELFTEST_DIR" ] || echo "kselftest=$(basename "$KSELFTEST_DIR")"
	} >"$RUN/provenance.txt"
	git -C "$LAB_ROOT" diff HEAD >"$RUN/git-diff.patch" 2>/dev/null || true
	write_guest_parameters
}

# params.env in the run folder, which the guest reads over the results
# 9p share and sources (resolve_parameters, scenarios/lib/params.sh)
# before the scenario's defaults.  Each SET value is written
# shell-quoted (%q), so that a value with spaces (SYSCTLS="vm.a=1
# vm.b=2") is one assignment there too.
write_guest_parameters() {
	printf 'KERNEL_LABEL=%s\nKERNEL_FLAVOUR=%s\nKERNEL_SLOWDOWN=%s\nGUEST_CPUS=%s\n' \
		"$KERNEL_LABEL" "$KERNEL_FLAVOUR" "$KERNEL_SLOWDOWN" "$GUEST_CPUS" >"$RUN/params.env"
	local kv
	for kv in "${SET_ASSIGNMENTS[@]}"; do
		printf '%s=%q\n' "${kv%%=*}" "${kv#*=}" >>"$RUN/params.env"
	done
}

make_scratch_disks() {
	DISKS=$LAB_CACHE/disks/$(basename "$RUN").$$
	mkdir -p "$DISKS"
	if [ "$LAYOUT" = cached ]; then
		# A copy, never the kept image: the run writes to its disks.
		# Allocated as the laid-out original was (copy-image.py).
		local img
		for img in stick.img fast.img; do
			"$LAB_ROOT/lab/copy-image.py" "$LAYOUTS/$LAYOUT_KEY/$img" "$DISKS/$img"
		done
		touch "$LAYOUTS/$LAYOUT_KEY"
	else
		truncate -s "${STICK_SIZE_MB}M" "$DISKS/stick.img"
		truncate -s "${FAST_SIZE_MB}M" "$DISKS/fast.img"
	fi
	# The guest reads a private copy: bash reads scripts as it runs them,
	# so an edit to scenarios/ during a run must not reach a running guest.
	cp -a "$LAB_ROOT/scenarios" "$DISKS/lab"
	[ -z "$KSELFTEST_DIR" ] || cp -a "$KSELFTEST_DIR" "$DISKS/lab/kselftest"
}

# Laid-out disks, kept per layout recipe: a dirty-neighbour run spends
# about a minute writing its files on the stick and fast disk before it
# measures anything, the same files every run of a recipe.  The first run
# of a recipe lays them out and, with both filesystems unmounted, asks
# the host to copy the two images ("disks: save layout"); later runs boot
# on a copy and the guest only mounts them (prepare_disks in
# scenarios/lib/disks.sh, memcg_lab.layout= on the kernel command line:
# cached, save or fresh).  The recipe is everything the layout can
# depend on but the arm: the scenario and its files, SET, the machine,
# the kernel build (the guest's MemTotal sizes files) and the rootfs (its
# mkfs).  A guest that finds a cached layout without its files lays them
# out anew.
# Off unless MEMCG_LAB_LAYOUT_CACHE=on: a run on kept disks starts with
# a stick that has no write history (the bdi's bandwidth estimate and
# share of the dirty limit), and its writeback then completes in other
# bursts than after a layout (RESULTS.md, "Laid-out disks").
LAYOUTS=$LAB_CACHE/layouts
LAYOUTS_KEPT=4

layout_key() {
	{
		printf '%s\n' "$NAME" "${SET_ASSIGNMENTS[@]}"
		echo "mem=$GUEST_MEM_MB cpus=$GUEST_CPUS stick=$STICK_SIZE_MB fast=$FAST_SIZE_MB"
		echo "flavour=$KERNEL_FLAVOUR slowdown=$KERNEL_SLOWDOWN"
		readelf -n "$KBUILD/vmlinux" | awk '/Build ID/ {print $3}'
		basename "$IMAGE"
		content_hash "$LAB_ROOT/scenarios"
	} | sha256sum | cut -c1-16
}

choose_layout() {
	LAYOUT_KEY=$(layout_key)
	if [ "${MEMCG_LAB_LAYOUT_CACHE:-off}" != on ]; then
		LAYOUT=fresh
	elif [ -f "$LAYOUTS/$LAYOUT_KEY/stick.img" ] && [ -f "$LAYOUTS/$LAYOUT_KEY/fast.img" ]; then
		LAYOUT=cached
	else
		LAYOUT=save
	fi
}

# The guest asked for its laid-out disks to be kept; it waits for
# layout.state.  Only the most recently used LAYOUTS_KEPT recipes stay:
# each holds what its files took on the disks.
answer_layout_request() {
	[ "$LAYOUT" = save ] && [ ! -f "$RUN/layout.state" ] &&
		grep -aq 'disks: save layout' "$RUN/console.log" || return 0
	local dir=$LAYOUTS/$LAYOUT_KEY tmp state=saved
	tmp=$dir.tmp.$$
	mkdir -p "$tmp"
	if "$LAB_ROOT/lab/copy-image.py" "$DISKS/stick.img" "$tmp/stick.img" &&
		"$LAB_ROOT/lab/copy-image.py" "$DISKS/fast.img" "$tmp/fast.img" &&
		{ [ -d "$dir" ] || mv -T "$tmp" "$dir"; }; then
		log "laid-out disks kept for the runs of this recipe: $dir ($(du -sh "$dir" | cut -f1))"
	else
		log "could not keep the laid-out disks in $dir"
		state=failed
	fi
	rm -rf "$tmp"
	echo "$state" >"$RUN/layout.state"
	find "$LAYOUTS" -mindepth 1 -maxdepth 1 -type d ! -name '*.tmp.*' -printf '%T@ %p\n' |
		sort -rn | tail -n +$((LAYOUTS_KEPT + 1)) | cut -d' ' -f2- | xargs -r rm -rf
}

# The trace events any run uses, enabled on the kernel command line
# (trace_event=) so that their tracepoints are patched in at boot, before
# any workload, and never again: enabling or disabling a tracepoint under
# load (text_poke_bp on every call site) once panicked a TCG guest with a
# stray int3 in shrink_lruvec (lab/README.md, "Tracing").  Tools then add
# and remove hist triggers only, which patch nothing.  The shrink event
# is the series' when the kernel has it.
TRACE_EVENTS_PATCHED="mm_vmscan_lru_shrink_inactive_memcg"
TRACE_EVENTS_VANILLA="mm_vmscan_lru_shrink_inactive"
TRACE_EVENTS_COMMON="mm_vmscan_direct_reclaim_begin mm_vmscan_direct_reclaim_end
mm_vmscan_memcg_reclaim_begin mm_vmscan_memcg_reclaim_end mm_vmscan_throttled"
boot_trace_events() {
	local map=$1 ev list=() shrink have
	# The kernel's tracepoints, read from System.map once.
	have=" $(sed -n 's/^[0-9a-f]* [A-Za-z] __tracepoint_//p' "$map" | tr '\n' ' ') "
	shrink=$TRACE_EVENTS_VANILLA
	[[ $have == *" $TRACE_EVENTS_PATCHED "* ]] && shrink=$TRACE_EVENTS_PATCHED
	for ev in $shrink $TRACE_EVENTS_COMMON; do
		[[ $have == *" $ev "* ]] && list+=("vmscan:$ev")
	done
	# SET="LOCK_CONTENTION=1": spinlock contention and the stacks that
	# met it, per phase (lock-contention.csv; scenarios/lib/instruments.sh).
	# Off by default: every contended spinlock then records its stack.
	[ "${LOCK_CONTENTION:-0}" != 1 ] || [[ $have != *" contention_begin "* ]] ||
		list+=("lock:contention_begin")
	local IFS=,
	echo "${list[*]}"
}

# The host's TSC frequency in kHz, or nothing.  Under TCG the guest's TSC
# is the host's (QEMU reads the host TSC), but the guest kernel has no
# ACPI, hence no HPET or PM timer to calibrate it against, and its PIT
# calibration fails on a loaded host: it then drops the TSC, and both
# its clocksource and sched_clock fall to jiffies (1 ms), the resolution
# of every latency, PSI total and CPU time the lab records.  Only a host
# whose TSC is constant and of known frequency is trusted.
host_tsc_khz() {
	grep -qw tsc_known_freq /proc/cpuinfo && grep -qw constant_tsc /proc/cpuinfo || return 0
	awk -F: '/^cpu MHz/ {printf "%d\n", $2 * 1000; exit}' /proc/cpuinfo
}

# QEMU_ARGS and QMP of this run's guest.  $1: what the guest's agent
# does, as kernel parameters (memcg_lab.scenario=... or memcg_lab.shell);
# $2: where its serial console goes, "file" (console.log) or "terminal"
# (this terminal, also logged to console.log; Ctrl-A x quits QEMU).
set_qemu_arguments() {
	local role=$1 console=$2
	# quiet alone would keep KERN_WARNING off the console, and with it
	# every WARN() and lockdep report: loglevel=5 lets them through.
	local cmdline="root=/dev/vda rootfstype=ext4 rw console=ttyS0 panic=-1 quiet loglevel=5"
	# What dump_silent_guest's NMI makes the kernel print; nokaslr keeps
	# the kernel where System.map says, for its vCPU samples.
	cmdline+=" unknown_nmi_panic panic_print=0x4b nokaslr"
	cmdline+=" systemd.show_status=error $role memcg_lab.arm=$ARM memcg_lab.layout=${LAYOUT:-fresh}"
	# TCG: the TSC's frequency from the host, and no warp check between
	# vCPUs (they read one host TSC; the check, run under TCG's
	# scheduling, called it unsynchronised and fell back to jiffies).
	if [ "${ACCEL%%,*}" = tcg ] && [ -n "$TSC_KHZ" ]; then
		cmdline+=" tsc_early_khz=$TSC_KHZ tsc=reliable"
	fi
	# TCG: no IO-APIC timer check.  It busy-waits a few ticks for the
	# timer interrupt; with the host's cores busy the emulated timer
	# did not fire in time and a guest panicked at 0.69 s ("IO-APIC +
	# timer doesn't work!").  Cloud images boot with it for the same
	# reason.
	[ "${ACCEL%%,*}" != tcg ] || cmdline+=" no_timer_check"
	local events
	events=$(boot_trace_events "$KBUILD/System.map")
	[ -z "$events" ] || cmdline+=" trace_event=$events"
	cmdline+=" ${KERNEL_CMDLINE_EXTRA:-}"
	QMP=$DISKS/qmp.sock
	# Fixed PCI slots: the root is always the first virtio disk probed,
	# and the guest finds the others by serial, never by vdX.  One socket
	# per CPU: the lab kernel has no ACPI, and the MP table SeaBIOS builds
	# lists one CPU per socket, so "-smp 2" alone boots a uniprocessor.
	# The stick's request-merging=off: QEMU's virtio-blk merges up to 32
	# sequential guest requests into one before its throttle sees them,
	# and the throttle then completes all 32 at once, seconds apart
	# (16 MiB every 4 s at 4 MiB/s with 512 KiB requests; lab/README.md).
	QEMU_ARGS=(
		-accel "$ACCEL" -m "$GUEST_MEM_MB"
		-smp "$GUEST_CPUS,sockets=$GUEST_CPUS,cores=1,threads=1"
		-nodefaults -no-user-config
		-display none -no-reboot
		-qmp "unix:$QMP,server=on,wait=off"
		-kernel "$KBUILD/arch/x86/boot/bzImage" -append "$cmdline"
		-drive "file=$IMAGE,if=none,id=root,format=raw,snapshot=on"
		-device virtio-blk-pci,drive=root,serial=lab-root,addr=0x4
		-drive "file=$DISKS/stick.img,if=none,id=stick,format=raw,cache=none,aio=threads"
		-device "virtio-blk-pci,drive=stick,serial=lab-stick,queue-size=$STICK_QUEUE_SIZE,request-merging=off,addr=0x5"
		-drive "file=$DISKS/fast.img,if=none,id=fast,format=raw,cache=unsafe"
		-device virtio-blk-pci,drive=fast,serial=lab-fast,addr=0x6
		-fsdev "local,id=lab,path=$DISKS/lab,security_model=none,readonly=on"
		-device virtio-9p-pci,fsdev=lab,mount_tag=lab,addr=0x7
		-fsdev "local,id=results,path=$RUN,security_model=none"
		-device virtio-9p-pci,fsdev=results,mount_tag=results,addr=0x8
		-device virtio-rng-pci,addr=0x9
	)
	if [ "$console" = terminal ]; then
		# signal=off: Ctrl-C reaches the guest's shell, not QEMU.
		QEMU_ARGS+=(-chardev "stdio,id=con,mux=on,signal=off,logfile=$RUN/console.log"
			-serial chardev:con -mon chardev=con,mode=readline)
	else
		QEMU_ARGS+=(-chardev "file,id=con,path=$RUN/console.log" -serial chardev:con)
	fi
	printf '%q ' qemu-system-x86_64 "${QEMU_ARGS[@]}" >"$RUN/qemu-cmdline.txt"
}

boot_guest() {
	set_qemu_arguments "memcg_lab.scenario=$NAME" file
	qemu-system-x86_64 "${QEMU_ARGS[@]}" >"$RUN/qemu.log" 2>&1 &
	QEMU_PID=$!
}

# make shell: the guest of a run of NAME (its kernel, image, disks and
# shares), its serial console on this terminal, a root shell in place of
# the scenario.  The stick is blank and unthrottled (a scenario's runner
# formats it and asks for the throttle); nothing is measured.
boot_shell() {
	set_qemu_arguments memcg_lab.shell=1 terminal
	log "the guest's console is this terminal: 'exit' in its shell shuts it down, Ctrl-A x quits QEMU at once"
	log "the stick is blank and unthrottled; to throttle it from the host: lab/qmp.py throttle $QMP stick BYTES_PER_S"
	QEMU_RC=0
	qemu-system-x86_64 "${QEMU_ARGS[@]}" 2>"$RUN/qemu.log" || QEMU_RC=$?
	[ "$QEMU_RC" -eq 0 ] || die "QEMU exited with status $QEMU_RC: $(tail -n 1 "$RUN/qemu.log")"
	log "the shell's guest shut down; its console: $RUN/console.log"
}

# The guest asks for the stick's throttle with a console line
# "stick: throttle on|off|stuck" (stuck: STICK_STUCK_BPS, a device that
# has all but stopped) and waits until stick-throttle.state in the
# results share answers "on|off N" for its Nth request.  Every change is
# logged with the host's clock in stick-throttle.log.
answer_throttle_requests() {
	local requests n state bps
	requests=$(grep -aoE 'stick: throttle (on|off|stuck)' "$RUN/console.log" || true)
	n=$(printf '%s' "$requests" | grep -c . || true)
	while [ "$THROTTLE_ANSWERED" -lt "$n" ]; do
		THROTTLE_ANSWERED=$((THROTTLE_ANSWERED + 1))
		state=$(printf '%s\n' "$requests" | sed -n "${THROTTLE_ANSWERED}p" | awk '{print $3}')
		case $state in
		on) bps=$STICK_WRITE_BPS ;;
		stuck) bps=${STICK_STUCK_BPS:-512} ;;
		*) bps=0 ;;
		esac
		if "$LAB_ROOT/lab/qmp.py" throttle "$QMP" stick "$bps"; then
			echo "$(date -u +%FT%T.%N) request $THROTTLE_ANSWERED: $state bps_wr=$bps" >>"$RUN/stick-throttle.log"
			echo "$state $THROTTLE_ANSWERED" >"$RUN/stick-throttle.state"
		else
			log "could not set the stick throttle to $bps B/s (request $THROTTLE_ANSWERED)"
			echo "failed $THROTTLE_ANSWERED" >"$RUN/stick-throttle.state"
		fi
	done
}

# Before the host kills a guest that hangs or overran its time, it samples
# where its vCPUs are (hang-pcs.txt: idle, user space or which kernel
# function, from QEMU's registers and System.map) and then injects
# an NMI: with unknown_nmi_panic the guest kernel panics and, through
# panic_print, prints every task with its stack (0x1), the memory state
# (0x2), lockdep's held locks on the debug kernel (0x8) and the CPUs'
# backtraces (0x40; a CPU still in QEMU's NMI misses it) on the console.
# hang-dump.txt is the console from the NMI on, and the splat check
# (classify_run) reads only the console before it.  A guest whose kernel
# no longer takes NMIs adds nothing.
dump_silent_guest() {
	local from
	from=$(stat -c %s "$RUN/console.log" 2>/dev/null || echo 0)
	DUMP_FROM=$from
	log "$FAILURE: sampling the vCPUs, then an NMI for the guest kernel's task and memory dump"
	"$LAB_ROOT/lab/qmp.py" pcs "$QMP" "$KBUILD/System.map" 20 250 >"$RUN/hang-pcs.txt" ||
		log "sampling the vCPUs through QMP failed"
	if ! "$LAB_ROOT/lab/qmp.py" nmi "$QMP"; then
		log "NMI through QMP failed: no hang dump"
		return 0
	fi
	# The panic ends in a reboot, which -no-reboot turns into QEMU's exit.
	local i
	for i in $(seq 120); do
		kill -0 "$QEMU_PID" 2>/dev/null || break
		sleep 0.5
	done
	[ "$i" -lt 120 ] || log "the guest did not panic within 60 s of the NMI"
	tail -c +$((from + 1)) "$RUN/console.log" >"$RUN/hang-dump.txt"
	log "hang dump: $(wc -l <"$RUN/hang-dump.txt") console lines in $RUN/hang-dump.txt"
}

# Watches the console until QEMU exits: shows the scenario's progress
# lines, answers throttle requests, and kills the guest on the hard
# timeout or when the console stays silent.
watch_guest() {
	local start now last_size=0 size last_change shown=0
	start=$(date +%s)
	last_change=$start
	BOOT_TO_SCENARIO_S=
	FAILURE=
	DUMP_FROM=
	THROTTLE_ANSWERED=0
	while kill -0 "$QEMU_PID" 2>/dev/null; do
		sleep 0.5
		now=$(date +%s)
		size=$(stat -c %s "$RUN/console.log" 2>/dev/null || echo 0)
		if [ "$size" != "$last_size" ]; then
			last_size=$size
			last_change=$now
			[ -z "$BOOT_TO_SCENARIO_S" ] &&
				grep -q 'memcg-lab-agent: scenario=' "$RUN/console.log" &&
				BOOT_TO_SCENARIO_S=$((now - start))
			grep -a 'memcg-lab' "$RUN/console.log" | tail -n +$((shown + 1)) |
				sed 's/^/  guest| /' >&2 || true
			shown=$(grep -ac 'memcg-lab' "$RUN/console.log" || true)
			answer_throttle_requests
			answer_layout_request
		fi
		reset_first_boot_for_test "$((now - start))"
		if [ $((now - start)) -ge "$TIMEOUT_S" ]; then
			FAILURE="hard timeout after $TIMEOUT_S s"
		elif [ $((now - last_change)) -ge "$HANG_S" ]; then
			FAILURE="guest hang: no console output for $HANG_S s"
		fi
		if [ -n "$FAILURE" ]; then
			dump_silent_guest
			kill "$QEMU_PID" 2>/dev/null || true
			break
		fi
	done
	QEMU_RC=0
	wait "$QEMU_PID" 2>/dev/null || QEMU_RC=$?
	ELAPSED_S=$(($(date +%s) - start))
}

# MEMCG_LAB_TEST_RESET_S: the boot test's stand-in for a guest that
# resets during boot, once, after the kernel's first console line and
# before the agent speaks.  Not at N s alone: on a loaded host the
# firmware once took those 2 s, and the reset left no kernel line for
# the test to find.
RESET_FOR_TEST_DONE=
reset_first_boot_for_test() {
	[ -n "${MEMCG_LAB_TEST_RESET_S:-}" ] && [ -z "$RESET_FOR_TEST_DONE" ] &&
		[ "$1" -ge "$MEMCG_LAB_TEST_RESET_S" ] &&
		grep -aqE '^.?\[ *[0-9]+\.[0-9]+\] ' "$RUN/console.log" || return 0
	RESET_FOR_TEST_DONE=1
	if grep -aq 'memcg-lab-agent' "$RUN/console.log"; then
		log "MEMCG_LAB_TEST_RESET_S=$MEMCG_LAB_TEST_RESET_S: the agent already started, no reset"
		return 0
	fi
	log "MEMCG_LAB_TEST_RESET_S=$MEMCG_LAB_TEST_RESET_S: resetting the guest ($1 s in)"
	"$LAB_ROOT/lab/qmp.py" reset "$QMP" || log "the test reset failed"
}

# QEMU exited on its own (-no-reboot turns a reset into an exit) before
# the agent said anything and without a kernel message that explains it.
guest_reset_during_boot() {
	[ -z "$FAILURE" ] && [ -z "$BOOT_TO_SCENARIO_S" ] &&
		! grep -aq 'memcg-lab-agent' "$RUN/console.log" &&
		! grep -aqE "$KERNEL_TROUBLE|$CLEAN_SHUTDOWN" "$RUN/console.log"
}

# The byte an int3 oops trapped on, when memory does not hold an int3
# (cc) there: die() reports the ip past the int3, so the trapping byte is
# the one before the <..> of the "Code:" dump.  A vCPU that runs an int3
# memory no longer holds is QEMU TCG running a translation made before
# text_poke_bp() finished (lab/README.md, "Tracing"), not the guest
# kernel's own failure.
stale_int3_byte() {
	awk '/int3: 0000 \[#[0-9]+\]/ { oops = 1 }
	     oops && /Code: / {
		sub(/.*Code: /, ""); n = split($0, b, " ")
		for (i = 2; i <= n; i++) if (b[i] ~ /^</) { print b[i - 1]; break }
		exit
	     }' "$1" | grep -vx cc || true
}

classify_run() {
	local trouble guest_rc stale
	# The journal the guest saved has the kernel's messages at every level.
	trouble=$({
		head -c "${DUMP_FROM:-$(stat -c %s "$RUN/console.log")}" "$RUN/console.log" |
			grep -aE "$KERNEL_TROUBLE"
		[ -f "$RUN/journal.txt" ] &&
			grep -a ' kernel: ' "$RUN/journal.txt" | grep -aE "$KERNEL_TROUBLE"
	} | head -n 3 || true)
	# The first line by expansion, not "echo | head -n 1": under
	# pipefail, head's early exit can SIGPIPE echo (141), and set -e
	# then ended classify_run (a unit test saw it once).
	local first=${trouble%%$'\n'*}
	guest_rc=$(cat "$RUN/guest-exit-status" 2>/dev/null || echo missing)
	# failure_kind: kernel (the guest kernel's own failure: a splat, a
	# hang or an overrun; a finding, never retried by the matrix), emulator
	# (an oops QEMU caused: stale_int3_byte), qemu
	# (QEMU died or was killed from outside), scenario (the guest's
	# scenario failed), or empty for an ok run.
	local kind=
	[ -z "$FAILURE" ] || kind=kernel
	if [ -z "$FAILURE" ] && [ -n "$trouble" ]; then
		FAILURE="kernel trouble on the console: $first"
		kind=kernel
		stale=$(stale_int3_byte "$RUN/console.log")
		if [ -n "$stale" ]; then
			FAILURE="emulator fault: the vCPU ran an int3 where memory holds $stale (QEMU TCG ran text the kernel had patched): $first"
			kind=emulator
		fi
	fi
	# QEMU exits 0 when the guest shuts down or resets (-no-reboot); a
	# status above 128 that the watcher did not cause is a signal from
	# outside (the OOM killer, a user, a session ending).
	if [ -z "$FAILURE" ] && [ "$QEMU_RC" -gt 128 ]; then
		FAILURE="QEMU was killed from outside the lab (signal $((QEMU_RC - 128)), $(kill -l $((QEMU_RC - 128)) 2>/dev/null || echo '?')) ${ELAPSED_S} s into the run"
		kind=qemu
	elif [ -z "$FAILURE" ] && [ "$QEMU_RC" -ne 0 ]; then
		FAILURE="QEMU exited with status $QEMU_RC: $(tail -n 1 "$RUN/qemu.log" 2>/dev/null)"
		kind=qemu
	fi
	if [ -z "$FAILURE" ] && [ "$guest_rc" != 0 ]; then
		FAILURE="scenario exit status $guest_rc in the guest"
		kind=scenario
	fi
	# The lab kernel has no ACPI: a clean shutdown is a reboot that
	# QEMU's -no-reboot turns into an exit.
	if [ -z "$FAILURE" ] && ! grep -qE "$CLEAN_SHUTDOWN" "$RUN/console.log"; then
		FAILURE="guest did not shut down cleanly"
		kind=kernel
	fi
	{
		echo "result=$([ -z "$FAILURE" ] && echo ok || echo failed)"
		echo "reason=${FAILURE:-}"
		echo "failure_kind=$kind"
		echo "accel=$ACCEL"
		echo "kernel_flavour=$(basename "$KBUILD" | sed s/^kbuild-//)"
		echo "boot_to_scenario_s=${BOOT_TO_SCENARIO_S:-}"
		echo "elapsed_s=$ELAPSED_S"
		echo "kernel_trouble=$first"
	} >"$RUN/status.txt"
}

# One function, called with the exit on the last line: bash reads a
# script as it runs it, and a long run must not execute an edit made to
# this file meanwhile (a run once booted its guest a second time).
main() {
	MODE=run
	case ${1:-} in
	--check) MODE=check; shift ;;
	--host-parameters) MODE=host-parameters; shift ;;
	--shell) MODE=shell; shift ;;
	--arms)
		print_arms
		echo "  without ARM: $DEFAULT_ARM"
		return 0
		;;
	esac
	NAME=${1:-}
	ARM=${2:-$DEFAULT_ARM}
	check_arguments
	[ $MODE = check ] && return 0
	if [ $MODE = host-parameters ]; then
		load_host_parameters
		printf 'KERNEL_FLAVOUR=%s\nTIMEOUT_S=%s\n' "$KERNEL_FLAVOUR" "$TIMEOUT_S"
		return 0
	fi
	"$LAB_ROOT/lab/install-deps.sh"
	load_host_parameters
	choose_kernel_build
	check_arm_runs_on_kernel
	IMAGE=$("$LAB_ROOT/guest-rootfs/build-rootfs.sh" | tail -n 1)
	# The kernel's own selftests, for a scenario that runs them.
	KSELFTEST_DIR=
	case ${KSELFTESTS:-} in
	"") ;;
	cgroup | lru-immediate)
		KSELFTEST_DIR=$("$LAB_ROOT/lab/build-kselftests.sh" "$KSELFTESTS" | tail -n 1) ;;
	*) die "KSELFTESTS=$KSELFTESTS: the lab builds the cgroup selftests (cgroup) or the series' test_lru_immediate (lru-immediate)" ;;
	esac
	choose_accelerator
	# A kernel with jump labels rewrites its text whenever a static key
	# flips; under TCG a vCPU can then run a stale int3 (lab/README.md,
	# "Tracing"): the lab's own builds have none; say so for others.
	if [ "${ACCEL%%,*}" = tcg ] && grep -qx CONFIG_JUMP_LABEL=y "$KBUILD/.config"; then
		log "warning: kernel $KERNEL_LABEL has CONFIG_JUMP_LABEL=y: under TCG its guest may die on an int3 the emulator ran after the kernel patched it (failure_kind=emulator)"
	fi
	TSC_KHZ=$(host_tsc_khz)
	[ -n "$TSC_KHZ" ] || log "the host's TSC frequency is unknown: under TCG the guest's clocks may fall back to jiffies (1 ms)"
	LAYOUT=fresh LAYOUT_KEY=
	[ "$MODE" = shell ] || choose_layout
	check_free_space
	claim_run_folder
	log "run folder: $RUN"
	record_host_provenance
	echo "layout=$LAYOUT $LAYOUT_KEY" >>"$RUN/provenance.txt"
	[ "$LAYOUT" != cached ] || log "disks: the cached layout $LAYOUT_KEY"
	make_scratch_disks
	trap 'rm -rf "$DISKS"' EXIT
	if [ $MODE = shell ]; then
		log "booting a shell in the guest of $NAME (${GUEST_MEM_MB}M ${GUEST_CPUS}-CPU guest; no arm is applied)"
		boot_shell
		return 0
	fi
	log "booting $NAME ($ARM, ${GUEST_MEM_MB}M ${GUEST_CPUS}-CPU guest, stick ${STICK_WRITE_BPS} B/s write, timeout ${TIMEOUT_S}s)"
	boot_guest
	watch_guest
	if guest_reset_during_boot; then
		# Seen once in ~35 boots of a 2-CPU TCG guest: QEMU exits 3 s in,
		# right after the kernel's MTRR lines.  The scratch disks are
		# untouched before the agent starts, so a second boot is the
		# same experiment; its first console is kept.
		log "the guest reset ${ELAPSED_S} s into its boot, before the agent, with no panic: booting once more"
		mv "$RUN/console.log" "$RUN/console-reset-boot.log"
		mv "$RUN/qemu.log" "$RUN/qemu-reset-boot.log"
		echo "boot_retries=1" >>"$RUN/provenance.txt"
		boot_guest
		watch_guest
	fi
	host_state end >>"$RUN/provenance.txt"
	classify_run
	/usr/bin/python3 "$LAB_ROOT/analysis/run_summary.py" "$RUN" >&2 || true
	if [ -n "$FAILURE" ]; then
		log "FAILED: $FAILURE"
		log "console: $RUN/console.log"
		exit 1
	fi
	record_run_duration
	log "ok: $NAME/$ARM in ${ELAPSED_S}s (boot to scenario ${BOOT_TO_SCENARIO_S:-?}s); results: $RUN"
}

# An ok run's guest time, for the matrix's estimates (lib.sh,
# RUN_DURATIONS); a record that cannot be written costs only estimates.
record_run_duration() {
	mkdir -p "$(dirname "$RUN_DURATIONS")"
	[ -s "$RUN_DURATIONS" ] || echo "scenario,flavour,elapsed_s,run" >"$RUN_DURATIONS" || return 0
	echo "$NAME,$KERNEL_FLAVOUR,$ELAPSED_S,$RUN" >>"$RUN_DURATIONS" ||
		log "could not record this run's duration in $RUN_DURATIONS"
}

# On one line: bash has parsed the exit before main runs.
main "$@"; exit
