# shellcheck shell=bash
# SHAPE=stress: shape_stress, then the helpers only it uses
# (lib/guest-run.sh sources this file).

# The stress mix for the debug kernel: NR_DIRTIERS dirtiers and the
# neighbour under the parent limit while, every STRESS_STEP_S, a step
# switches the writeback policy, compacts memory, reclaims proactively
# on the parent, maps THP-backed memory, or starts a short-lived writer
# whose memcg is removed under writeback.  stress.csv logs every step;
# check_series_drained() then checks the lists drained.
shape_stress() {
	local i cgs=() names=() n=0 stranded0=0
	compact_pid=
	for i in $(seq "$NR_DIRTIERS"); do
		names+=("dirtier-$i")
		cgs+=("$(cg_of "dirtier-$i")")
	done
	prepare_disks "$NR_DIRTIERS"
	echo "$THP" >/sys/kernel/mm/transparent_hugepage/enabled ||
		die "cannot set THP $THP"
	set_parent_limit "$PARENT_MAX_MB"
	start_sampler "$slice" "${cgs[@]}" "$(cg_of neighbour)"
	stranded0=$(awk '$1 == "pgimmediate_stranded" {print $2}' /proc/vmstat)
	for i in $(seq "$NR_DIRTIERS"); do
		start_dirtier "dirtier-$i" "/mnt/stick/dirty-$i.dat"
	done
	ramp_until_writeback "${cgs[@]}"
	phase_begin stress measured
	run_in_scope neighbour -- env READ_FILE=/mnt/fast/read.dat \
		READ_FILE_MB="$READ_FILE_MB" NEIGHBOUR_S="$STRESS_S" \
		"$lab_dir/lib/neighbour.sh" "$out_dir" "$PROBE_MB" "$PROBE_INTERVAL_MS" "$STRESS_S"
	echo "step,uptime_s,action,result" >"$out_dir/stress.csv"
	while scope_running neighbour; do
		n=$((n + 1))
		stress_step "$n"
		[ $((n % 5)) -ne 1 ] || heartbeat "${cgs[0]}"
		sleep "$STRESS_STEP_S"
	done
	wait "${scope_pid[neighbour]}" || die "neighbour failed"
	phase_end
	echo activate >"$writeback_policy" 2>/dev/null || true
	for i in "${names[@]}"; do
		stop_scope "$i"
	done
	# The checks need the writeback done: at the debug kernel's 1 MiB/s
	# the sync would outlast the host's 180 s silence limit.
	stick_throttle off
	if [ -n "$compact_pid" ]; then
		say "stress: waiting for the last compaction (it waits for writeback)"
		sync
		wait "$compact_pid" || die "compact_memory failed"
	fi
	stop_sampler
	check_series_drained "${stranded0:-0}"
}

# One line of stress.csv (step, uptime, action, result), also said on the
# console: the host's hang detector needs output at least every 180 s,
# and a debug kernel's splat is easier to place next to the step.
log_stress_step() {
	echo "$1,$(uptime_s),$2,$3" >>"$out_dir/stress.csv"
	say "stress step $1: $2 $3"
}

# Runs "$@" for at most STRESS_STEP_BOUND_S, then SIGKILLs it: under the
# keep policy, memory.reclaim and a THP allocation in a memcg whose file
# LRU is all under writeback can take minutes.  Prints ok, failed or
# timeout.
bounded_step() {
	local rc=0
	timeout -s KILL "$STRESS_STEP_BOUND_S" "$@" || rc=$?
	case $rc in
	0) echo ok ;;
	137) echo timeout ;;
	*) echo failed ;;
	esac
}

