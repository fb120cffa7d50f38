#!/bin/bash
# Runs inside the guest (started by memcg-lab-agent): resolves a scenario's
# parameters, prepares disks and cgroups, runs the scenario's shape and
# leaves everything in /results.  Shared over 9p, so editing it or a
# scenario needs no image rebuild.
#
#   guest-run.sh SCENARIO ARM
set -euo pipefail

LAB=/lab
OUT=/results
SCENARIO=$1
ARM=$2
SLICE=lab.slice
CGROOT=/sys/fs/cgroup

say() { echo "memcg-lab: [$(uptime_s)] $*"; }
die() { say "error: $*"; exit 1; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }

# Phase boundaries on the sampler's clock (CLOCK_BOOTTIME = /proc/uptime).
phase_begin() { PHASE=$1; PHASE_START=$(uptime_s); say "phase $PHASE begins"; }
phase_end() {
	echo "$PHASE,$PHASE_START,$(uptime_s)" >>"$OUT/phases.csv"
	say "phase $PHASE ends"
}

record_guest_provenance() {
	cp /proc/cmdline "$OUT/cmdline.txt"
	uname -a >"$OUT/uname.txt"
	sysctl -a >"$OUT/sysctl.txt" 2>/dev/null || true
	zcat /proc/config.gz >"$OUT/guest-kernel.config" 2>/dev/null ||
		echo "CONFIG_IKCONFIG_PROC not available" >"$OUT/guest-kernel.config"
	cp /proc/meminfo "$OUT/meminfo-start.txt"
	cp /proc/vmstat "$OUT/vmstat-start.txt"
	{
		echo "cgroup_fs=$(stat -fc %T "$CGROOT")"
		echo "lru_gen=$(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo absent)"
		echo "thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled)"
	} >"$OUT/guest-state.txt"
}

resolve_parameters() {
	MEM_MB=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
	# Host overrides (make scenario SET="...") come first: scenario files
	# only assign defaults with ${VAR:=...}.
	[ -f "$OUT/params.env" ] && . "$OUT/params.env"
	[ -f "$LAB/$SCENARIO.scenario" ] || die "no scenario $SCENARIO"
	. "$LAB/$SCENARIO.scenario"
	: "${SHAPE:?scenario does not set SHAPE}"
	declare -F "shape_${SHAPE//-/_}" >/dev/null || die "unknown SHAPE=$SHAPE"
	set | grep -E '^[A-Z][A-Z0-9_]*=' | grep -vE '^(BASH|EUID|PPID|UID|SHELLOPTS|PIPESTATUS|GROUPS|HOST|OPT|PWD|OLDPWD|IFS|PS[0-9]|HOME|PATH|TERM|SHLVL|LINENO|RANDOM|SECONDS|COLUMNS|LINES|MACHTYPE|HISTCMD|INVOCATION_ID|JOURNAL_STREAM|SYSTEMD_EXEC_PID|LANG|_)' \
		>"$OUT/params-resolved.env"
}

apply_arm() {
	case $ARM in
	vanilla) ;;
	mglru) echo y >/sys/kernel/mm/lru_gen/enabled ;;
	*) die "arm $ARM is not known to this runner" ;;
	esac
	echo "$ARM" >"$OUT/arm.txt"
}

apply_sysctls() {
	local kv
	for kv in ${SYSCTLS:-}; do
		sysctl -q -w "$kv" || die "sysctl $kv failed"
	done
}

