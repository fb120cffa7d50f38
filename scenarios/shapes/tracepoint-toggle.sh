# shellcheck shell=bash
# SHAPE=tracepoint-toggle: shape_tracepoint_toggle, then the helpers only it uses
# (lib/guest-run.sh sources this file).

# tracepoint-toggle: TOGGLE_ROUNDS on/off cycles of tracing (TOGGLE_MODE
# enable: the event enable files; tracing-on: tracing_on and hist
# triggers; attribution: lab-reclaim-attrib started and stopped, a
# benchmark of its cost) while a dirtier under the parent limit keeps
# memcg reclaim running.  A guest that panics is the host's verdict
# (kernel trouble); toggles.csv says how many cycles it completed first.
shape_tracepoint_toggle() {
	local cg round toggle t0 ev
	case $TOGGLE_MODE in
	enable) toggle=toggle_event_enable ;;
	tracing-on) toggle=toggle_tracing_on ;;
	attribution) toggle=toggle_attribution ;;
	*) die "TOGGLE_MODE=$TOGGLE_MODE: enable, tracing-on or attribution" ;;
	esac
	if [ -n "${TOGGLE_EVENTS:-}" ]; then
		read -ra TOGGLE_EVENT_LIST <<<"$TOGGLE_EVENTS"
	else
		mapfile -t TOGGLE_EVENT_LIST < <(boot_trace_events)
	fi
	[ "${#TOGGLE_EVENT_LIST[@]}" -gt 0 ] ||
		die "no events to toggle: TOGGLE_EVENTS is empty and the kernel command line has no trace_event="
	for ev in "${TOGGLE_EVENT_LIST[@]}"; do
		[ -f "/sys/kernel/tracing/events/$ev/enable" ] || die "no event $ev in /sys/kernel/tracing/events"
		echo "$ev enable=$(cat "/sys/kernel/tracing/events/$ev/enable")"
	done >"$out_dir/toggle-events.txt"
	if [ "$TOGGLE_MODE" != enable ]; then
		! grep -q 'enable=0' "$out_dir/toggle-events.txt" ||
			die "TOGGLE_MODE=$TOGGLE_MODE wants every event enabled from boot: $(grep 'enable=0' "$out_dir/toggle-events.txt" | tr '\n' ' ')"
	fi
	cg=$(cg_of dirtier)
	prepare_stick
	lay_out_file /mnt/stick/dirty-1.dat "$DIRTY_FILE_MB"
	apply_sysctls
	drop_caches
	set_parent_limit "$PARENT_MAX_MB"
	stick_throttle on
	start_sampler "$slice" "$cg"
	start_dirtier dirtier /mnt/stick/dirty-1.dat
	ramp_until_writeback "$cg"
	phase_begin toggle measured
	# The lab's own attribution over the phase in tracing-on mode (its
	# coverage of pgscan is checked by the boot test).  Not in enable
	# mode: its triggers keep the events soft-enabled, and writing 0 to
	# an enable file would then patch nothing.
	[ "$TOGGLE_MODE" != tracing-on ] || start_attribution
	echo "round,mode,start_s,end_s,dirtier_pgscan" >"$out_dir/toggles.csv"
	for round in $(seq "$TOGGLE_ROUNDS"); do
		t0=$(uptime_s)
		"$toggle" 1
		sleep "$TOGGLE_ON_S"
		"$toggle" 0
		sleep "$TOGGLE_OFF_S"
		echo "$round,$TOGGLE_MODE,$t0,$(uptime_s),$(memcg_stat "$cg" pgscan)" >>"$out_dir/toggles.csv"
		if [ $((round % 10)) -eq 0 ]; then
			say "toggle round $round of $TOGGLE_ROUNDS ($TOGGLE_MODE)"
			heartbeat "$cg"
		fi
		scope_running dirtier || die "the dirtier ended after $round toggle rounds"
	done
	[ "$TOGGLE_MODE" != attribution ] || record_toggle_cost 1
	stop_attribution
	phase_end
	stop_scope dirtier
	stop_sampler
}

# What the lab's tools toggle: the top-level ring buffer's recording
# (tracing_on) and hist triggers on events that stay enabled.  Neither
# registers nor unregisters a tracepoint probe, so no static key flips.
# Appended (>>): opening a trigger file with O_TRUNC removes every
# trigger of the event.
toggle_tracing_on() {
	local state=$1 ev trig=/sys/kernel/tracing/events
	echo "$state" >/sys/kernel/tracing/tracing_on
	for ev in "${TOGGLE_EVENT_LIST[@]}"; do
		if [ "$state" = 1 ]; then
			echo 'hist:keys=common_pid' >>"$trig/$ev/trigger"
		else
			echo '!hist:keys=common_pid' >>"$trig/$ev/trigger"
		fi
	done
}

# What lab-reclaim-attrib did until the fix: each event's enable file,
# which registers (1) or unregisters (0) its probe and so flips the
# tracepoint's static key: text_poke_bp() on every call site.
toggle_event_enable() {
	local state=$1 ev
	for ev in "${TOGGLE_EVENT_LIST[@]}"; do
		echo "$state" >"/sys/kernel/tracing/events/$ev/enable"
	done
}

# The lab's attribution itself, on (1) and off (0): the cost of its hist
# triggers, paid by whoever reclaims (toggle-cost.csv).
attrib_round=0
toggle_attribution() {
	record_toggle_cost "$1"
	if [ "$1" = 1 ]; then
		attrib_round=$((attrib_round + 1))
		attrib_out=$out_dir/attribution-round-$attrib_round.csv start_attribution
	else
		stop_attribution
	fi
}

# A row of toggle-cost.csv at each switch: the dirtier's pages scanned and
# system CPU so far; windows between rows are "on" or "off".
record_toggle_cost() {
	local cg
	cg=$(cg_of dirtier)
	[ -f "$out_dir/toggle-cost.csv" ] || echo "time_s,next_window,pgscan,system_usec" >"$out_dir/toggle-cost.csv"
	echo "$(uptime_s),$([ "$1" = 1 ] && echo on || echo off),$(memcg_stat "$cg" pgscan),$(awk '$1 == "system_usec" {print $2}' "$cgroot/$cg/cpu.stat")" \
		>>"$out_dir/toggle-cost.csv"
}
