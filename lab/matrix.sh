#!/usr/bin/env bash
# Runs every (scenario, arm, repetition) once, each on a fresh boot, in a
# shuffled but reproducible order; resumable: a job with an "ok" line in
# the ledger is never run again, a failed one is retried in a new folder.
# A run the guest kernel failed (panic, oops, WARN, lockup, hang: the
# run's status.txt) is a finding, not a flake: its job is marked
# "kernel-trouble", counted, and never retried.
#
#   matrix.sh run SCENARIOS ARMS RUNS      run the matrix here: first the
#                                          jobs to run and their expected
#                                          time, then each with an ETA
#   matrix.sh jobs SCENARIOS ARMS RUNS     print the job list only: one
#                                          shell command per line, the
#                                          input of GNU parallel
#   matrix.sh one SCENARIO ARM REP         one job (what a job line runs)
#   matrix.sh defaults                     the verdict matrix's lists
#
#   An empty SCENARIOS, ARMS or RUNS is the verdict matrix's (below).
#
#   env MEMCG_LAB_RESULTS=dir  results root (default ./results); the
#                              ledger is dir/matrix-ledger.csv (on the
#                              debug kernel dir/matrix-ledger-debug.csv)
#   env MATRIX_SEED=n          shuffle seed (default 1)
#   env SET="VAR=value ..."    passed to every run (quoting: run-scenario.sh)
#   env MEMCG_LAB_DEBUG=1      every run on the debug kernel
#   env MEMCG_LAB_KERNEL=label every run on that kernel (lab/lib.sh), with
#                              its own ledger dir/matrix-ledger-<label>.csv
set -euo pipefail
. "$(dirname "$0")/lib.sh"
# The arms table: VERDICT_ARMS is checked against it, and an arm's runs
# and ledger lines from before a rename are found by its old names.
. "$LAB_ROOT/scenarios/lib/arms.sh"

# The verdict matrix (issue 20), the default of `make matrix`; the
# Makefile's help prints these lists (matrix.sh defaults), never a copy.
# The writeback scenarios, the no-regression control, the two floors of
# the headline (pinned-floor: writeback replaced by pinned memory;
# paced: the writer held to the stick's rate), proactive reclaim, the
# legacy hierarchy and ext4; the series' three policies (activate is
# 6.1's own behaviour, the baseline), 6.1's alternative, MGLRU, and
# the series' memcg dirty limit alone (dirtylimit: what patch 16 does
# without parking).
VERDICT_SCENARIOS="dirty-neighbour dirty-many dirty-global dirty-self clean-control pinned-floor paced proactive cgroup-v1 dirty-neighbour-ext4"
VERDICT_ARMS="activate keep immediate mglru dirtylimit"
VERDICT_RUNS=5

# A choice of arms, not their definition: each must be in the table.
check_verdict_arms() {
	local a problem
	for a in $VERDICT_ARMS; do
		problem=$(arm_name_problem "$a") || die "VERDICT_ARMS in lab/matrix.sh: $problem"
	done
}
check_verdict_arms

RESULTS=$(realpath -m "${MEMCG_LAB_RESULTS:-$LAB_ROOT/results}")
# Each kernel has its own ledger: a job done on the lab kernel is not
# done for a debug or pristine-6.1 matrix, nor the reverse.  The flavour
# (lab or debug) picks earlier runs for the time estimate.
FLAVOUR=$(wanted_kernel_flavour)
KERNEL_LABEL=$(wanted_kernel_label)
if [ "$KERNEL_LABEL" = "$DEFAULT_KERNEL_LABEL" ]; then
	LEDGER=$RESULTS/matrix-ledger.csv
else
	LEDGER=$RESULTS/matrix-ledger-$KERNEL_LABEL.csv
fi
SEED=${MATRIX_SEED:-1}
[[ $SEED =~ ^[0-9]+$ ]] || die_usage "MATRIX_SEED must be a number, got '$SEED'"

usage() { die_usage "usage: matrix.sh run|jobs SCENARIOS ARMS RUNS | one SCENARIO ARM REP | defaults"; }

