# shellcheck shell=bash
# What measures the run: the sampler, the reclaim attribution, the
# per-phase trace hists (reclaim_throttle, lock contention), the stick's
# bdi state, the console heartbeat (sourced by guest-run.sh; its header
# says what API and Private mean).
#
# API:
#   start_sampler PARENT LEAF...  lab-sampler into samples.csv
#   stop_sampler          stop it; a sampler that failed fails the run
#   heartbeat CG          a console line of CG's LRU state
#   start_attribution     lab-reclaim-attrib into attribution.csv (or
#                         attrib_out), once its hists are in place
#   stop_attribution      stop it, if it runs
#   boot_trace_events     the trace events enabled at boot, "sys/event"
#   start_profile TAG     with PROFILE_HZ, perf samples every CPU's stacks
#   finish_profile TAG COMM...  until now: its report, profile-TAG.txt
# Private:
#   check_profile         PROFILE_HZ is a rate, and perf is there
#   quiesce_tracing       the ring buffer records nothing
#   lock_hist_start       (phase_begin) lock contention, cleared
#   lock_hist_take        (phase_end) rows of lock-contention.csv
#   throttle_hist_start   (phase_begin) reclaim_throttle(), cleared
#   throttle_hist_take    (phase_end) rows of reclaim-throttle.csv
#   throttle_hist_clear   its hist trigger cleared
#   record_stick_bdi begin|end  (phase_begin/end) rows of bdi-stick.csv

# Spinlock contention per phase, by the stack that met it: how often
# the series' per-completion unpark (folio_rotate_immediate, one
# lru_lock round trip per parked folio whose writeback ends, in the
# completion's IRQ) contends with reclaim and the LRU's other users.  A
# hist trigger on lock:contention_begin (queued_spin_lock_slowpath's
# queueing path; flags 1 is a plain spinlock), keyed by the kernel stack,
# cleared at every phase begin and read at its end into
# lock-contention.csv (phase, contentions, frames from the innermost,
# ";"-separated).  Only when the host enabled the event at boot
# (SET="LOCK_CONTENTION=1").
lock_event=/sys/kernel/tracing/events/lock/contention_begin
# A trigger's filter comes last, after any :clear or :pause.
lock_hist='hist:keys=stacktrace:vals=hitcount:size=4096'
lock_filter='if flags == 1'
lock_hist_start() {
	case ${lock_hist_state:-} in
	on) echo "$lock_hist:clear $lock_filter" >>"$lock_event/trigger" ||
		die "cannot clear the hist trigger on $lock_event"
		return 0 ;;
	off) return 0 ;;
	esac
	lock_hist_state=off
	boot_trace_events | grep -qx lock/contention_begin || return 0
	echo "$lock_hist $lock_filter" >>"$lock_event/trigger" ||
		die "cannot set a hist trigger on $lock_event"
	lock_hist_state=on
	echo "phase,contentions,stack" >"$out_dir/lock-contention.csv"
}
lock_hist_take() {
	[ "${lock_hist_state:-}" = on ] || return 0
	awk -v phase="$phase" '
		/^\{ stacktrace:/ { stack = ""; inside = 1; next }
		inside && /^\} hitcount:/ {
			printf "%s,%s,%s\n", phase, $3, stack
			inside = 0; next
		}
		inside && NF { f = $1; sub(/\+.*/, "", f); stack = stack (stack == "" ? "" : ";") f }
		# Stacks the full table could not take: counted, never lost.
		/^ *Dropped: *[1-9]/ { printf "%s,%s,(dropped: the hist table was full)\n", phase, $2 }
	' "$lock_event/hist" >>"$out_dir/lock-contention.csv"
}

# The stick's writeback state in the kernel's bdi debugfs file, at every
# phase boundary: bdi-stick.csv (phase, event, uptime_s, key, value in
# kB or kBps).  The flusher's chunk is half BdiWriteBandwidth: is the
# estimate the stick's rate, and do dirty limits move (lab/README.md)?
record_stick_bdi() {
	[ -n "${stick_dev:-}" ] || return 0
	local stats
	stats=/sys/kernel/debug/bdi/$(cat "/sys/block/$(basename "$stick_dev")/dev")/stats
	[ -r "$stats" ] || return 0
	[ -f "$out_dir/bdi-stick.csv" ] || echo "phase,event,uptime_s,key,value" >"$out_dir/bdi-stick.csv"
	awk -F: -v p="$phase" -v e="$1" -v t="$(uptime_s)" \
		'NF == 2 && $2 ~ /^ *[0-9]+ *k?B?p?s?$/ { gsub(/ /, "", $1); split($2, v, " "); print p "," e "," t "," $1 "," v[1] }' \
		"$stats" >>"$out_dir/bdi-stick.csv"
}