# Step N (from 1) of the stress loop: action (N - 1) mod 5 of the cycle
# below, so the first step parks (policy immediate),
# logged with its result (ok, failed, timeout, started or n/a).
stress_policies=(immediate keep immediate activate)
stress_step() {
	local n=$1 policy
	case $(((n - 1) % 5)) in
	0)
		policy=${stress_policies[$((((n - 1) / 5) % ${#stress_policies[@]}))]}
		if [ ! -w "$writeback_policy" ]; then
			log_stress_step "$n" "policy-$policy" n/a
		elif echo "$policy" >"$writeback_policy"; then
			log_stress_step "$n" "policy-$policy" ok
		else
			log_stress_step "$n" "policy-$policy" failed
		fi
		;;
	1)
		# Not bounded but left running: sync compaction waits for the
		# writeback of every folio it migrates, uninterruptibly, and a
		# folio at the back of the stick's 1024-deep queue can take
		# minutes (a debug-kernel run sat 120 s past its SIGKILL).
		if [ -n "$compact_pid" ] && kill -0 "$compact_pid" 2>/dev/null; then
			log_stress_step "$n" compact still-running
		else
			sh -c 'echo 1 >/proc/sys/vm/compact_memory' &
			compact_pid=$!
			log_stress_step "$n" compact started
		fi
		;;
	2)
		# EAGAIN ("failed") is a normal answer under this much writeback.
		if [ "$cgroup_mode" != v2 ]; then
			log_stress_step "$n" proactive-reclaim n/a
		else
			log_stress_step "$n" proactive-reclaim "$(bounded_step sh -c \
				"echo ${STRESS_RECLAIM_MB}M >$cgroot/$slice/memory.reclaim" 2>/dev/null)"
		fi
		;;
	3)
		# THP-backed anonymous memory: compaction and splits under
		# pressure.  The memcg OOM killer may end it (failed).
		run_in_scope "alloc-$n" -- timeout -s KILL "$STRESS_STEP_BOUND_S" \
			lab-alloc -s "$STRESS_ALLOC_MB" -o "$out_dir/stress-alloc-$n.csv"
		if wait "${scope_pid[alloc-$n]}"; then
			log_stress_step "$n" thp-alloc ok
		else
			log_stress_step "$n" thp-alloc "failed-or-timeout"
		fi
		;;
	4)
		# A writer in a small memcg, killed after STRESS_STEP_S: its scope
		# is collected, so the memcg is removed while its folios are still
		# under writeback (parked, with the immediate policy).
		run_in_scope "churn-$n" MemoryMax="${STRESS_CHURN_MAX_MB}M" -- \
			timeout -s KILL "$STRESS_STEP_S" dd if=/dev/zero of=/mnt/stick/churn.dat \
			bs=1M count="$((STRESS_CHURN_MAX_MB * 2))" conv=notrunc status=none
		log_stress_step "$n" churn-memcg started
		;;
	esac
}

# The value after KEY in the verifier's "total ... KEY value ..." line.
verifier_field() {
	awk -v key="$1" '{for (i = 1; i < NF; i++) if ($i == key) print $(i + 1)}' <<<"$2"
}

# After sync: nothing parked anywhere, no stranded folio, and (with the
# series' debugfs verifier) the lists agree with the counters.  Writes
# stress-check.txt; a failed check fails the run.
check_series_drained() {
	local stranded0=$1 parked=na stranded=na walk=na bad=na mismatched=na i failed=
	sync
	if grep -q '^nr_immediate ' /proc/vmstat; then
		for i in $(seq 30); do
			parked=$(awk '$1 == "nr_immediate" {print $2}' /proc/vmstat)
			[ "$parked" -eq 0 ] && break
			sleep 1
		done
		stranded=$(($(awk '$1 == "pgimmediate_stranded" {print $2}' /proc/vmstat) - stranded0))
		[ "$parked" -eq 0 ] || failed+=" nr_immediate=$parked"
		[ "$stranded" -eq 0 ] || failed+=" stranded=$stranded"
	fi
	mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug || true
	if [ -r /sys/kernel/debug/lru_immediate_verify ]; then
		walk=$(grep '^total ' /sys/kernel/debug/lru_immediate_verify)
		bad=$(verifier_field bad "$walk")
		mismatched=$(verifier_field mismatched "$walk")
		[ "$bad" = 0 ] || failed+=" bad=$bad"
		[ "$mismatched" = 0 ] || failed+=" mismatched=$mismatched"
	fi
	{
		echo "nr_immediate=$parked"
		echo "stranded=$stranded"
		echo "verifier_bad=$bad"
		echo "verifier_mismatched=$mismatched"
		echo "verifier_total=$walk"
	} >"$out_dir/stress-check.txt"
	[ -z "$failed" ] || die "the series' lists did not drain after the stress mix:$failed"
	say "stress check: nr_immediate=$parked stranded=$stranded verifier bad=$bad mismatched=$mismatched"
}