# Valid names are checked here, before hours of runs, by the front door's
# own argument check (it exits 2 and lists the valid names).
check_names() {
	local s a
	for s in $1; do
		for a in $2; do
			"$LAB_ROOT/lab/run-scenario.sh" --check "$s" "$a"
		done
	done
	[[ $3 =~ ^[1-9][0-9]*$ ]] || die_usage "RUNS must be a positive integer, got '$3'"
}

# "scenario arm rep" lines, shuffled by a seeded generator so a resumed
# or distributed matrix sees the same order.
job_list() {
	local s a r
	for s in $1; do
		for a in $2; do
			for r in $(seq "$3"); do
				echo "$s $a $r"
			done
		done
	done | awk -v seed="$SEED" 'BEGIN { srand(seed) } { printf "%.12f\t%s\n", rand(), $0 }' |
		sort -n | cut -f2-
}

# A ledger written before an arm was renamed names it by its old name.
job_done() {
	local names
	names=$(arm_and_old_names "$2" | paste -sd'|')
	[ -f "$LEDGER" ] && grep -qE "^$1,($names),$3,(ok|kernel-trouble)," "$LEDGER"
}

# ok, kernel-trouble (the guest kernel failed the run: failure_kind=kernel
# in status.txt, see classify_run in run-scenario.sh) or failed (anything
# else: QEMU, an emulator fault, the host, the scenario), and the reason, from the run
# folder's status.txt.
job_result() {
	local rc=$1 folder=$2 status reason kind
	status=$folder/status.txt
	reason=$(sed -n 's/^reason=//p' "$status" 2>/dev/null || true)
	kind=$(sed -n 's/^failure_kind=//p' "$status" 2>/dev/null || true)
	if [ "$rc" -eq 0 ]; then
		echo ok
	elif [ "$kind" = kernel ]; then
		echo kernel-trouble
	else
		echo failed
	fi
	[ -f "$status" ] || reason="no status.txt"
	echo "${reason//,/;}" | head -n 1
}

# Appends under a lock: jobs from GNU parallel may finish together.
record_job() {
	mkdir -p "$RESULTS"
	(
		flock 9
		[ -s "$LEDGER" ] || echo "scenario,arm,rep,result,run_folder,finished_utc,reason" >"$LEDGER"
		echo "$1,$2,$3,$4,$5,$(date -u +%FT%TZ),$6" >>"$LEDGER"
	) 9>"$RESULTS/.matrix.lock"
}

run_one_job() {
	local s=$1 a=$2 r=$3 out rc=0 folder
	if job_done "$s" "$a" "$r"; then
		log "skip $s/$a #$r: done before (see $LEDGER)"
		return 0
	fi
	out=$(mktemp)
	MEMCG_LAB_RESULTS=$RESULTS "$LAB_ROOT/lab/run-scenario.sh" "$s" "$a" 2>&1 |
		tee "$out" >&2 || rc=$?  # pipefail: the run's status
	folder=$(grep -o 'run folder: .*' "$out" | head -n 1 | cut -d' ' -f3- || true)
	rm -f "$out"
	local verdict
	mapfile -t verdict < <(job_result "$rc" "${folder:-/nonexistent}")
	record_job "$s" "$a" "$r" "${verdict[0]}" "${folder:-none}" "${verdict[1]}"
	[ "${verdict[0]}" != kernel-trouble ] ||
		log "$s/$a #$r: the guest kernel failed the run (${verdict[1]}): a finding, counted, not retried"
	return "$rc"
}

# Jobs the guest kernel failed, per scenario and arm, over the whole ledger.
ledger_trouble_counts() {
	local line
	[ -f "$LEDGER" ] || return 0
	awk -F, 'NR > 1 && $4 == "kernel-trouble" { n[$1 "/" $2]++ }
		END { for (k in n) printf "kernel trouble: %s: %d run(s) (ledger)\n", k, n[k] }' \
		"$LEDGER" | sort | while IFS= read -r line; do log "$line"; done
}