# Time in reclaim_throttle() per phase, by reason and task: where
# reclaim that does not scan spends its time instead (the series' parked
# folios are not scanned; reclaim throttles as if it had met them, and
# waits for them before an OOM, reason "parked").  A hist trigger on
# vmscan:mm_vmscan_throttled, cleared at every phase begin and read at its
# end into reclaim-throttle.csv; reason is the event's bit (1 << enum
# vmscan_throttle_state).
throttle_event=/sys/kernel/tracing/events/vmscan/mm_vmscan_throttled
throttle_hist='hist:keys=reason,common_pid.execname:vals=hitcount,usec_delayed'
throttle_hist_start() {
	case ${throttle_hist_state:-} in
	on) throttle_hist_clear; return 0 ;;
	unavailable) return 0 ;;
	esac
	# On an event not enabled at boot the trigger would enable it, which
	# patches kernel text under load (boot_trace_events).
	if [ "$(head -c 1 "$throttle_event/enable" 2>/dev/null)" != 1 ]; then
		throttle_hist_state=unavailable
		echo "not available: $throttle_event is not enabled (trace_event= on the kernel command line)" \
			>"$out_dir/reclaim-throttle.csv"
	elif echo "$throttle_hist" >>"$throttle_event/trigger" 2>/dev/null; then
		throttle_hist_state=on
		echo "phase,reason,comm,pid,sleeps,delayed_us,cgroup" >"$out_dir/reclaim-throttle.csv"
	else
		throttle_hist_state=unavailable
		echo "not available: cannot set a hist trigger on $throttle_event" \
			>"$out_dir/reclaim-throttle.csv"
	fi
}
throttle_hist_take() {
	[ "${throttle_hist_state:-}" = on ] || return 0
	sed -nE 's/^\{ reason: *([0-9]+), common_pid: *(.*[^ ]) *\[ *([0-9]+)\] *\} hitcount: *([0-9]+) *usec_delayed: *([0-9]+).*/\1 \3 \4 \5 \2/p' \
		"$throttle_event/hist" |
		awk -v phase="$phase" '{
			r = $1 == 1 ? "writeback" : $1 == 2 ? "isolated" : $1 == 4 ? "noprogress" : $1 == 8 ? "congested" : $1 == 16 ? "parked" : $1
			comm = $5; for (i = 6; i <= NF; i++) comm = comm " " $i
			gsub(/,/, ";", comm)
			printf "%s,%s,%s,%s,%s,%s\n", phase, r, comm, $2, $3, $4
		}' | while IFS= read -r row; do
			# The task's cgroup while it lives (the neighbour's tasks do
			# at the end of its measured phase): "fio" names the dirtier
			# and the neighbour's reader alike.
			IFS=, read -r _ _ _ pid _ <<<"$row"
			echo "$row,$(task_cgroup "$pid")"
		done >>"$out_dir/reclaim-throttle.csv"
}

throttle_hist_clear() {
	echo "$throttle_hist:clear" >>"$throttle_event/trigger" ||
		die "cannot clear the hist trigger on $throttle_event"
}

# The trace events the host enabled on the kernel command line
# (trace_event=sys:event,...), one "sys/event" per line.  The host
# enables every event a run uses at boot and nothing turns them off
# (lab/README.md, "Tracing"): disabling or enabling a tracepoint patches
# kernel text, and under TCG a text_poke while reclaim ran once panicked
# a guest on a stale int3.
boot_trace_events() {
	cmdline_value trace_event | tr ',' '\n' | tr ':' '/'
}

# The boot-enabled events stay enabled, but the top-level ring buffer
# records nothing: the lab's tools read hist triggers, which see events
# with recording off (trace_event_buffer_lock_reserve falls back to a
# temporary buffer for them), and nothing pays for formatting events
# that no one reads.
quiesce_tracing() {
	local t=/sys/kernel/tracing
	[ -d "$t/events" ] || return 0
	echo 0 >"$t/tracing_on" || die "cannot write $t/tracing_on"
	: >"$t/trace" || die "cannot clear $t/trace"
}

# start_sampler PARENT LEAF...: /proc/vmstat, the root and PARENT at
# SAMPLE_SLOW_MS (their rows feed phase deltas and the parent's rate
# line), the leaves' memory.stat and memory.current at SAMPLE_MS: the
# time series the plots draw.  The sampler-cost scenario measured why:
# under TCG /proc/vmstat alone at 10 Hz costs the guest about 1% of a CPU.
start_sampler() {
	local parent=$1
	shift
	lab-sampler -i "$SAMPLE_MS" -s "$SAMPLE_SLOW_MS" -r "$cgroot" \
		-o "$out_dir/samples.csv" -V -S / -S "$parent" "$@" 2>>"$out_dir/sampler.log" &
	sampler_pid=$!
}

