# shellcheck shell=bash
# SHAPE=dirty-neighbour: shape_dirty_neighbour, then the helpers only it uses
# (lib/guest-run.sh sources this file).

# One dirtier (or clean reader, with DIRTIER_JOB) and a neighbour under
# the lab slice; the scenario's limits decide who reclaims: the parent
# (PARENT_MAX_MB), the dirtier itself (DIRTIER_MAX_MB) or the whole
# machine (neither).
# With NR_DIRTIERS (the dirty-many scenario), that many dirtiers, each
# in its own scope (dirtier-1 ...) overwriting its own file; the
# heartbeat shows the first.  Without it, one, named dirtier.
# With SAMPLER_COST_CONFIGS (the sampler-cost scenario), the neighbour
# phase also measures lab-sampler's own cost (measure_sampler_configs).
# With PIN_MB (the pinned-floor scenario) the "dirtier" writes nothing:
# it holds PIN_MB of tmpfs, memory reclaim cannot take without swap, in
# place of the writeback a real dirtier holds (start_pinned_dirtier).
shape_dirty_neighbour() {
	local nb i names=(dirtier) cgs=() dirtier_props=() stop_signal=SIGINT
	[ -z "${SAMPLER_COST_CONFIGS:-}" ] || check_sampler_configs
	if [ -n "${NR_DIRTIERS:-}" ]; then
		[[ $NR_DIRTIERS =~ ^[1-9][0-9]*$ ]] || die "NR_DIRTIERS=$NR_DIRTIERS is not a positive number"
		[ -z "${PIN_MB:-}" ] || die "PIN_MB holds one pinned dirtier; NR_DIRTIERS=$NR_DIRTIERS asks for several"
		names=()
		for i in $(seq "$NR_DIRTIERS"); do
			names+=("dirtier-$i")
		done
	fi
	for i in "${names[@]}"; do
		cgs+=("$(cg_of "$i")")
	done
	nb=$(cg_of neighbour)
	prepare_disks "$([ -n "${PIN_MB:-}" ] && echo 0 || echo "${#names[@]}")"
	[ -n "${PARENT_MAX_MB:-}" ] && set_parent_limit "$PARENT_MAX_MB"
	[ -n "${DIRTIER_MAX_MB:-}" ] && dirtier_props=(MemoryMax="${DIRTIER_MAX_MB}M")
	start_sampler "$slice" "${cgs[@]}" "$nb"
	if [ -n "${PIN_MB:-}" ]; then
		start_pinned_dirtier dirtier "${dirtier_props[@]}"
		ramp_until_pinned "${cgs[0]}"
	else
		for i in "${!names[@]}"; do
			start_dirtier "${names[i]}" "/mnt/stick/dirty-$((i + 1)).dat" \
				"${DIRTIER_JOB:-dirtier.fio}" "${dirtier_props[@]}"
		done
		ramp_until_writeback "${cgs[@]}"
	fi
	start_neighbour_phase
	[ -z "${SAMPLER_COST_CONFIGS:-}" ] || measure_sampler_configs "$slice" "${cgs[@]}" "$nb"
	[ -z "${STICK_STUCK_AFTER_S:-}" ] || stick_stuck_after "$STICK_STUCK_AFTER_S"
	finish_neighbour_phase "${cgs[0]}"
	# Unstuck, so that the dirtier can stop.
	stick_unstick
	# The pinned member's dd and sleep were started in the background:
	# SIGINT is ignored there.
	[ -z "${PIN_MB:-}" ] || stop_signal=SIGTERM
	for i in "${names[@]}"; do
		stop_scope "$i" "$stop_signal"
	done
	stop_sampler
}

# The floor's footprint: PIN_MB written to a tmpfs file from member NAME
# (charged to its memcg), held until the member is stopped.  tmpfs is
# swap-backed and the guest has no swap, so reclaim never scans it: the
# neighbour meets the same full parent as beside a dirtier whose file
# pages are all under writeback, with nothing a reclaim policy can do.
start_pinned_dirtier() {
	local name=$1
	shift
	mkdir -p /mnt/pin
	mount -t tmpfs -o "size=$((PIN_MB + 16))M" lab-pin /mnt/pin || die "cannot mount tmpfs on /mnt/pin"
	# shellcheck disable=SC2016 # expanded by the scope's bash
	run_in_scope "$name" "$@" -- bash -c \
		'dd if=/dev/zero of=/mnt/pin/pin.dat bs=1M count="$1" status=none && exec sleep infinity' \
		pin "$PIN_MB"
}

# Until the pinned member holds PIN_MB (memory.stat shmem), or RAMP_MAX_S.
ramp_until_pinned() {
	ramp_until 1 shmem "$PIN_MB" "$1"
	say "pinned: $(memcg_stat_mb shmem "$1")M of tmpfs in $1"
}

# Before minutes of setup, not when a bad name's turn comes.
check_sampler_configs() {
	local cfg args cgs dir
	for cfg in $SAMPLER_COST_CONFIGS; do
		sampler_cost_config "$cfg" / ||
			die "unknown sampler configuration '$cfg' in SAMPLER_COST_CONFIGS (the names: measure_sampler_configs in scenarios/shapes/dirty-neighbour.sh)"
	done
}

# lab-sampler run SAMPLER_COST_ROUNDS times in each configuration of
# SAMPLER_COST_CONFIGS, SAMPLER_COST_S seconds each, on the cgroups the
# run's own sampler reads (PARENT, then leaves), the order rotated every
# round so that drift in the load is shared out.  A row per run in
# sampler-cost.csv with the sampler's exit line, which the analysis
# parses (run.parse_sampler_cost), as sampler.log's.  Each writes its rows
# where the run's sampler does (writing them is part of the cost); only
# their count is kept.
#   all-fast      every file of every cgroup at SAMPLER_COST_MS
#   slow-files    cpu.stat, io.stat, memory.events/pressure at SAMPLER_COST_SLOW_MS
#   slow-parents  slow-files, and the root and PARENT wholly at SAMPLER_COST_SLOW_MS
#   slow-parents-tmpfs  slow-parents writing to /run (tmpfs), not the 9p share
#   slow-vmstat   slow-parents, and /proc/vmstat at SAMPLER_COST_SLOW_MS
#                 (what start_sampler does)
#   vmstat-only   /proc/vmstat alone at SAMPLER_COST_MS
#   all-slow      every file of every cgroup at SAMPLER_COST_SLOW_MS
# (sampler-cost.scenario's default lists them all: a choice, as its
# length sets the run's length there.)
measure_sampler_configs() {
	local parent=$1 configs=() n round i cfg pid log csv dir rows line args=() cgs=()
	shift
	read -ra configs <<<"$SAMPLER_COST_CONFIGS"
	n=${#configs[@]}
	[ "$n" -gt 0 ] || die "SAMPLER_COST_CONFIGS is empty"
	echo "round,config,args,rows,exit_line" >"$out_dir/sampler-cost.csv"
	for round in $(seq "$SAMPLER_COST_ROUNDS"); do
		for i in $(seq 0 $((n - 1))); do
			cfg=${configs[$(((i + round - 1) % n))]}
			sampler_cost_config "$cfg" "$parent" "$@" ||
				die "unknown sampler configuration '$cfg'"
			say "sampler cost: round $round of $SAMPLER_COST_ROUNDS, $cfg (${args[*]}), ${SAMPLER_COST_S} s"
			csv=$dir/sampler-cost-$round-$cfg.csv
			log=$out_dir/sampler-cost-$round-$cfg.log
			lab-sampler "${args[@]}" -r "$cgroot" -o "$csv" "${cgs[@]}" 2>"$log" &
			pid=$!
			sleep "$SAMPLER_COST_S"
			kill -TERM "$pid"
			wait "$pid" || die "lab-sampler ($cfg) failed: $(tail -n 3 "$log")"
			rows=$(($(wc -l <"$csv") - 1))
			rm -f "$csv"
			line=$(grep '^lab-sampler: cost ' "$log") || die "$log: no exit line"
			echo "$round,$cfg,${args[*]},$rows,\"$line\"" >>"$out_dir/sampler-cost.csv"
			cat "$log" >>"$out_dir/sampler-cost.log"
			rm -f "$log"
		done
	done
}

# Sets args (lab-sampler's options), cgs (its cgroups) and dir (where it
# writes) for sampler configuration $1 on PARENT $2 and leaves $3...:
# the one list of the configurations' names.  Fails for another name.
sampler_cost_config() {
	local cfg=$1 parent=$2
	shift 2
	cgs=(/ "$parent" "$@")
	dir=$out_dir
	case $cfg in
	all-fast) args=(-i "$SAMPLER_COST_MS") ;;
	slow-files) args=(-i "$SAMPLER_COST_MS" -s "$SAMPLER_COST_SLOW_MS") ;;
	slow-parents | slow-parents-tmpfs)
		args=(-i "$SAMPLER_COST_MS" -s "$SAMPLER_COST_SLOW_MS" -S / -S "$parent")
		cgs=("$@")
		[ "$cfg" = slow-parents ] || dir=/run
		;;
	slow-vmstat)
		args=(-i "$SAMPLER_COST_MS" -s "$SAMPLER_COST_SLOW_MS" -V -S / -S "$parent")
		cgs=("$@")
		;;
	vmstat-only)
		args=(-i "$SAMPLER_COST_MS")
		cgs=()
		;;
	all-slow) args=(-i "$SAMPLER_COST_SLOW_MS") ;;
	*) return 1 ;;
	esac
}
