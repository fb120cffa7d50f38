#!/bin/bash
# The neighbour's workload, run inside its own scope: buffered random
# reads on the fast disk and anonymous allocation bursts, side by side.
#   neighbour.sh OUT PROBE_MB PROBE_INTERVAL_MS DURATION_S
# It ends when the probe ends: after DURATION_S, or on SIGTERM once its
# trap is set (the runner does not send one: under reclaim this script
# may start seconds late), in both cases after the burst in progress, or
# when the OOM killer ends it (the neighbour's largest task).  The
# reader is stopped then: fio's own runtime starts only when fio has set
# up, under reclaim up to 30 s into the phase, and ran on that long
# after it.
# Exits with the probe's status, or else the reader's.
set -euo pipefail
out=$1
# lib/ and fio/ are siblings: /lab in the guest, scenarios/ on the host
# (where the unit tests run this script).
fio --output-format=json+ --output="$out/fio-neighbour.json" \
	"$(dirname "$0")/../fio/neighbour-read.fio" &
reader=$!
lab-mmap-probe -s "$2" -i "$3" -d "$4" -o "$out/probe-latency.csv" \
	-H "$out/probe-histogram.csv" &
probe=$!
# The reader's stop, marked first (OUT/reader-stopped): the runner's
# count of what it read in the phase, its processes' rchar, is whole
# only if taken before (finish_neighbour_phase).  One signal: fio
# stopping on a first one dies on a second before its report.
stop_reader() {
	: >"$out/reader-stopped"
	kill -TERM "$reader" 2>/dev/null || true
}
# The phase's end: the reader stops at once, the probe after its burst.
reader_told=
trap 'reader_told=1; stop_reader; kill -TERM "$probe" 2>/dev/null || true' TERM

# wait PID's status, across the TERM trap, which ends a wait early
# (status 143) and may let the job end before the wait is taken again.
wait_for() {
	local rc again
	while :; do
		rc=0
		wait "$1" || rc=$?
		! kill -0 "$1" 2>/dev/null || continue
		# A wait cut short did not collect the status of a job that
		# ended meanwhile: a second one does (127: the first one did).
		again=0
		wait "$1" 2>/dev/null || again=$?
		[ "$again" -eq 127 ] || rc=$again
		return "$rc"
	done
}

probe_rc=0
wait_for "$probe" || probe_rc=$?
[ -n "$reader_told" ] || stop_reader
reader_rc=0
wait_for "$reader" || reader_rc=$?
# fio 3.33 exits 128 when a signal stopped it, its report written, and
# dies of it (143) before it has set itself up, which under reclaim
# took more than a 10 s phase (make test): no report then, and the
# reader's work is its rchar alone.
case $reader_rc in
128) reader_rc=0 ;;
143)
	echo "neighbour.sh: fio was stopped before it had set up: no fio-neighbour.json" >&2
	reader_rc=0
	;;
esac
if [ "$probe_rc" -ne 0 ]; then
	# A probe killed before its end wrote no histogram; its rows are
	# written as each burst ends.
	[ -s "$out/probe-histogram.csv" ] || rm -f "$out/probe-histogram.csv"
	exit "$probe_rc"
fi
exit "$reader_rc"