# %q makes each value one shell word whatever it holds: SET with quotes
# of its own (SYSCTLS="a b") reaches the job's run-scenario.sh as given.
print_jobs() {
	local s a r
	job_list "$@" | while read -r s a r; do
		printf 'MEMCG_LAB_RESULTS=%q MATRIX_SEED=%q MEMCG_LAB_DEBUG=%q MEMCG_LAB_KERNEL=%q SET=%q %q one %q %q %q\n' \
			"$RESULTS" "$SEED" "${MEMCG_LAB_DEBUG:-}" "${MEMCG_LAB_KERNEL:-}" "${SET:-}" "$LAB_ROOT/lab/matrix.sh" "$s" "$a" "$r"
	done
}

# A run folder's kernel flavour: KERNEL_FLAVOUR as the guest resolved it
# (params-resolved.env, since commit 8f59ae8), else status.txt's
# kernel_flavour; runs with neither predate the debug kernel (ac66cb1).
run_kernel_flavour() {
	local f
	f=$(sed -n "s/^KERNEL_FLAVOUR='\{0,1\}\([a-z]*\)'\{0,1\}$/\1/p" "$1/params-resolved.env" 2>/dev/null || true)
	[ -n "$f" ] || f=$(sed -n 's/^kernel_flavour=//p' "$1/status.txt" 2>/dev/null || true)
	echo "${f:-lab}"
}

# Complete (result=ok) run folders under the results root of the given
# scenarios and arms, of any kernel (a folder is <stamp>-<label>-<arm>[.n],
# before the kernel axis <stamp>-<arm>[.n]: claim_run_folder), with
# those named by an arm's old name: make report counts them as that arm.
ok_run_folders() {
	local s a name d
	for s in $1; do
		for a in $2; do
			while read -r name; do
				for d in "$RESULTS/$s/"*"-$name" "$RESULTS/$s/"*"-$name".[0-9]*; do
					is_ok_run "$d" && echo "$d"
				done
			done < <(arm_and_old_names "$a")
		done
	done
	return 0
}

is_ok_run() {
	[ -f "$1/status.txt" ] && grep -qx result=ok "$1/status.txt"
}

