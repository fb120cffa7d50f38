#!/bin/bash
# The neighbour's workload, run inside its own scope: buffered random
# reads on the fast disk and anonymous allocation bursts, side by side.
#   neighbour.sh OUT PROBE_MB PROBE_INTERVAL_MS DURATION_S
# The probe's DURATION_S is the workload's: when the probe has finished
# its last burst, the reader is stopped.  fio's own runtime (NEIGHBOUR_S,
# as long) starts only when fio has set up, which under reclaim came up
# to 30 s into the phase, so the reader ran that long after the phase.
set -euo pipefail
out=$1
fio --output-format=json+ --output="$out/fio-neighbour.json" \
	/lab/fio/neighbour-read.fio &
reader=$!
lab-mmap-probe -s "$2" -i "$3" -d "$4" -o "$out/probe-latency.csv" \
	-H "$out/probe-histogram.csv"
status=0
if kill -TERM "$reader" 2>/dev/null; then
	wait "$reader" || status=$?
	# fio 3.33 exits 128 when a signal stopped it, its report written.
	[ "$status" -ne 128 ] || status=0
else
	wait "$reader" || status=$?
fi
exit "$status"
