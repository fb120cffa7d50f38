#!/bin/bash
# The neighbour's workload, run inside its own scope: buffered random
# reads on the fast disk and anonymous allocation bursts, side by side.
#   neighbour.sh OUT PROBE_MB PROBE_INTERVAL_MS DURATION_S
set -euo pipefail
out=$1
fio --output-format=json+ --output="$out/fio-neighbour.json" \
	/lab/fio/neighbour-read.fio &
reader=$!
lab-mmap-probe -s "$2" -i "$3" -d "$4" -o "$out/probe-latency.csv" \
	-H "$out/probe-histogram.csv"
wait "$reader"
