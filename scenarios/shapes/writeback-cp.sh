# shellcheck shell=bash
# SHAPE=writeback-cp: shape_writeback_cp, then the helpers only it uses
# (lib/guest-run.sh sources this file).

# The 2011 series' writebackCP test: a copy loop from the fast disk to the
# slow stick, and when memory is low the alloc program maps ALLOC_MB (THP
# as the scenario says) and reports how long it took and what THP and
# compaction did; ITERATIONS times, with sync, drop_caches and a wait for
# writeback between them.  writeback-cp.csv has one row per iteration:
# lab-alloc's keys, then the vmstat deltas over the alloc.
shape_writeback_cp() {
	local i t before after deltas alloc_out row alloc_rc alloc_row
	prepare_stick
	prepare_fast
	say "laying out the ${SRC_FILE_MB}M source file on the fast disk"
	lay_out_file /mnt/fast/source.dat "$SRC_FILE_MB"
	echo "$THP" >/sys/kernel/mm/transparent_hugepage/enabled ||
		die "cannot set THP $THP"
	apply_sysctls
	stick_throttle on
	# One scope name per iteration: systemd may still be collecting the
	# previous iteration's.
	local cgs=()
	for i in $(seq "$ITERATIONS"); do
		cgs+=("$(cg_of "copier-$i")" "$(cg_of "alloc-$i")")
	done
	# lab-alloc writes its CSV when it is done: a 1 MiB run gives the
	# header for an iteration whose alloc the OOM killer ends.
	lab-alloc -s 1 -o "$out_dir/alloc-header.csv" >/dev/null ||
		die "lab-alloc -s 1 failed"
	echo "iteration,$(head -n 1 "$out_dir/alloc-header.csv"),$(echo "$WRITEBACK_CP_KEYS" | tr -s ' \n' ',' | sed 's/,$//')" >"$out_dir/writeback-cp.csv"
	start_sampler "$slice" "${cgs[@]}"
	for i in $(seq "$ITERATIONS"); do
		drop_caches
		wait_dirty_below "$CLEAN_PAGES"
		phase_begin "iteration-$i"
		run_in_scope "copier-$i" -- sh -c 'while :; do dd if=/mnt/fast/source.dat of=/mnt/stick/copy.dat bs=1M status=none || exit 1; done'
		t=0
		until [ "$(mem_free_mb)" -lt "$LOW_MEM_MB" ]; do
			sleep 1
			t=$((t + 1))
			[ "$t" -lt "$LOW_MEM_WAIT_S" ] ||
				die "MemFree still >= ${LOW_MEM_MB}M after ${LOW_MEM_WAIT_S} s of copying"
			[ $((t % 10)) -eq 0 ] && say "iteration $i: copying, MemFree $(mem_free_mb)M"
		done
		heartbeat "$(cg_of "copier-$i")"
		before=$(vmstat_snapshot)
		start_profile "iteration-$i"
		alloc_out=$out_dir/alloc-$i.csv
		run_in_scope "alloc-$i" -- lab-alloc -s "$ALLOC_MB" ${ALLOC_MADVISE:+-H} -o "$alloc_out"
		alloc_rc=0
		wait "${scope_pid[alloc-$i]}" || alloc_rc=$?
		after=$(vmstat_snapshot)
		finish_profile "iteration-$i" lab-alloc
		stop_scope "copier-$i" SIGTERM
		phase_end
		deltas=$(vmstat_deltas "$before" "$after")
		row=$(awk '{printf ",%s", $2}' <<<"$deltas")
		if [ "$alloc_rc" -eq 0 ]; then
			alloc_row=$(tail -n 1 "$alloc_out")
		elif awk '$1 == "oom_kill" && $2 != "na" && $2 > 0 {found = 1} END {exit !found}' \
			<<<"$deltas"; then
			# The allocating task OOM-killed is this workload's worst
			# outcome, a result to count (vmstat.oom_kill), not a
			# broken run.
			alloc_row=$(head -n 1 "$out_dir/alloc-header.csv" | sed 's/[^,]*/na/g')
		else
			die "lab-alloc failed in iteration $i (exit $alloc_rc, no OOM kill)"
		fi
		echo "$i,$alloc_row$row" >>"$out_dir/writeback-cp.csv"
		say "iteration $i: ${alloc_row/#na*/lab-alloc OOM-killed}"
	done
	stop_sampler
}

# vmstat counters of the 2011 cover letter's table, for one iteration.
WRITEBACK_CP_KEYS="pgscan_direct pgscan_kswapd pgsteal_direct pgsteal_kswapd
pgscan_file pgsteal_file nr_vmscan_immediate_reclaim pgrescued pgimmediate_parked
compact_stall compact_success compact_fail thp_fault_alloc thp_fault_fallback
pgactivate pgdeactivate pgrotated oom_kill"

vmstat_snapshot() {
	local k
	for k in $WRITEBACK_CP_KEYS; do
		awk -v k="$k" '$1 == k {v = $2} END {print k, (v == "" ? "na" : v)}' /proc/vmstat
	done
}

# "key delta" lines between two vmstat_snapshot outputs, "na" where
# the kernel lacks the key.
vmstat_deltas() {
	paste -d' ' <(echo "$1") <(echo "$2") |
		awk '{print $1, ($2 == "na" || $4 == "na") ? "na" : $4 - $2}'
}

# MemFree, not MemAvailable: MemAvailable counts the copy's dirty and
# writeback page cache as available, so it never looks low.
mem_free_mb() { awk '/^MemFree:/ {print int($2 / 1024)}' /proc/meminfo; }

# Waits until writeback has drained (the seed waited for a small nr_dirty
# between iterations so one could not skew the next).
wait_dirty_below() {
	local i
	for i in $(seq 600); do
		[ "$(awk '$1 == "nr_dirty" || $1 == "nr_writeback" {s += $2} END {print s + 0}' /proc/vmstat)" -lt "$1" ] && return 0
		sleep 1
	done
	die "dirty + writeback pages still >= $1 after 600 s"
}
