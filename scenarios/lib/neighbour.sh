#!/bin/bash
# The neighbour's workload, run inside its own scope: buffered random
# reads on the fast disk and anonymous allocation bursts, side by side.
#   neighbour.sh OUT PROBE_MB PROBE_INTERVAL_MS DURATION_S
# The probe's DURATION_S is the workload's: when the probe has finished
# its last burst, or was killed (the memcg OOM killer picks it, the
# largest), the reader is stopped.  fio's own runtime (NEIGHBOUR_S, as
# long) starts only when fio has set up, which under reclaim came up to
# 30 s into the phase, so the reader ran that long after the phase.
# Exits with the probe's status, or else the reader's.
set -euo pipefail
out=$1
fio --output-format=json+ --output="$out/fio-neighbour.json" \
	/lab/fio/neighbour-read.fio &
reader=$!
probe=0
lab-mmap-probe -s "$2" -i "$3" -d "$4" -o "$out/probe-latency.csv" \
	-H "$out/probe-histogram.csv" || probe=$?
status=0
if kill -TERM "$reader" 2>/dev/null; then
	wait "$reader" || status=$?
	# fio 3.33 exits 128 when a signal stopped it, its report written.
	[ "$status" -ne 128 ] || status=0
else
	wait "$reader" || status=$?
fi
if [ "$probe" -ne 0 ]; then
	# A probe killed before its end wrote no histogram; its rows are
	# written as each burst ends.
	[ -s "$out/probe-histogram.csv" ] || rm -f "$out/probe-histogram.csv"
	exit "$probe"
fi
exit "$status"