# By serial, never by vdX: probe order is not an interface.  Read from
# sysfs so the agent need not wait for udev's by-id links.
disk_by_serial() {
	local f
	for f in /sys/block/*/serial; do
		[ "$(cat "$f")" = "$1" ] && { echo "/dev/$(basename "$(dirname "$f")")"; return; }
	done
	die "disk with serial $1 not found (is it attached?)"
}

# A deep queue keeps many folios under writeback at once, which is what
# fills the dirtier's inactive list with PG_writeback folios.
tune_queue() {
	local q
	q=/sys/block/$(basename "$1")/queue
	echo none >"$q/scheduler" 2>/dev/null || true
	# The block layer may refuse the hardware maximum (it must also fit
	# the device's segment limits): take the largest size it accepts.
	local kb
	kb=$(cat "$q/max_hw_sectors_kb")
	until echo "$kb" >"$q/max_sectors_kb" 2>/dev/null; do
		kb=$((kb / 2))
		[ "$kb" -ge 4 ] || die "cannot set max_sectors_kb on $1"
	done
	echo "${QUEUE_NR_REQUESTS:-1024}" >"$q/nr_requests" 2>/dev/null || true
	# With CONFIG_BLK_WBT=n the file exists but refuses writes: WBT is off.
	echo 0 >"$q/wbt_lat_usec" 2>/dev/null || true
	local f
	for f in scheduler nr_requests max_sectors_kb max_hw_sectors_kb wbt_lat_usec; do
		[ -f "$q/$f" ] && echo "$(basename "$1") $f $(cat "$q/$f" 2>/dev/null || echo unreadable)"
	done >>"$OUT/block-queue.txt"
}

make_fs() {
	local dev=$1 fs=$2 dir=$3
	case $fs in
	vfat) mkfs.vfat -F 32 "$dev" >/dev/null ;;
	ext4) mkfs.ext4 -q -F "$dev" ;;
	*) die "unsupported filesystem $fs" ;;
	esac
	mkdir -p "$dir"
	mount -t "$fs" "$dev" "$dir"
}

prepare_stick() {
	STICK_DEV=$(disk_by_serial lab-stick)
	tune_queue "$STICK_DEV"
	make_fs "$STICK_DEV" "${STICK_FS:-vfat}" /mnt/stick
}

prepare_fast() {
	FAST_DEV=$(disk_by_serial lab-fast)
	make_fs "$FAST_DEV" ext4 /mnt/fast
}

# The host owns the stick's QEMU throttle: ask on the console, wait for
# its answer in the results share (see lab/run-scenario.sh).
THROTTLE_REQUESTS=0
stick_throttle() {
	local want=$1 i
	THROTTLE_REQUESTS=$((THROTTLE_REQUESTS + 1))
	say "stick: throttle $want"
	for i in $(seq 100); do
		[ "$(cat "$OUT/stick-throttle.state" 2>/dev/null)" = "$want $THROTTLE_REQUESTS" ] && return 0
		sleep 0.1
	done
	die "the host did not answer stick throttle request $THROTTLE_REQUESTS ($want) in 10 s"
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

set_slice_limits() {
	systemctl set-property --runtime "$SLICE" "$@" ||
		die "systemctl set-property $SLICE $* failed"
}

start_sampler() {
	lab-sampler -i "${SAMPLE_MS:-1000}" -o "$OUT/samples.csv" "$@" \
		2>>"$OUT/sampler.log" &
	SAMPLER_PID=$!
}

stop_sampler() {
	kill -TERM "$SAMPLER_PID" 2>/dev/null || true
	wait "$SAMPLER_PID" || die "sampler failed: $(tail -n 3 "$OUT/sampler.log")"
}

memcg_stat() { awk -v k="$2" '$1 == k {print $2}' "$CGROOT/$1/memory.stat" 2>/dev/null; }

# A heartbeat on the console: progress for the user, and proof of life for
# the host's hang detector.
heartbeat() {
	local cg=$1 mb=$((1 << 20))
	say "$PHASE: $cg inactive_file=$(( $(memcg_stat "$cg" inactive_file || echo 0) / mb ))M" \
		"active_file=$(( $(memcg_stat "$cg" active_file || echo 0) / mb ))M" \
		"file_dirty=$(( $(memcg_stat "$cg" file_dirty || echo 0) / mb ))M" \
		"file_writeback=$(( $(memcg_stat "$cg" file_writeback || echo 0) / mb ))M"
}

# Runs a command in a transient scope under the lab slice, in the
# background; its systemd unit is NAME.scope.
run_in_scope() {
	local name=$1
	shift
	systemd-run --quiet --scope --collect --unit="$name" --slice="$SLICE" "$@" &
	eval "${name//-/_}_PID=$!"
}

wait_scope_exists() {
	local i
	for i in $(seq 50); do
		[ -d "$CGROOT/$SLICE/$1.scope" ] && return 0
		sleep 0.1
	done
	die "$1.scope did not appear under $SLICE"
}

lay_out_file() {
	dd if=/dev/zero of="$1" bs=1M count="$2" oflag=direct status=none ||
		die "cannot lay out $2M in $1"
}

# The dirtier: fio's buffered writer on the stick, in dirtier.scope.
start_dirtier() {
	export DIRTY_FILE=/mnt/stick/dirty.dat DIRTY_FILE_MB DIRTY_RUNTIME_S
	run_in_scope dirtier fio --output-format=json \
		--output="$OUT/fio-dirtier.json" "$LAB/fio/dirtier.fio"
	wait_scope_exists dirtier
}

# fio writes its JSON report on SIGINT, but a writer blocked behind a
# deep queue of a slow disk may take long to notice: wait a bounded time,
# with a heartbeat, then kill it and say so.
stop_dirtier() {
	local i
	systemctl kill --signal=SIGINT dirtier.scope 2>/dev/null || true
	for i in $(seq 60); do
		kill -0 "$dirtier_PID" 2>/dev/null || break
		[ $((i % 10)) -eq 0 ] && say "waiting for the dirtier to stop ($i s)"
		sleep 1
	done
	if kill -0 "$dirtier_PID" 2>/dev/null; then
		say "dirtier ignored SIGINT for 60 s: killed, its fio report is lost"
		systemctl kill --signal=SIGKILL dirtier.scope 2>/dev/null || true
		echo "dirtier killed after 60 s" >>"$OUT/notes.txt"
	fi
	wait "$dirtier_PID" || true
}

# --- shapes -------------------------------------------------------------

# A short end-to-end check of the whole lab: memcgs, sampler, fio on the
# throttled stick.
shape_smoke() {
	prepare_stick
	lay_out_file /mnt/stick/dirty.dat "$DIRTY_FILE_MB"
	drop_caches
	set_slice_limits MemoryMax="${PARENT_MAX_MB}M"
	stick_throttle on
	start_sampler "$SLICE" "$SLICE/dirtier.scope"
	phase_begin write
	start_dirtier
	cat "$CGROOT/$SLICE/memory.max" >"$OUT/parent-memory.max"
	ls -d "$CGROOT/$SLICE"/*.scope >"$OUT/cgroups-seen.txt"
	wait "$dirtier_PID" || die "dirtier fio failed"
	heartbeat "$SLICE"
	phase_end
	stop_sampler
}

# KS2012's case: a dirtier and a neighbour share a parent memory.max; the
# neighbour's allocations reclaim from a parent whose file LRU is mostly
# the dirtier's pages under writeback.
shape_dirty_neighbour() {
	prepare_stick
	prepare_fast
	say "laying out the neighbour's ${READ_FILE_MB}M read file"
	lay_out_file /mnt/fast/read.dat "$READ_FILE_MB"
	# The dirtier overwrites a file laid out beforehand at full speed: a
	# new file on vfat would make fio extend it, and fat_cont_expand()
	# zero-fills the whole size inside one write, behind the throttle,
	# where only SIGKILL reaches it.
	say "laying out the dirtier's ${DIRTY_FILE_MB}M file on the unthrottled stick"
	lay_out_file /mnt/stick/dirty.dat "$DIRTY_FILE_MB"
	apply_sysctls
	drop_caches
	stick_throttle on
	set_slice_limits MemoryMax="${PARENT_MAX_MB}M"
	start_sampler / "$SLICE" "$SLICE/dirtier.scope" "$SLICE/neighbour.scope"

	phase_begin ramp
	start_dirtier
	local cg=$SLICE/dirtier.scope t=0 wb
	while [ $t -lt "$RAMP_MAX_S" ]; do
		sleep 5
		t=$((t + 5))
		heartbeat "$cg"
		wb=$(memcg_stat "$cg" file_writeback || echo 0)
		[ $((wb >> 20)) -ge "$RAMP_WRITEBACK_MB" ] && break
	done
	phase_end

	phase_begin neighbour
	export READ_FILE=/mnt/fast/read.dat READ_FILE_MB NEIGHBOUR_S
	run_in_scope neighbour "$LAB/lib/neighbour.sh" "$OUT" \
		"$PROBE_MB" "$PROBE_INTERVAL_MS" "$NEIGHBOUR_S"
	wait_scope_exists neighbour
	ls -d "$CGROOT/$SLICE"/*.scope >"$OUT/cgroups-seen.txt"
	while kill -0 "$neighbour_PID" 2>/dev/null; do
		heartbeat "$cg"
		sleep 5
	done
	wait "$neighbour_PID" || die "neighbour failed"
	phase_end

	stop_dirtier
	stop_sampler
}

finish_run() {
	cp /proc/vmstat "$OUT/vmstat-end.txt"
	cp /proc/meminfo "$OUT/meminfo-end.txt"
	# Writeback drains at full speed: the clean shutdown must not wait
	# minutes for a 4 MB/s disk.
	say "measurement done: drain"
	stick_throttle off
	phase_begin drain
	sync
	phase_end
}

record_guest_provenance
resolve_parameters
apply_arm
say "running $SCENARIO (shape $SHAPE, arm $ARM, guest ${MEM_MB}M)"
"shape_${SHAPE//-/_}"
finish_run
say "scenario $SCENARIO done"