# make report groups runs by scenario and arm and excludes the minority
# kernel build of a group as a mixed arm (with no majority, all of it):
# a matrix refuses to add runs of one flavour to a group that holds runs
# of the other, rather than have the report drop either.
refuse_mixed_flavours() {
	local d flavour other=()
	while read -r d; do
		flavour=$(run_kernel_flavour "$d")
		[ "$flavour" = "$FLAVOUR" ] || other+=("$d ($flavour)")
	done < <(ok_run_folders "$1" "$2")
	[ ${#other[@]} -eq 0 ] && return 0
	printf '  %s\n' "${other[@]:0:5}" >&2
	die "$RESULTS holds ${#other[@]} run(s) of these scenarios and arms on another kernel than this matrix's $FLAVOUR one (above, first 5); make report would exclude one flavour as mixed: give this matrix its own results root (RESULTS=...), or move those runs"
}

# "SECONDS COUNT": the median guest time (status.txt elapsed_s, boot to
# QEMU's exit) of the scenario's earlier ok runs on this flavour, any
# arm, and how many there were; nothing when there are none.
earlier_run_seconds() {
	local d
	for d in "$RESULTS/$1"/*; do
		is_ok_run "$d" || continue
		[ "$(run_kernel_flavour "$d")" = "$FLAVOUR" ] || continue
		sed -n 's/^elapsed_s=\([0-9][0-9]*\)$/\1/p' "$d/status.txt"
	done | median_and_count
}

# The same from this host's record of ok runs in any results root
# (lib.sh, RUN_DURATIONS), its last 20 of the scenario on this flavour.
recorded_run_seconds() {
	[ -f "$RUN_DURATIONS" ] || return 0
	awk -F, -v s="$1" -v f="$FLAVOUR" '$1 == s && $2 == f && $3 ~ /^[0-9]+$/ { print $3 }' \
		"$RUN_DURATIONS" | tail -n 20 | median_and_count
}

# "MEDIAN COUNT" of the whole numbers on stdin; nothing for none.
median_and_count() {
	sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)], NR }'
}

# The scenario's TIMEOUT_S on this flavour with SET applied: the
# estimate when it has never run here, an upper bound.
scenario_timeout_seconds() {
	"$LAB_ROOT/lab/run-scenario.sh" --host-parameters "$1" "$2" | sed -n 's/^TIMEOUT_S=//p'
}

# Before the first job: how many jobs, how many the ledger has done
# before, and the expected time of the rest, per scenario and in all.
print_estimate() {
	local line s a r done=0 total=0 seconds=0 per n basis
	local -A pending=() arm_of=()
	local order=()
	for line in "$@"; do
		read -r s a r <<<"$line"
		total=$((total + 1))
		if job_done "$s" "$a" "$r"; then
			done=$((done + 1))
			continue
		fi
		[ -n "${pending[$s]:-}" ] || order+=("$s")
		pending[$s]=$((${pending[$s]:-0} + 1))
		arm_of[$s]=$a
	done
	log "matrix on kernel $KERNEL_LABEL: $total jobs, $((total - done)) to run, $done done before (ledger: $LEDGER)"
	for s in "${order[@]}"; do
		read -r per n < <(earlier_run_seconds "$s"; echo)
		if [ -n "$per" ]; then
			basis="median of $n earlier ok $FLAVOUR run(s) in $RESULTS"
		elif read -r per n < <(recorded_run_seconds "$s"; echo) && [ -n "$per" ]; then
			basis="none in $RESULTS: median of this host's last $n ok $FLAVOUR run(s) elsewhere, $RUN_DURATIONS"
		else
			per=$(scenario_timeout_seconds "$s" "${arm_of[$s]}")
			basis="no earlier ok $FLAVOUR run in $RESULTS: its TIMEOUT_S, an upper bound"
		fi
		seconds=$((seconds + pending[$s] * per))
		log "  $s: ${pending[$s]} x $per s ($basis)"
	done
	log "expected: $((total - done)) jobs x $((seconds / (total - done > 0 ? total - done : 1))) s on average = $(format_duration "$seconds") of guest time, plus each job's host set-up and summary"
}

run_matrix() {
	local jobs total k=0 s a r start ran=0 failed=0 eta
	mapfile -t jobs < <(job_list "$@")
	total=${#jobs[@]}
	print_estimate "${jobs[@]}"
	start=$(date +%s)
	for line in "${jobs[@]}"; do
		read -r s a r <<<"$line"
		k=$((k + 1))
		if job_done "$s" "$a" "$r"; then
			log "[$k/$total] $s/$a #$r: done before, skipped"
			continue
		fi
		log "[$k/$total] $s/$a #$r"
		run_one_job "$s" "$a" "$r" || failed=$((failed + 1))
		ran=$((ran + 1))
		eta=$(( ($(date +%s) - start) * (total - k) / ran ))
		log "[$k/$total] finished; $failed failed so far; ETA $((eta / 60)) min"
	done
	log "matrix done: $total jobs, $ran run now, $failed failed; ledger: $LEDGER"
	ledger_trouble_counts
	[ "$failed" -eq 0 ]
}

main() {
	local mode=${1:-} scenarios arms runs
	case $mode in
	run | jobs)
		[ $# -eq 4 ] || usage
		scenarios=${2:-$VERDICT_SCENARIOS}
		arms=${3:-$VERDICT_ARMS}
		runs=${4:-$VERDICT_RUNS}
		check_names "$scenarios" "$arms" "$runs"
		refuse_mixed_flavours "$scenarios" "$arms"
		if [ "$mode" = jobs ]; then
			print_jobs "$scenarios" "$arms" "$runs"
		else
			run_matrix "$scenarios" "$arms" "$runs"
		fi
		;;
	defaults)
		printf 'scenarios: %s\narms: %s\nruns: %s\n' "$VERDICT_SCENARIOS" "$VERDICT_ARMS" "$VERDICT_RUNS"
		;;
	one)
		[ $# -eq 4 ] || usage
		run_one_job "$2" "$3" "$4"
		;;
	*) usage ;;
	esac
}

# On one line: bash has parsed the exit before main runs.
main "$@"; exit
