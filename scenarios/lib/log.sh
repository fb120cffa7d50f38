# shellcheck shell=bash
# The runner's console and phases (sourced by guest-run.sh; its header
# says what API and Private mean).
#
# API:
#   say WORDS...          a console line "memcg-lab: [uptime] WORDS"
#   die WORDS...          say "error: WORDS", kill the members still
#                         running, lift the stick's throttle, exit 1
#   uptime_s              seconds since boot, the sampler's clock
#   phase_begin NAME [measured]  begin phase NAME (phase, phase_start);
#                         the instruments start their per-phase hists;
#                         "measured": the phase the run measures, one per
#                         run (guest-state.txt measured_phase)
#   phase_end             end phase: its row of phases.csv, the hists read

say() { echo "memcg-lab: [$(uptime_s)] $*"; }
die() {
	say "error: $*"
	# The agent syncs before the guest shuts down: a stick still
	# throttled (or stuck) under a dirtier that still runs would hold
	# that sync for minutes, and the host would call the guest hung.
	# The workloads are killed and the throttle lifted; once only, as
	# stick_throttle dies when the host does not answer.
	if [ -z "${dying:-}" ]; then
		dying=1
		local name
		for name in "${!scope_pid[@]}"; do
			! scope_running "$name" || signal_member "$name" SIGKILL
		done
		[ "${stick_throttle:-off}" = off ] || stick_throttle off
	fi
	exit 1
}
uptime_s() { cut -d' ' -f1 /proc/uptime; }

# Phase boundaries on the sampler's clock (CLOCK_BOOTTIME = /proc/uptime).
phase_begin() {
	phase=$1
	# Declared by the shape, so that the analysis need not guess which
	# phase the run measures from the phases' names and lengths.
	if [ "${2:-}" = measured ]; then
		[ -z "${measured_phase:-}" ] ||
			die "phase $1 declared measured after phase $measured_phase"
		measured_phase=$1
		echo "measured_phase=$1" >>"$out_dir/guest-state.txt"
	fi
	throttle_hist_start
	lock_hist_start
	phase_start=$(uptime_s)
	record_stick_bdi begin
	say "phase $phase begins"
}
phase_end() {
	echo "$phase,$phase_start,$(uptime_s)" >>"$out_dir/phases.csv"
	record_stick_bdi end
	throttle_hist_take
	lock_hist_take
	say "phase $phase ends"
}
