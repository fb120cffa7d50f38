# shellcheck shell=bash
# SHAPE=smoke: shape_smoke (lib/guest-run.sh sources this file).

# A short end-to-end check of the whole lab: memcgs, sampler, fio on the
# throttled stick.
shape_smoke() {
	prepare_stick
	lay_out_file /mnt/stick/dirty-1.dat "$DIRTY_FILE_MB"
	drop_caches
	set_parent_limit "$PARENT_MAX_MB"
	stick_throttle on
	start_sampler "$slice" "$(cg_of dirtier)"
	phase_begin write measured
	start_dirtier dirtier /mnt/stick/dirty-1.dat
	cat "$cgroot/$slice/memory.max" >"$out_dir/parent-memory.max"
	list_members >"$out_dir/cgroups-seen.txt"
	wait "${scope_pid[dirtier]}" || die "dirtier fio failed"
	heartbeat "$slice"
	phase_end
	stop_sampler
	# The boot test of the host's hang dump: a guest that says nothing.
	[ "${SILENT_S:-0}" -eq 0 ] || sleep "$SILENT_S"
}
