# shellcheck shell=bash
# SHAPE=proactive: shape_proactive (lib/guest-run.sh sources this file).

# memory.reclaim on the parent while the dirtier's pages are under
# writeback: RECLAIM_CALLS calls of RECLAIM_MB each, RECLAIM_GAP_S apart;
# proactive.csv has per call its end (uptime), duration, the kernel's
# answer and the parent's pgscan/pgsteal deltas (pages).
shape_proactive() {
	local cg i t0 t1 rc err s0 s1 r0 r1
	[ "$cgroup_mode" = v2 ] || die "memory.reclaim exists only in cgroup v2"
	cg=$(cg_of dirtier)
	prepare_disks 1
	set_parent_limit "$PARENT_MAX_MB"
	start_sampler "$slice" "$cg"
	start_dirtier dirtier /mnt/stick/dirty-1.dat
	ramp_until_writeback "$cg"
	phase_begin reclaim measured
	start_attribution
	echo "call,end_s,duration_ns,result,pgscan,pgsteal" >"$out_dir/proactive.csv"
	for i in $(seq "$RECLAIM_CALLS"); do
		s0=$(memcg_stat "$slice" pgscan)
		r0=$(memcg_stat "$slice" pgsteal)
		t0=$(date +%s%N)
		# EAGAIN (fewer pages reclaimed than asked) is a result, "short";
		# any other error is kept by name.
		if err=$({ echo "${RECLAIM_MB}M" >"$cgroot/$slice/memory.reclaim"; } 2>&1); then
			rc=ok
		elif [[ $err == *"Resource temporarily unavailable"* ]]; then
			rc=short
		else
			rc=error:$(printf '%s' "${err##*: }" | tr -c 'A-Za-z0-9' _)
		fi
		t1=$(date +%s%N)
		s1=$(memcg_stat "$slice" pgscan)
		r1=$(memcg_stat "$slice" pgsteal)
		echo "$i,$(uptime_s),$((t1 - t0)),$rc,$((s1 - s0)),$((r1 - r0))" >>"$out_dir/proactive.csv"
		# A line per call: a call can take half a minute, and the host
		# takes a console silent for 180 s for a hung guest.
		say "memory.reclaim call $i of $RECLAIM_CALLS: $rc in $(((t1 - t0) / 1000000)) ms, pgscan $((s1 - s0)) pgsteal $((r1 - r0))"
		[ $((i % 5)) -eq 0 ] && heartbeat "$cg"
		sleep "$RECLAIM_GAP_S"
	done
	stop_attribution
	phase_end
	stop_scope dirtier
	stop_sampler
}
