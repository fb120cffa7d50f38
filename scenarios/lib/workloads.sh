# shellcheck shell=bash
# The workloads the shapes share: the dirtier, the ramp until its pages
# are under writeback, the neighbour's measured phase, and waiting on a
# long job (sourced by guest-run.sh; its header says what API and
# Private mean).
#
# API:
#   start_dirtier NAME FILE [JOB [PROP...]]  fio overwriting FILE, in
#                         member NAME
#   ramp_until STEP_S KEY MB CG...  the ramp phase: until the CGs hold MB
#                         of memory.stat KEY, or RAMP_MAX_S
#   ramp_until_writeback CG...  the ramp until RAMP_WRITEBACK_MB under
#                         writeback
#   start_neighbour_phase [PROP...]  the neighbour's measured phase
#                         begins: attribution and the neighbour start
#   finish_neighbour_phase CG  it ends on time, heartbeats of CG until
#                         then: attribution stops, the neighbour's tail;
#                         a neighbour the OOM killer ended is a result
#   wait_with_heartbeat PID WHAT  wait for a background job, a console
#                         line every 30 s; its status, waited_s
# Private:
#   oom_kills             OOM kills in the guest since boot
#   neighbour_did_not_stop S  where a neighbour that would not stop in S
#                         seconds is, and the run fails

