# shellcheck shell=bash
# SHAPE=dirty-many: shape_dirty_many (lib/guest-run.sh sources this file).

# NR_DIRTIERS dirtiers in their own scopes (dirtier-1 ...) and one
# neighbour share the parent limit.
shape_dirty_many() {
	local i cgs=() names=()
	for i in $(seq "$NR_DIRTIERS"); do
		names+=("dirtier-$i")
		cgs+=("$(cg_of "dirtier-$i")")
	done
	prepare_disks "$NR_DIRTIERS"
	set_parent_limit "$PARENT_MAX_MB"
	start_sampler "$slice" "${cgs[@]}" "$(cg_of neighbour)"
	for i in $(seq "$NR_DIRTIERS"); do
		start_dirtier "dirtier-$i" "/mnt/stick/dirty-$i.dat"
	done
	ramp_until_writeback "${cgs[@]}"
	run_neighbour_phase "${cgs[0]}"
	for i in "${names[@]}"; do
		stop_scope "$i"
	done
	stop_sampler
}