stop_sampler() {
	kill -TERM "$sampler_pid" 2>/dev/null || true
	wait "$sampler_pid" || die "sampler failed: $(tail -n 3 "$out_dir/sampler.log")"
}

# A heartbeat on the console: progress for the user, and proof of life for
# the host's hang detector.
heartbeat() {
	local cg=$1 line="$phase: $1" key v
	# "immediate" exists with the patch series only.
	for key in inactive_file active_file immediate file_dirty file_writeback; do
		v=$(memcg_stat "$cg" "$key" || true)
		[ -n "$v" ] && line+=" $key=$((v >> 20))M"
	done
	say "$line"
}

# Who reclaimed whose pages during the measured phase (attribution.csv):
# from the patch series' tracepoint, or on a kernel without it from the
# vanilla vmscan events (the scanned cgroup is then "unknown"; the mode
# is in attribution.csv.meta).
attrib_pid=
start_attribution() {
	local i
	lab-reclaim-attrib -r "$cgroot" -o "${attrib_out:-$out_dir/attribution.csv}" \
		2>>"$out_dir/attribution.log" &
	attrib_pid=$!
	# Its hists are in place when it says so; a tool that failed to set
	# them up fails the run now, not after the phase it was to measure.
	for i in $(seq 150); do
		grep -q 'installed$' "$out_dir/attribution.log" 2>/dev/null && return 0
		kill -0 "$attrib_pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -TERM "$attrib_pid" 2>/dev/null || true
	wait "$attrib_pid" || true
	die "lab-reclaim-attrib did not say its hists were installed within 15 s: $(tail -n 3 "$out_dir/attribution.log")"
}

stop_attribution() {
	[ -n "$attrib_pid" ] || return 0
	kill -TERM "$attrib_pid" 2>/dev/null || true
	wait "$attrib_pid" || die "lab-reclaim-attrib failed: $(tail -n 3 "$out_dir/attribution.log")"
	attrib_pid=
}

# Where CPU time goes (SET="PROFILE_HZ=99", any scenario whose shape
# marks a span: writeback-cp each alloc, the dirty-neighbour shapes the
# measured phase): perf record -a -g samples every CPU's kernel and user
# stacks at PROFILE_HZ (cpu-clock: TCG has no PMU), and the span's report
# is kept as text, profile-TAG.txt, the samples (megabytes) removed.  A
# diagnosis, not a measurement: the sampling and the samples' file on the
# fast disk cost the guest CPU and page cache.  Off (0) by default.
check_profile() {
	[[ ${PROFILE_HZ:-0} =~ ^[0-9]+$ ]] ||
		die "PROFILE_HZ=$PROFILE_HZ is not a number of samples a second"
	[ "${PROFILE_HZ:-0}" = 0 ] || command -v perf >/dev/null ||
		die "PROFILE_HZ=$PROFILE_HZ needs perf in the guest (guest-rootfs/packages.list: linux-perf)"
}

start_profile() {
	[ "${PROFILE_HZ:-0}" != 0 ] || return 0
	perf record -a -g -F "$PROFILE_HZ" -q -o "/mnt/fast/perf-$1.data" \
		2>"$out_dir/profile-$1.log" &
	profile_pid=$!
}

# The report: the flat profile by task and symbol, then the symbols of
# the tasks named COMM... with their callers, as shares of those tasks'
# samples (a task that is mostly asleep has few of all).
finish_profile() {
	local tag=$1 data report comms rc=0
	[ "${PROFILE_HZ:-0}" != 0 ] || return 0
	shift
	data=/mnt/fast/perf-$tag.data
	report=$out_dir/profile-$tag.txt
	comms=$(IFS=,; echo "$*")
	kill -INT "$profile_pid"
	wait "$profile_pid" || rc=$?
	# perf record raises the SIGINT that stopped it again once its data
	# is written: 130 is its success here.
	[ "$rc" -eq 0 ] || [ "$rc" -eq 130 ] ||
		die "perf record failed (exit $rc): $(tail -n 3 "$out_dir/profile-$tag.log")"
	{
		echo "# perf record -a -g -F $PROFILE_HZ over $tag: by task and symbol"
		perf report -i "$data" --stdio --no-children --sort comm,sym -g none --percent-limit 0.5
		echo "# $comms, with callers; shares of their own samples"
		perf report -i "$data" --stdio --no-children --comms "$comms" \
			--percentage relative --sort comm,sym \
			-g graph,0.5,callee,function,percent --percent-limit 2
	} >"$report" 2>>"$out_dir/profile-$tag.log" || die "perf report of $data failed"
	rm -f "$data"
	say "$tag: profile in $(basename "$report")"
}
