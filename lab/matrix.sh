#!/usr/bin/env bash
# Runs every (scenario, arm, repetition) once, each on a fresh boot, in a
# shuffled but reproducible order; resumable: a job with an "ok" line in
# the ledger is never run again, a failed one is retried in a new folder.
# A run the guest kernel failed (panic, oops, WARN, lockup, hang: the
# run's status.txt) is a finding, not a flake: its job is marked
# "kernel-trouble", counted, and never retried.
#
#   matrix.sh run SCENARIOS ARMS RUNS      run the matrix here, with ETA
#   matrix.sh jobs SCENARIOS ARMS RUNS     print the job list only: one
#                                          shell command per line, the
#                                          input of GNU parallel
#   matrix.sh one SCENARIO ARM REP         one job (what a job line runs)
#
#   env MEMCG_LAB_RESULTS=dir  results root (default ./results); the
#                              ledger is dir/matrix-ledger.csv
#   env MATRIX_SEED=n          shuffle seed (default 1)
#   env SET="VAR=value ..."    passed to every run
set -euo pipefail
. "$(dirname "$0")/lib.sh"

RESULTS=$(realpath -m "${MEMCG_LAB_RESULTS:-$LAB_ROOT/results}")
LEDGER=$RESULTS/matrix-ledger.csv
SEED=${MATRIX_SEED:-1}
[[ $SEED =~ ^[0-9]+$ ]] || die_usage "MATRIX_SEED must be a number, got '$SEED'"

usage() { die_usage "usage: matrix.sh run|jobs SCENARIOS ARMS RUNS | one SCENARIO ARM REP"; }

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

job_done() {
	[ -f "$LEDGER" ] && grep -qE "^$1,$2,$3,(ok|kernel-trouble)," "$LEDGER"
}

# ok, kernel-trouble (the guest kernel failed the run: failure_kind=kernel
# in status.txt, see classify_run in run-scenario.sh) or failed (anything
# else: QEMU, the host, the scenario), and the reason, from the run
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

print_jobs() {
	local s a r
	job_list "$@" | while read -r s a r; do
		printf 'MEMCG_LAB_RESULTS=%q MATRIX_SEED=%q SET=%q %q one %q %q %q\n' \
			"$RESULTS" "$SEED" "${SET:-}" "$LAB_ROOT/lab/matrix.sh" "$s" "$a" "$r"
	done
}

run_matrix() {
	local jobs total k=0 s a r start ran=0 failed=0 eta
	mapfile -t jobs < <(job_list "$@")
	total=${#jobs[@]}
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
		eta=$(( ($(date +%s) - start) / ran * (total - k) ))
		log "[$k/$total] finished; $failed failed so far; ETA $((eta / 60)) min"
	done
	log "matrix done: $total jobs, $ran run now, $failed failed; ledger: $LEDGER"
	ledger_trouble_counts
	[ "$failed" -eq 0 ]
}

main() {
	local mode=${1:-}
	case $mode in
	run | jobs)
		[ $# -eq 4 ] || usage
		check_names "$2" "$3" "$4"
		if [ "$mode" = jobs ]; then
			print_jobs "$2" "$3" "$4"
		else
			run_matrix "$2" "$3" "$4"
		fi
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