# The dirtier NAME: fio's buffered writer overwriting FILE on the stick
# (or JOB, another fio job file), in NAME.scope.
start_dirtier() {
	local name=$1 file=$2 job=${3:-dirtier.fio}
	shift $(($# < 3 ? $# : 3))
	run_in_scope "$name" "$@" -- env DIRTY_FILE="$file" \
		DIRTY_FILE_MB="$DIRTY_FILE_MB" DIRTY_RUNTIME_S="$DIRTY_RUNTIME_S" \
		fio --output-format=json+ --output="$out_dir/fio-$name.json" "$lab_dir/fio/$job"
}

# The ramp phase: until the memcgs CG... hold MB of memory.stat KEY, or
# RAMP_MAX_S, looking every STEP_S seconds (a heartbeat every 5 s).
#   ramp_until STEP_S KEY MB CG...
ramp_until() {
	local step=$1 key=$2 mb=$3 t=0
	shift 3
	phase_begin ramp
	while [ $t -lt "$RAMP_MAX_S" ]; do
		sleep "$step"
		t=$((t + step))
		[ $((t % 5)) -eq 0 ] && heartbeat "$1"
		[ "$(memcg_stat_mb "$key" "$@")" -ge "$mb" ] && break
	done
	phase_end
}

# Until the dirtiers hold RAMP_WRITEBACK_MB under writeback, or
# RAMP_MAX_S: the precondition is judged later, on the measured phase.
ramp_until_writeback() {
	ramp_until 5 file_writeback "$RAMP_WRITEBACK_MB" "$@"
}

# The neighbour's phase: buffered reads on the fast disk and the fault
# latency probe, in neighbour.scope.
start_neighbour_phase() {
	phase_begin neighbour measured
	oom_kills_before=$(oom_kills)
	start_attribution
	start_profile neighbour
	run_in_scope neighbour "$@" -- env READ_FILE=/mnt/fast/read.dat \
		READ_FILE_MB="$READ_FILE_MB" NEIGHBOUR_S="$NEIGHBOUR_S" \
		"$lab_dir/lib/neighbour.sh" "$out_dir" "$PROBE_MB" "$PROBE_INTERVAL_MS" "$NEIGHBOUR_S"
	list_members >"$out_dir/cgroups-seen.txt"
}

# The measured phase ends NEIGHBOUR_S after it began, or earlier if the
# neighbour is done: its probe starts no burst after its NEIGHBOUR_S but
# finishes the one it is in, and then stops the reader (lib/neighbour.sh).
# That tail is a phase of its own (neighbour-tail), so that every run
# measures the same length of time.  (Not a SIGTERM at the phase's end:
# under reclaim neighbour.sh may not have set its trap by then, and a
# 10 s phase in the boot tests killed it.)
finish_neighbour_phase() {
	local end left rchar='' neighbour_rc=0
	end=$(awk -v s="$phase_start" -v d="$NEIGHBOUR_S" 'BEGIN { printf "%.2f", s + d }')
	while scope_running neighbour; do
		left=$(awk -v e="$end" -v now="$(uptime_s)" 'BEGIN { l = e - now; print (l > 5 ? 5 : l > 0 ? l : 0) }')
		[ "$left" != 0 ] || break
		heartbeat "$1"
		sleep "$left"
	done
	# The phase ends on time; the attribution tool's last read of its
	# hists (seconds under TCG) comes after.
	phase_end
	# What the reader has read by the phase's end (its processes began
	# with the phase): fio's own total also counts what it reads in the
	# tail.  A reader stopped by then (neighbour.sh marks it before it
	# signals fio) read it all in the phase, and its exiting processes
	# take their rchar with them: fio's total is the phase's reads.  The
	# mark is looked for after the count, so a count taken before it is
	# whole.
	scope_running neighbour && rchar=$(member_rchar neighbour)
	if [ -n "$rchar" ] && [ ! -e "$out_dir/reader-stopped" ]; then
		echo "rchar_at_phase_end=$rchar"
	else
		echo "finished_in_phase=1"
	fi >"$out_dir/neighbour-io.txt"
	finish_profile neighbour fio lab-mmap-probe
	stop_attribution
	if scope_running neighbour; then
		phase_begin neighbour-tail
		local max_s=$((neighbour_tail_max_s * KERNEL_SLOWDOWN)) give_up
		give_up=$(awk -v now="$(uptime_s)" -v m="$max_s" 'BEGIN { print now + m }')
		while scope_running neighbour; do
			heartbeat "$1"
			sleep 1
			awk -v now="$(uptime_s)" -v g="$give_up" 'BEGIN { exit !(now >= g) }' &&
				neighbour_did_not_stop "$max_s"
		done
		phase_end
	fi
	wait "${scope_pid[neighbour]}" || neighbour_rc=$?
	[ "$neighbour_rc" -eq 0 ] && return
	# The OOM killer ending the neighbour's probe is the worst outcome
	# for the neighbour, a result to count (the parent's memory.events
	# oom_kill), not a broken run.
	[ "$(oom_kills)" -gt "$oom_kills_before" ] ||
		die "neighbour failed (exit $neighbour_rc, no OOM kill)"
	say "neighbour: exit $neighbour_rc after $(($(oom_kills) - oom_kills_before)) OOM kill(s) in the phase; the run goes on"
}

# How long the neighbour may take to stop after the phase: its probe's
# last burst, seconds even under reclaim, and fio's report.  A reader
# that never began to read in a clean-control run (7 December) sat in
# the tail until the host's time limit.
# Times KERNEL_SLOWDOWN, known once the parameters are.
neighbour_tail_max_s=120

# A neighbour still running $1 s after it was told to stop: where each of its tasks is (neighbour-stuck.txt: state, wait
# channel, kernel stack; the console gets every blocked task, sysrq w),
# then the run fails with that said.
neighbour_did_not_stop() {
	local pid
	while read -r pid; do
		echo "== $pid $(cat "/proc/$pid/comm" 2>/dev/null) $(awk '$1 == "State:" {print $2, $3}' "/proc/$pid/status" 2>/dev/null) wchan=$(cat "/proc/$pid/wchan" 2>/dev/null)"
		cat "/proc/$pid/stack" 2>/dev/null
	done <"$cgroot/$(cg_of neighbour)/cgroup.procs" >"$out_dir/neighbour-stuck.txt"
	echo w >/proc/sysrq-trigger 2>/dev/null || true
	die "the neighbour did not stop within $1 s of the phase's end: its tasks in neighbour-stuck.txt, every blocked task on the console"
}

# OOM kills in the guest since boot (/proc/vmstat oom_kill).
oom_kills() { awk '$1 == "oom_kill" { print $2 }' /proc/vmstat; }

# Waits for the background job $1 and returns its exit status, saying
# "$2 running (N s)" every 30 s: the host's hang detector needs a console
# line at least every 180 s.  waited_s: how long it ran, in seconds.
wait_with_heartbeat() {
	local pid=$1 what=$2
	waited_s=0
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		waited_s=$((waited_s + 1))
		[ $((waited_s % 30)) -ne 0 ] || say "$what running (${waited_s} s)"
	done
	wait "$pid"
}
