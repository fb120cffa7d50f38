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
# Set by choose_cgroup_mode: the hierarchy the guest booted with decides.
SLICE=
CGROOT=/sys/fs/cgroup

say() { echo "memcg-lab: [$(uptime_s)] $*"; }
die() {
	say "error: $*"
	# The agent syncs before the guest shuts down: a stick still
	# throttled (or stuck) under a dirtier that still runs would hold
	# that sync for minutes, and the host would call the guest hung.
	# The workloads are killed and the throttle lifted; once only, as
	# stick_throttle dies when the host does not answer.
	if [ -z "${DYING:-}" ]; then
		DYING=1
		local name
		for name in "${!SCOPE_PID[@]}"; do
			! scope_running "$name" || signal_member "$name" SIGKILL
		done
		[ "${STICK_THROTTLE:-off}" = off ] || stick_throttle off
	fi
	exit 1
}
uptime_s() { cut -d' ' -f1 /proc/uptime; }

# Phase boundaries on the sampler's clock (CLOCK_BOOTTIME = /proc/uptime).
phase_begin() {
	PHASE=$1
	throttle_hist_start
	lock_hist_start
	PHASE_START=$(uptime_s)
	record_stick_bdi begin
	say "phase $PHASE begins"
}
phase_end() {
	echo "$PHASE,$PHASE_START,$(uptime_s)" >>"$OUT/phases.csv"
	record_stick_bdi end
	throttle_hist_take
	lock_hist_take
	say "phase $PHASE ends"
}

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
LOCK_EVENT=/sys/kernel/tracing/events/lock/contention_begin
# A trigger's filter comes last, after any :clear or :pause.
LOCK_HIST='hist:keys=stacktrace:vals=hitcount:size=4096'
LOCK_FILTER='if flags == 1'
lock_hist_start() {
	case ${LOCK_HIST_STATE:-} in
	on) echo "$LOCK_HIST:clear $LOCK_FILTER" >>"$LOCK_EVENT/trigger" ||
		die "cannot clear the hist trigger on $LOCK_EVENT"
		return 0 ;;
	off) return 0 ;;
	esac
	LOCK_HIST_STATE=off
	boot_trace_events | grep -qx lock/contention_begin || return 0
	echo "$LOCK_HIST $LOCK_FILTER" >>"$LOCK_EVENT/trigger" ||
		die "cannot set a hist trigger on $LOCK_EVENT"
	LOCK_HIST_STATE=on
	echo "phase,contentions,stack" >"$OUT/lock-contention.csv"
}
lock_hist_take() {
	[ "${LOCK_HIST_STATE:-}" = on ] || return 0
	awk -v phase="$PHASE" '
		/^\{ stacktrace:/ { stack = ""; inside = 1; next }
		inside && /^\} hitcount:/ {
			printf "%s,%s,%s\n", phase, $3, stack
			inside = 0; next
		}
		inside && NF { f = $1; sub(/\+.*/, "", f); stack = stack (stack == "" ? "" : ";") f }
		# Stacks the full table could not take: counted, never lost.
		/^ *Dropped: *[1-9]/ { printf "%s,%s,(dropped: the hist table was full)\n", phase, $2 }
	' "$LOCK_EVENT/hist" >>"$OUT/lock-contention.csv"
}

# The stick's writeback state in the kernel's bdi debugfs file, at every
# phase boundary: bdi-stick.csv (phase, event, uptime_s, key, value in
# kB or kBps).  The flusher's chunk is half BdiWriteBandwidth: is the
# estimate the stick's rate, and do dirty limits move (lab/README.md)?
record_stick_bdi() {
	[ -n "${STICK_DEV:-}" ] || return 0
	local stats
	stats=/sys/kernel/debug/bdi/$(cat "/sys/block/$(basename "$STICK_DEV")/dev")/stats
	[ -r "$stats" ] || return 0
	[ -f "$OUT/bdi-stick.csv" ] || echo "phase,event,uptime_s,key,value" >"$OUT/bdi-stick.csv"
	awk -F: -v p="$PHASE" -v e="$1" -v t="$(uptime_s)" \
		'NF == 2 && $2 ~ /^ *[0-9]+ *k?B?p?s?$/ { gsub(/ /, "", $1); split($2, v, " "); print p "," e "," t "," $1 "," v[1] }' \
		"$stats" >>"$OUT/bdi-stick.csv"
}

# Time in reclaim_throttle() per phase, by reason and task: where
# reclaim that does not scan spends its time instead (the series' parked
# folios are not scanned; reclaim throttles as if it had met them, and
# waits for them before an OOM, reason "parked").  A hist trigger on
# vmscan:mm_vmscan_throttled, cleared at every phase begin and read at its
# end into reclaim-throttle.csv; reason is the event's bit (1 << enum
# vmscan_throttle_state).
THROTTLE_EVENT=/sys/kernel/tracing/events/vmscan/mm_vmscan_throttled
THROTTLE_HIST='hist:keys=reason,common_pid.execname:vals=hitcount,usec_delayed'
throttle_hist_start() {
	case ${THROTTLE_HIST_STATE:-} in
	on) throttle_hist_clear; return 0 ;;
	unavailable) return 0 ;;
	esac
	# On an event not enabled at boot the trigger would enable it, which
	# patches kernel text under load (boot_trace_events).
	if [ "$(head -c 1 "$THROTTLE_EVENT/enable" 2>/dev/null)" != 1 ]; then
		THROTTLE_HIST_STATE=unavailable
		echo "not available: $THROTTLE_EVENT is not enabled (trace_event= on the kernel command line)" \
			>"$OUT/reclaim-throttle.csv"
	elif echo "$THROTTLE_HIST" >>"$THROTTLE_EVENT/trigger" 2>/dev/null; then
		THROTTLE_HIST_STATE=on
		echo "phase,reason,comm,pid,sleeps,delayed_us,cgroup" >"$OUT/reclaim-throttle.csv"
	else
		THROTTLE_HIST_STATE=unavailable
		echo "not available: cannot set a hist trigger on $THROTTLE_EVENT" \
			>"$OUT/reclaim-throttle.csv"
	fi
}
throttle_hist_take() {
	[ "${THROTTLE_HIST_STATE:-}" = on ] || return 0
	sed -nE 's/^\{ reason: *([0-9]+), common_pid: *(.*[^ ]) *\[ *([0-9]+)\] *\} hitcount: *([0-9]+) *usec_delayed: *([0-9]+).*/\1 \3 \4 \5 \2/p' \
		"$THROTTLE_EVENT/hist" |
		awk -v phase="$PHASE" '{
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
		done >>"$OUT/reclaim-throttle.csv"
}

# The cgroup of task PID relative to the hierarchy's root (v2, or the
# memory controller's on v1), "-" once it has exited.
task_cgroup() {
	local cg
	cg=$(sed -n -e 's/^0:://p' -e 's/^[0-9]*:memory://p' "/proc/$1/cgroup" 2>/dev/null | head -n 1) || true
	case $cg in
	"") echo - ;;
	/) echo / ;;
	*) echo "${cg#/}" ;;
	esac
}
throttle_hist_clear() {
	echo "$THROTTLE_HIST:clear" >>"$THROTTLE_EVENT/trigger" ||
		die "cannot clear the hist trigger on $THROTTLE_EVENT"
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

# The value of kernel parameter $1 (its last, as the kernel takes it).
cmdline_value() {
	tr ' ' '\n' </proc/cmdline | sed -n "s/^$1=//p" | tail -n 1
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

record_guest_provenance() {
	cp /proc/cmdline "$OUT/cmdline.txt"
	uname -a >"$OUT/uname.txt"
	sysctl -a >"$OUT/sysctl.txt" 2>/dev/null || true
	zcat /proc/config.gz >"$OUT/guest-kernel.config" 2>/dev/null ||
		echo "CONFIG_IKCONFIG_PROC not available" >"$OUT/guest-kernel.config"
	cp /proc/meminfo "$OUT/meminfo-start.txt"
	cp /proc/vmstat "$OUT/vmstat-start.txt"
	dpkg-query -W -f='${Package} ${Version}\n' >"$OUT/rootfs-packages.txt" 2>/dev/null ||
		echo "dpkg-query failed" >"$OUT/rootfs-packages.txt"
	{
		echo "cgroup_fs=$(stat -fc %T "$CGROOT")"
		echo "lru_gen=$(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo absent)"
		echo "thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled)"
		echo "cpus_online=$(nproc)"
		# tsc, or jiffies (1 ms) when the TSC was dropped: see host_tsc_khz
		# in lab/run-scenario.sh.
		echo "clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
		echo "boot_trace_events=$(boot_trace_events | paste -sd' ')"
	} >"$OUT/guest-state.txt"
}

resolve_parameters() {
	MEM_MB=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
	# Host overrides (make scenario SET="...") come first: scenario files
	# only assign defaults with ${VAR:=...}.
	[ -f "$OUT/params.env" ] && . "$OUT/params.env"
	[ -f "$LAB/$SCENARIO.scenario" ] || die "no scenario $SCENARIO"
	SCENARIO_DIR=$LAB
	. "$LAB/$SCENARIO.scenario"
	: "${SHAPE:?scenario does not set SHAPE}"
	# The host's -smp (params.env): a guest that brought up fewer CPUs
	# would measure a uniprocessor kernel without saying so.
	[ -z "${GUEST_CPUS:-}" ] || [ "$(nproc)" -eq "$GUEST_CPUS" ] ||
		die "the guest runs $(nproc) CPUs; the host gave it GUEST_CPUS=$GUEST_CPUS"
	# The sampler's interval, recorded with its cost (sampler.log), and
	# that of its slow files (cpu.stat, io.stat, memory.events,
	# memory.pressure): the least multiple of SAMPLE_MS that is >= 1 s.
	: "${SAMPLE_MS:=1000}"
	[[ $SAMPLE_MS =~ ^[1-9][0-9]*$ ]] || die "SAMPLE_MS=$SAMPLE_MS is not a whole number of ms"
	: "${SAMPLE_SLOW_MS:=$(((999 / SAMPLE_MS + 1) * SAMPLE_MS))}"
	[[ $SAMPLE_SLOW_MS =~ ^[1-9][0-9]*$ ]] && ((SAMPLE_SLOW_MS % SAMPLE_MS == 0)) ||
		die "SAMPLE_SLOW_MS=$SAMPLE_SLOW_MS is not a multiple of SAMPLE_MS=$SAMPLE_MS"
	declare -F "shape_${SHAPE//-/_}" >/dev/null || die "unknown SHAPE=$SHAPE"
	set | grep -E '^[A-Z][A-Z0-9_]*=' | grep -vE '^(BASH|EUID|PPID|UID|SHELLOPTS|PIPESTATUS|GROUPS|HOST|OPT|PWD|OLDPWD|IFS|PS[0-9]|HOME|PATH|TERM|SHLVL|LINENO|RANDOM|SECONDS|COLUMNS|LINES|MACHTYPE|HISTCMD|INVOCATION_ID|JOURNAL_STREAM|SYSTEMD_EXEC_PID|LANG|_)' \
		>"$OUT/params-resolved.env"
}

WRITEBACK_POLICY=/proc/sys/vm/reclaim_writeback_policy
# An arm writes one value into one kernel file, or nothing (the table's
# guest_write).  The host refuses an arm the kernel cannot run before
# the boot (check_arm_runs_on_kernel, on its .config and System.map);
# the guest checks again on the running kernel, and names what is
# missing, rather than measure under the wrong policy.
apply_arm() {
	local problem write file value
	# The arms table (/lab/arms.tsv) and its reader, loaded here, their
	# one user, so that sourcing this file (as tests do) needs no /lab.
	. "$LAB/lib/arms.sh"
	problem=$(arm_name_problem "$ARM") || die "$problem"
	write=${ARM_GUEST_WRITE[$ARM]}
	if [ "$write" != - ]; then
		file=${write%%=*} value=${write#*=}
		[ -e "$file" ] ||
			die "arm $ARM writes $file, which this kernel does not have (it needs ${ARM_KERNEL_NEEDS[$ARM]})"
		echo "$value" >"$file" ||
			die "the kernel refused $value in $file (arm $ARM needs ${ARM_KERNEL_NEEDS[$ARM]})"
	fi
	{
		echo "arm=$ARM"
		echo "lru_gen=$(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo absent)"
		echo "reclaim_writeback_policy=$(cat "$WRITEBACK_POLICY" 2>/dev/null || echo absent)"
	} >"$OUT/arm.txt"
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
	# The request size bounds how much writeback one completion ends.
	# virtio-blk's hardware maximum is unbounded, and a USB stick's
	# transfers are not (usb-storage: 120 KiB at USB 2, 1 MiB at USB 3):
	# QUEUE_MAX_SECTORS_KB, 512 unless a scenario says otherwise.  The
	# block layer may refuse a size (it must also fit the device's
	# segment limits): take the largest it accepts.
	local kb
	kb=$(cat "$q/max_hw_sectors_kb")
	[ "${QUEUE_MAX_SECTORS_KB:-512}" -ge "$kb" ] || kb=${QUEUE_MAX_SECTORS_KB:-512}
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
	xfs) mkfs.xfs -q -f "$dev" ;;
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
		if [ "$(cat "$OUT/stick-throttle.state" 2>/dev/null)" = "$want $THROTTLE_REQUESTS" ]; then
			STICK_THROTTLE=$want
			return 0
		fi
		sleep 0.1
	done
	die "the host did not answer stick throttle request $THROTTLE_REQUESTS ($want) in 10 s"
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# The stick all but stops completing writes (the host's STICK_STUCK_BPS)
# this many seconds into the phase: a device that never completes, for
# reclaim that waits on writeback.  Does every wait end, and does an OOM
# come, within a bound?
stick_stuck_after() {
	sleep "$1"
	stick_throttle stuck
}

# Cleared first: stick_throttle dies on a host that does not answer, and
# die unsticks.
stick_unstick() {
	[ "${STICK_THROTTLE:-off}" = stuck ] || return 0
	stick_throttle off
}

# cgroup v2 (the default): systemd's lab.slice with transient scopes.
# cgroup v1 (booted with systemd.unified_cgroup_hierarchy=0): memcgs made
# with cgroup-tools under the memory controller's own mount.  Shapes only
# use the functions below, so one shape runs on both.
choose_cgroup_mode() {
	if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
		CGROUP_MODE=v2
		CGROOT=/sys/fs/cgroup
		SLICE=lab.slice
		KEY_DIRTY=file_dirty
		KEY_WRITEBACK=file_writeback
	else
		CGROUP_MODE=v1
		CGROOT=/sys/fs/cgroup/memory
		SLICE=memcg-lab
		KEY_DIRTY=dirty
		KEY_WRITEBACK=writeback
		[ -d "$CGROOT" ] || die "cgroup v1 without a memory controller mount at $CGROOT"
		cgcreate -g "memory:$SLICE" || die "cgcreate -g memory:$SLICE failed"
	fi
	echo "cgroup_mode=$CGROUP_MODE parent=$SLICE" >>"$OUT/guest-state.txt"
}

# The cgroup path (relative to CGROOT) of member NAME of the lab parent.
cg_of() {
	if [ "$CGROUP_MODE" = v2 ]; then
		echo "$SLICE/$1.scope"
	else
		echo "$SLICE/$1"
	fi
}

# MemoryMax of the parent, in MiB.
set_parent_limit() {
	if [ "$CGROUP_MODE" = v2 ]; then
		systemctl set-property --runtime "$SLICE" MemoryMax="$1M" ||
			die "systemctl set-property $SLICE MemoryMax=$1M failed"
	else
		cgset -r memory.limit_in_bytes="$1M" "$SLICE" ||
			die "cgset memory.limit_in_bytes=$1M $SLICE failed"
	fi
}

list_members() {
	find "$CGROOT/$SLICE" -mindepth 1 -maxdepth 1 -type d | sort
}

# start_sampler PARENT LEAF...: /proc/vmstat, the root and PARENT at
# SAMPLE_SLOW_MS (their rows feed phase deltas and the parent's rate
# line), the leaves' memory.stat and memory.current at SAMPLE_MS: the
# time series the plots draw.  The sampler-cost scenario measured why:
# under TCG /proc/vmstat alone at 10 Hz costs the guest about 1% of a CPU.
start_sampler() {
	local parent=$1
	shift
	lab-sampler -i "$SAMPLE_MS" -s "$SAMPLE_SLOW_MS" -r "$CGROOT" \
		-o "$OUT/samples.csv" -V -S / -S "$parent" "$@" 2>>"$OUT/sampler.log" &
	SAMPLER_PID=$!
}

stop_sampler() {
	kill -TERM "$SAMPLER_PID" 2>/dev/null || true
	wait "$SAMPLER_PID" || die "sampler failed: $(tail -n 3 "$OUT/sampler.log")"
}

# $2 may be written with the v2 names file_dirty / file_writeback.
memcg_stat() {
	local key=$2
	case $key in file_dirty) key=$KEY_DIRTY ;; file_writeback) key=$KEY_WRITEBACK ;; esac
	awk -v k="$key" '$1 == k {print $2}' "$CGROOT/$1/memory.stat" 2>/dev/null
}

# A heartbeat on the console: progress for the user, and proof of life for
# the host's hang detector.
heartbeat() {
	local cg=$1 line="$PHASE: $1" key v
	# "immediate" exists with the patch series only.
	for key in inactive_file active_file immediate file_dirty file_writeback; do
		v=$(memcg_stat "$cg" "$key" || true)
		[ -n "$v" ] && line+=" $key=$((v >> 20))M"
	done
	say "$line"
}

# Runs a command in the background in member NAME of the lab parent: a
# transient scope NAME.scope (v2) or a memcg made with cgcreate and
# entered with cgexec (v1).  The only property is MemoryMax=<size>, given
# before "--".
declare -A SCOPE_PID
run_in_scope() {
	local name=$1 max=
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		case $1 in
		MemoryMax=*) max=${1#MemoryMax=} ;;
		*) die "run_in_scope: unsupported property $1" ;;
		esac
		shift
	done
	[ "${1:-}" = -- ] && shift
	if [ "$CGROUP_MODE" = v2 ]; then
		systemd-run --quiet --scope --collect --unit="$name" --slice="$SLICE" \
			${max:+-p MemoryMax="$max"} "$@" &
	else
		cgcreate -g "memory:$SLICE/$name" || die "cgcreate memory:$SLICE/$name failed"
		if [ -n "$max" ]; then
			cgset -r memory.limit_in_bytes="$max" "$SLICE/$name" ||
				die "cgset memory.limit_in_bytes=$max $SLICE/$name failed"
		fi
		cgexec -g "memory:$SLICE/$name" "$@" &
	fi
	SCOPE_PID[$name]=$!
	wait_member_exists "$name"
}

wait_member_exists() {
	local i
	for i in $(seq 50); do
		[ -d "$CGROOT/$(cg_of "$1")" ] && return 0
		sleep 0.1
	done
	die "$(cg_of "$1") did not appear under $CGROOT"
}

# Sends a signal to every process of member NAME.
signal_member() {
	if [ "$CGROUP_MODE" = v2 ]; then
		systemctl kill --signal="$2" "$1.scope" 2>/dev/null || true
	else
		xargs -r kill -s "${2#SIG}" <"$CGROOT/$(cg_of "$1")/cgroup.procs" 2>/dev/null || true
	fi
}

scope_running() { kill -0 "${SCOPE_PID[$1]}" 2>/dev/null; }

# The dirtier NAME: fio's buffered writer overwriting FILE on the stick
# (or JOB, another fio job file), in NAME.scope.
start_dirtier() {
	local name=$1 file=$2 job=${3:-dirtier.fio}
	shift $(($# < 3 ? $# : 3))
	run_in_scope "$name" "$@" -- env DIRTY_FILE="$file" \
		DIRTY_FILE_MB="$DIRTY_FILE_MB" DIRTY_RUNTIME_S="$DIRTY_RUNTIME_S" \
		fio --output-format=json+ --output="$OUT/fio-$name.json" "$LAB/fio/$job"
}

# fio writes its JSON report on SIGINT, but a writer blocked behind a
# deep queue of a slow disk may take long to notice: wait a bounded time,
# with a heartbeat, then kill it and say so.
# SIGINT by default: fio writes its report when interrupted.  Commands
# started in the background of this (non-interactive) shell inherit
# SIGINT ignored, so a plain dd loop wants SIGTERM.
stop_scope() {
	local name=$1 sig=${2:-SIGINT} i
	signal_member "$name" "$sig"
	for i in $(seq 60); do
		scope_running "$name" || break
		[ $((i % 10)) -eq 0 ] && say "waiting for $name to stop ($i s)"
		sleep 1
	done
	if scope_running "$name"; then
		say "$name ignored $sig for 60 s: killed (a fio report it would have written is lost)"
		signal_member "$name" SIGKILL
		echo "$name killed after 60 s" >>"$OUT/notes.txt"
	fi
	wait "${SCOPE_PID[$name]}" || true
}

# $2 MiB of zeroes in $1, in 256 MiB steps that say how far they got: on
# the debug kernel a 2 GiB file takes minutes, and the host takes a
# silent console for a hung guest.
lay_out_file() {
	local path=$1 mb=$2 step=256 done_mb=0 n
	: >"$path" || die "cannot create $path"
	while [ "$done_mb" -lt "$mb" ]; do
		n=$((mb - done_mb < step ? mb - done_mb : step))
		dd if=/dev/zero of="$path" bs=1M seek="$done_mb" count="$n" \
			conv=notrunc oflag=direct status=none ||
			die "cannot lay out ${mb}M in $path (failed after ${done_mb}M)"
		done_mb=$((done_mb + n))
		if [ "$done_mb" -lt "$mb" ]; then
			say "  ${done_mb}M of ${mb}M laid out in $path"
		fi
	done
}

# Files are laid out before the stick is throttled: a new file on vfat
# would make fio extend it, and fat_cont_expand() zero-fills the whole
# size inside one write, behind the throttle, where only SIGKILL reaches
# fio.  Dirtiers then overwrite (no block allocation on the slow disk).
#
# The host keeps the laid-out disks of a layout recipe and boots later
# runs of it on a copy (run-scenario.sh, layout_key): memcg_lab.layout=
# on the kernel command line says "cached" (mount them: nothing to lay
# out), "save" (lay out, then let the host copy them) or "fresh".
prepare_disks() {
	local nr_dirty_files=${1:-1} i layout
	layout=$(cmdline_value 'memcg_lab\.layout')
	if [ "$layout" = cached ] && mount_laid_out_disks "$nr_dirty_files"; then
		say "the disks hold this recipe's laid-out files (the host's copy): nothing to lay out"
	else
		[ "$layout" != cached ] ||
			say "the host's laid-out disks do not hold this run's files: laying them out"
		prepare_stick
		prepare_fast
		say "laying out the neighbour's ${READ_FILE_MB}M read file"
		lay_out_file /mnt/fast/read.dat "$READ_FILE_MB"
		for i in $(seq "$nr_dirty_files"); do
			say "laying out dirty file $i of $nr_dirty_files (${DIRTY_FILE_MB}M) on the unthrottled stick"
			lay_out_file "/mnt/stick/dirty-$i.dat" "$DIRTY_FILE_MB"
		done
		[ "$layout" != save ] || save_laid_out_disks
	fi
	apply_sysctls
	drop_caches
	stick_throttle on
}

# Mounts the disks the host laid out for this recipe, if they hold
# exactly the files prepare_disks would write; else leaves them
# unmounted and fails.
mount_laid_out_disks() {
	local nr_dirty_files=$1 i
	STICK_DEV=$(disk_by_serial lab-stick)
	FAST_DEV=$(disk_by_serial lab-fast)
	mkdir -p /mnt/stick /mnt/fast
	mount -t "${STICK_FS:-vfat}" "$STICK_DEV" /mnt/stick 2>/dev/null || return 1
	if mount -t ext4 "$FAST_DEV" /mnt/fast 2>/dev/null; then
		local want=("/mnt/fast/read.dat $((READ_FILE_MB << 20))") got=() f
		for i in $(seq "$nr_dirty_files"); do
			want+=("/mnt/stick/dirty-$i.dat $((DIRTY_FILE_MB << 20))")
		done
		for f in /mnt/fast/*.dat /mnt/stick/*.dat; do
			[ ! -e "$f" ] || got+=("$f $(stat -c %s "$f")")
		done
		if [ "$(printf '%s\n' "${want[@]}" | sort)" = "$(printf '%s\n' "${got[@]}" | sort)" ]; then
			tune_queue "$STICK_DEV"
			return 0
		fi
		umount /mnt/fast
	fi
	umount /mnt/stick
	return 1
}

# Lets the host copy the laid-out disks for later runs of this recipe:
# with both filesystems unmounted nothing is cached in the guest or in
# flight.  The host answers in layout.state (saved or failed).
save_laid_out_disks() {
	local i state
	sync
	umount /mnt/stick /mnt/fast
	say "disks: save layout"
	for i in $(seq 1200); do
		state=$(cat "$OUT/layout.state" 2>/dev/null || true)
		[ -z "$state" ] || break
		sleep 0.1
	done
	[ -n "$state" ] || die "the host did not answer the layout request in 120 s"
	[ "$state" = saved ] || say "the host could not keep the laid-out disks ($state)"
	mount -t "${STICK_FS:-vfat}" "$STICK_DEV" /mnt/stick
	mount -t ext4 "$FAST_DEV" /mnt/fast
}

# Sum of a memory.stat key over cgroups, in MiB.
memcg_stat_mb() {
	local key=$1 cg sum=0
	shift
	for cg in "$@"; do
		sum=$((sum + $(memcg_stat "$cg" "$key" || echo 0)))
	done
	echo $((sum >> 20))
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

# Who reclaimed whose pages during the measured phase (attribution.csv):
# from the patch series' tracepoint, or on a kernel without it from the
# vanilla vmscan events (the scanned cgroup is then "unknown"; the mode
# is in attribution.csv.meta).
ATTRIB_PID=
start_attribution() {
	local i
	lab-reclaim-attrib -r "$CGROOT" -o "${ATTRIB_OUT:-$OUT/attribution.csv}" \
		2>>"$OUT/attribution.log" &
	ATTRIB_PID=$!
	# Its hists are in place when it says so; a tool that failed to set
	# them up fails the run now, not after the phase it was to measure.
	for i in $(seq 150); do
		grep -q 'installed$' "$OUT/attribution.log" 2>/dev/null && return 0
		kill -0 "$ATTRIB_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -TERM "$ATTRIB_PID" 2>/dev/null || true
	wait "$ATTRIB_PID" || true
	die "lab-reclaim-attrib did not say its hists were installed within 15 s: $(tail -n 3 "$OUT/attribution.log")"
}

stop_attribution() {
	[ -n "$ATTRIB_PID" ] || return 0
	kill -TERM "$ATTRIB_PID" 2>/dev/null || true
	wait "$ATTRIB_PID" || die "lab-reclaim-attrib failed: $(tail -n 3 "$OUT/attribution.log")"
	ATTRIB_PID=
}

# The neighbour's phase: buffered reads on the fast disk and the fault
# latency probe, in neighbour.scope; heartbeats show cgroup $1.
run_neighbour_phase() {
	local watch=$1
	shift
	start_neighbour_phase "$@"
	finish_neighbour_phase "$watch"
}

start_neighbour_phase() {
	phase_begin neighbour
	start_attribution
	run_in_scope neighbour "$@" -- env READ_FILE=/mnt/fast/read.dat \
		READ_FILE_MB="$READ_FILE_MB" NEIGHBOUR_S="$NEIGHBOUR_S" \
		"$LAB/lib/neighbour.sh" "$OUT" "$PROBE_MB" "$PROBE_INTERVAL_MS" "$NEIGHBOUR_S"
	list_members >"$OUT/cgroups-seen.txt"
}

# The measured phase ends NEIGHBOUR_S after it began, or earlier if the
# neighbour is done: its reader and probe stop taking new work at
# NEIGHBOUR_S but finish what they are in, which under reclaim took up to
# 50 s more.  That tail is a phase of its own (neighbour-tail), so that
# every run measures the same length of time.
finish_neighbour_phase() {
	local end left
	end=$(awk -v s="$PHASE_START" -v d="$NEIGHBOUR_S" 'BEGIN { printf "%.2f", s + d }')
	while scope_running neighbour; do
		left=$(awk -v e="$end" -v now="$(uptime_s)" 'BEGIN { l = e - now; print (l > 5 ? 5 : l > 0 ? l : 0) }')
		[ "$left" != 0 ] || break
		heartbeat "$1"
		sleep "$left"
	done
	# The phase ends on time; the attribution tool's last read of its
	# hists (seconds under TCG) comes after.
	phase_end
	stop_attribution
	if scope_running neighbour; then
		phase_begin neighbour-tail
		while scope_running neighbour; do
			heartbeat "$1"
			sleep 1
		done
		phase_end
	fi
	wait "${SCOPE_PID[neighbour]}" || die "neighbour failed"
}

# --- shapes -------------------------------------------------------------

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
ATTRIB_ROUND=0
toggle_attribution() {
	record_toggle_cost "$1"
	if [ "$1" = 1 ]; then
		ATTRIB_ROUND=$((ATTRIB_ROUND + 1))
		ATTRIB_OUT=$OUT/attribution-round-$ATTRIB_ROUND.csv start_attribution
	else
		stop_attribution
	fi
}

# A row of toggle-cost.csv at each switch: the dirtier's pages scanned and
# system CPU so far; windows between rows are "on" or "off".
record_toggle_cost() {
	local cg
	cg=$(cg_of dirtier)
	[ -f "$OUT/toggle-cost.csv" ] || echo "time_s,next_window,pgscan,system_usec" >"$OUT/toggle-cost.csv"
	echo "$(uptime_s),$([ "$1" = 1 ] && echo on || echo off),$(memcg_stat "$cg" pgscan),$(awk '$1 == "system_usec" {print $2}' "$CGROOT/$cg/cpu.stat")" \
		>>"$OUT/toggle-cost.csv"
}

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
	done >"$OUT/toggle-events.txt"
	if [ "$TOGGLE_MODE" != enable ]; then
		! grep -q 'enable=0' "$OUT/toggle-events.txt" ||
			die "TOGGLE_MODE=$TOGGLE_MODE wants every event enabled from boot: $(grep 'enable=0' "$OUT/toggle-events.txt" | tr '\n' ' ')"
	fi
	cg=$(cg_of dirtier)
	prepare_stick
	lay_out_file /mnt/stick/dirty-1.dat "$DIRTY_FILE_MB"
	apply_sysctls
	drop_caches
	set_parent_limit "$PARENT_MAX_MB"
	stick_throttle on
	start_sampler "$SLICE" "$cg"
	start_dirtier dirtier /mnt/stick/dirty-1.dat
	ramp_until_writeback "$cg"
	phase_begin toggle
	# The lab's own attribution over the phase in tracing-on mode (its
	# coverage of pgscan is checked by the boot test).  Not in enable
	# mode: its triggers keep the events soft-enabled, and writing 0 to
	# an enable file would then patch nothing.
	[ "$TOGGLE_MODE" != tracing-on ] || start_attribution
	echo "round,mode,start_s,end_s,dirtier_pgscan" >"$OUT/toggles.csv"
	for round in $(seq "$TOGGLE_ROUNDS"); do
		t0=$(uptime_s)
		"$toggle" 1
		sleep "$TOGGLE_ON_S"
		"$toggle" 0
		sleep "$TOGGLE_OFF_S"
		echo "$round,$TOGGLE_MODE,$t0,$(uptime_s),$(memcg_stat "$cg" pgscan)" >>"$OUT/toggles.csv"
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

# A short end-to-end check of the whole lab: memcgs, sampler, fio on the
# throttled stick.
shape_smoke() {
	prepare_stick
	lay_out_file /mnt/stick/dirty-1.dat "$DIRTY_FILE_MB"
	drop_caches
	set_parent_limit "$PARENT_MAX_MB"
	stick_throttle on
	start_sampler "$SLICE" "$(cg_of dirtier)"
	phase_begin write
	start_dirtier dirtier /mnt/stick/dirty-1.dat
	cat "$CGROOT/$SLICE/memory.max" >"$OUT/parent-memory.max"
	list_members >"$OUT/cgroups-seen.txt"
	wait "${SCOPE_PID[dirtier]}" || die "dirtier fio failed"
	heartbeat "$SLICE"
	phase_end
	stop_sampler
	# The boot test of the host's hang dump: a guest that says nothing.
	[ "${SILENT_S:-0}" -eq 0 ] || sleep "$SILENT_S"
}

# One dirtier (or clean reader, with DIRTIER_JOB) and a neighbour under
# the lab slice; the scenario's limits decide who reclaims: the parent
# (PARENT_MAX_MB), the dirtier itself (DIRTIER_MAX_MB) or the whole
# machine (neither).
# With SAMPLER_COST_CONFIGS (the sampler-cost scenario), the neighbour
# phase also measures lab-sampler's own cost (measure_sampler_configs).
# With PIN_MB (the pinned-floor scenario) the "dirtier" writes nothing:
# it holds PIN_MB of tmpfs, memory reclaim cannot take without swap, in
# place of the writeback a real dirtier holds (start_pinned_dirtier).
shape_dirty_neighbour() {
	local cg nb dirtier_props=()
	[ -z "${SAMPLER_COST_CONFIGS:-}" ] || check_sampler_configs
	cg=$(cg_of dirtier)
	nb=$(cg_of neighbour)
	prepare_disks "$([ -n "${PIN_MB:-}" ] && echo 0 || echo 1)"
	[ -n "${PARENT_MAX_MB:-}" ] && set_parent_limit "$PARENT_MAX_MB"
	[ -n "${DIRTIER_MAX_MB:-}" ] && dirtier_props=(MemoryMax="${DIRTIER_MAX_MB}M")
	start_sampler "$SLICE" "$cg" "$nb"
	if [ -n "${PIN_MB:-}" ]; then
		start_pinned_dirtier dirtier "${dirtier_props[@]}"
		ramp_until_pinned "$cg"
	else
		start_dirtier dirtier /mnt/stick/dirty-1.dat "${DIRTIER_JOB:-dirtier.fio}" \
			"${dirtier_props[@]}"
		ramp_until_writeback "$cg"
	fi
	start_neighbour_phase
	[ -z "${SAMPLER_COST_CONFIGS:-}" ] || measure_sampler_configs "$SLICE" "$cg" "$nb"
	[ -z "${STICK_STUCK_AFTER_S:-}" ] || stick_stuck_after "$STICK_STUCK_AFTER_S"
	finish_neighbour_phase "$cg"
	# Unstuck, so that the dirtier can stop.
	stick_unstick
	# dd and sleep were started in the background: SIGINT is ignored.
	stop_scope dirtier "$([ -n "${PIN_MB:-}" ] && echo SIGTERM || echo SIGINT)"
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

SAMPLER_COST_KNOWN="all-fast slow-files slow-parents slow-parents-tmpfs slow-vmstat vmstat-only all-slow"
# Before minutes of setup, not when a bad name's turn comes.
check_sampler_configs() {
	local cfg
	for cfg in $SAMPLER_COST_CONFIGS; do
		[[ " $SAMPLER_COST_KNOWN " == *" $cfg "* ]] ||
			die "unknown sampler configuration '$cfg' in SAMPLER_COST_CONFIGS (known: $SAMPLER_COST_KNOWN)"
	done
}

# lab-sampler run SAMPLER_COST_ROUNDS times in each configuration of
# SAMPLER_COST_CONFIGS, SAMPLER_COST_S seconds each, on the cgroups the
# run's own sampler reads (PARENT, then leaves), the order rotated every
# round so that drift in the load is shared out.  A row per run in
# sampler-cost.csv with the sampler's exit line, which the analysis
# parses (run.SAMPLER_COST), as sampler.log's.  Each writes its rows
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
measure_sampler_configs() {
	local parent=$1 configs=() n round i cfg pid log csv dir rows line args=() cgs=()
	shift
	read -ra configs <<<"$SAMPLER_COST_CONFIGS"
	n=${#configs[@]}
	[ "$n" -gt 0 ] || die "SAMPLER_COST_CONFIGS is empty"
	echo "round,config,args,rows,exit_line" >"$OUT/sampler-cost.csv"
	for round in $(seq "$SAMPLER_COST_ROUNDS"); do
		for i in $(seq 0 $((n - 1))); do
			cfg=${configs[$(((i + round - 1) % n))]}
			cgs=(/ "$parent" "$@")
			dir=$OUT
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
			*) die "unknown sampler configuration '$cfg' (known: $SAMPLER_COST_KNOWN)" ;;
			esac
			say "sampler cost: round $round of $SAMPLER_COST_ROUNDS, $cfg (${args[*]}), ${SAMPLER_COST_S} s"
			csv=$dir/sampler-cost-$round-$cfg.csv
			log=$OUT/sampler-cost-$round-$cfg.log
			lab-sampler "${args[@]}" -r "$CGROOT" -o "$csv" "${cgs[@]}" 2>"$log" &
			pid=$!
			sleep "$SAMPLER_COST_S"
			kill -TERM "$pid"
			wait "$pid" || die "lab-sampler ($cfg) failed: $(tail -n 3 "$log")"
			rows=$(($(wc -l <"$csv") - 1))
			rm -f "$csv"
			line=$(grep '^lab-sampler: [0-9]* ticks in' "$log") || die "$log: no exit line"
			echo "$round,$cfg,${args[*]},$rows,\"$line\"" >>"$OUT/sampler-cost.csv"
			cat "$log" >>"$OUT/sampler-cost.log"
			rm -f "$log"
		done
	done
}

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
	start_sampler "$SLICE" "${cgs[@]}" "$(cg_of neighbour)"
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

# memory.reclaim on the parent while the dirtier's pages are under
# writeback: RECLAIM_CALLS calls of RECLAIM_MB each, RECLAIM_GAP_S apart;
# proactive.csv has per call its end (uptime), duration, the kernel's
# answer and the parent's pgscan/pgsteal deltas (pages).
shape_proactive() {
	local cg i t0 t1 rc err s0 s1 r0 r1
	[ "$CGROUP_MODE" = v2 ] || die "memory.reclaim exists only in cgroup v2"
	cg=$(cg_of dirtier)
	prepare_disks 1
	set_parent_limit "$PARENT_MAX_MB"
	start_sampler "$SLICE" "$cg"
	start_dirtier dirtier /mnt/stick/dirty-1.dat
	ramp_until_writeback "$cg"
	phase_begin reclaim
	start_attribution
	echo "call,end_s,duration_ns,result,pgscan,pgsteal" >"$OUT/proactive.csv"
	for i in $(seq "$RECLAIM_CALLS"); do
		s0=$(memcg_stat "$SLICE" pgscan)
		r0=$(memcg_stat "$SLICE" pgsteal)
		t0=$(date +%s%N)
		# EAGAIN (fewer pages reclaimed than asked) is a result, "short";
		# any other error is kept by name.
		if err=$({ echo "${RECLAIM_MB}M" >"$CGROOT/$SLICE/memory.reclaim"; } 2>&1); then
			rc=ok
		elif [[ $err == *"Resource temporarily unavailable"* ]]; then
			rc=short
		else
			rc=error:$(printf '%s' "${err##*: }" | tr -c 'A-Za-z0-9' _)
		fi
		t1=$(date +%s%N)
		s1=$(memcg_stat "$SLICE" pgscan)
		r1=$(memcg_stat "$SLICE" pgsteal)
		echo "$i,$(uptime_s),$((t1 - t0)),$rc,$((s1 - s0)),$((r1 - r0))" >>"$OUT/proactive.csv"
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

# vmstat counters of the 2011 cover letter's table, for one iteration.
WRITEBACK_CP_KEYS="pgscan_direct pgscan_kswapd pgsteal_direct pgsteal_kswapd
pgscan_file pgsteal_file nr_vmscan_immediate_reclaim pgrescued pgimmediate_parked
compact_stall compact_success compact_fail thp_fault_alloc thp_fault_fallback
pgactivate pgdeactivate pgrotated oom_kill"

vmstat_snapshot() {
	local k
	for k in $WRITEBACK_CP_KEYS; do
		awk -v k="$k" '$1 == k {v = $2} END {print k, (v == "" ? "na" : v)}' /proc/vmstat
	done
}

# "key delta" lines between two vmstat_snapshot outputs, "na" where
# the kernel lacks the key.
vmstat_deltas() {
	paste -d' ' <(echo "$1") <(echo "$2") |
		awk '{print $1, ($2 == "na" || $4 == "na") ? "na" : $4 - $2}'
}

# MemFree, not MemAvailable: MemAvailable counts the copy's dirty and
# writeback page cache as available, so it never looks low.
mem_free_mb() { awk '/^MemFree:/ {print int($2 / 1024)}' /proc/meminfo; }

# Waits until writeback has drained (the seed waited for a small nr_dirty
# between iterations so one could not skew the next).
wait_dirty_below() {
	local i
	for i in $(seq 600); do
		[ "$(awk '$1 == "nr_dirty" || $1 == "nr_writeback" {s += $2} END {print s + 0}' /proc/vmstat)" -lt "$1" ] && return 0
		sleep 1
	done
	die "dirty + writeback pages still >= $1 after 600 s"
}

# The 2011 series' writebackCP test: a copy loop from the fast disk to the
# slow stick, and when memory is low the alloc program maps ALLOC_MB (THP
# as the scenario says) and reports how long it took and what THP and
# compaction did; ITERATIONS times, with sync, drop_caches and a wait for
# writeback between them.  writeback-cp.csv has one row per iteration:
# lab-alloc's keys, then the vmstat deltas over the alloc.
shape_writeback_cp() {
	local i t before after deltas alloc_out row alloc_rc alloc_row
	prepare_stick
	prepare_fast
	say "laying out the ${SRC_FILE_MB}M source file on the fast disk"
	lay_out_file /mnt/fast/source.dat "$SRC_FILE_MB"
	echo "$THP" >/sys/kernel/mm/transparent_hugepage/enabled ||
		die "cannot set THP $THP"
	apply_sysctls
	stick_throttle on
	# One scope name per iteration: systemd may still be collecting the
	# previous iteration's.
	local cgs=()
	for i in $(seq "$ITERATIONS"); do
		cgs+=("$(cg_of "copier-$i")" "$(cg_of "alloc-$i")")
	done
	# lab-alloc writes its CSV when it is done: a 1 MiB run gives the
	# header for an iteration whose alloc the OOM killer ends.
	lab-alloc -s 1 -o "$OUT/alloc-header.csv" >/dev/null ||
		die "lab-alloc -s 1 failed"
	echo "iteration,$(head -n 1 "$OUT/alloc-header.csv"),$(echo "$WRITEBACK_CP_KEYS" | tr -s ' \n' ',' | sed 's/,$//')" >"$OUT/writeback-cp.csv"
	start_sampler "$SLICE" "${cgs[@]}"
	for i in $(seq "$ITERATIONS"); do
		drop_caches
		wait_dirty_below "$CLEAN_PAGES"
		phase_begin "iteration-$i"
		run_in_scope "copier-$i" -- sh -c 'while :; do dd if=/mnt/fast/source.dat of=/mnt/stick/copy.dat bs=1M status=none || exit 1; done'
		t=0
		until [ "$(mem_free_mb)" -lt "$LOW_MEM_MB" ]; do
			sleep 1
			t=$((t + 1))
			[ "$t" -lt "$LOW_MEM_WAIT_S" ] ||
				die "MemFree still >= ${LOW_MEM_MB}M after ${LOW_MEM_WAIT_S} s of copying"
			[ $((t % 10)) -eq 0 ] && say "iteration $i: copying, MemFree $(mem_free_mb)M"
		done
		heartbeat "$(cg_of "copier-$i")"
		before=$(vmstat_snapshot)
		alloc_out=$OUT/alloc-$i.csv
		run_in_scope "alloc-$i" -- lab-alloc -s "$ALLOC_MB" ${ALLOC_MADVISE:+-H} -o "$alloc_out"
		alloc_rc=0
		wait "${SCOPE_PID[alloc-$i]}" || alloc_rc=$?
		after=$(vmstat_snapshot)
		stop_scope "copier-$i" SIGTERM
		phase_end
		deltas=$(vmstat_deltas "$before" "$after")
		row=$(awk '{printf ",%s", $2}' <<<"$deltas")
		if [ "$alloc_rc" -eq 0 ]; then
			alloc_row=$(tail -n 1 "$alloc_out")
		elif awk '$1 == "oom_kill" && $2 != "na" && $2 > 0 {found = 1} END {exit !found}' \
			<<<"$deltas"; then
			# The allocating task OOM-killed is this workload's worst
			# outcome, a result to count (vmstat.oom_kill), not a
			# broken run.
			alloc_row=$(head -n 1 "$OUT/alloc-header.csv" | sed 's/[^,]*/na/g')
		else
			die "lab-alloc failed in iteration $i (exit $alloc_rc, no OOM kill)"
		fi
		echo "$i,$alloc_row$row" >>"$OUT/writeback-cp.csv"
		say "iteration $i: ${alloc_row/#na*/lab-alloc OOM-killed}"
	done
	stop_sampler
}

# Waits for the background job $1 and returns its exit status, saying
# "$2 running (N s)" every 30 s: the host's hang detector needs a console
# line at least every 180 s.  WAITED_S: how long it ran, in seconds.
wait_with_heartbeat() {
	local pid=$1 what=$2
	WAITED_S=0
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		WAITED_S=$((WAITED_S + 1))
		[ $((WAITED_S % 30)) -ne 0 ] || say "$what running (${WAITED_S} s)"
	done
	wait "$pid"
}

# The patch series' invariant tests, its kselftest test_lru_immediate
# (patch 15, built by lab/build-kselftests.sh lru-immediate, in the lab
# share), on the throttled stick; KTAP in kselftest-test_lru_immediate.tap.
# They make their own memcgs under a parent of the root, outside
# systemd's slices; their exit status is the run's.  The harness takes no
# options: the parameters go in LRU_IMMEDIATE_* environment variables.
shape_invariants() {
	local parent=$CGROOT/memcg-lab-invariants rc=0 prog=$LAB/kselftest/test_lru_immediate
	local tap=$OUT/kselftest-test_lru_immediate.tap
	[ "$CGROUP_MODE" = v2 ] || die "the invariant tests need cgroup v2"
	[ -x "$prog" ] || die "no $prog: the scenario must set KSELFTESTS=lru-immediate"
	prepare_stick
	apply_sysctls
	stick_throttle on
	mkdir -p "$parent"
	echo +memory >"$parent/cgroup.subtree_control" ||
		die "cannot enable the memory controller in $parent"
	# The tests' memcgs (see test_lru_immediate.c), sampled while they exist.
	local rel=${parent#"$CGROOT"/} cgs=() t
	for t in park activate immediate toggle rmdir fadvise-dontneed compact_memory mlock truncate strand mglru large; do
		cgs+=("$rel/$t")
	done
	start_sampler "$rel" "${cgs[@]}"
	phase_begin tests
	# Some steps (compact_memory behind the slow disk) print nothing for
	# minutes: a heartbeat keeps the host's hang detector quiet.
	# A subshell, so that $! is the whole pipeline (pipefail: its status).
	# The harness logs failed checks on stderr: both in the KTAP file.
	(LRU_IMMEDIATE_DIR=/mnt/stick LRU_IMMEDIATE_CGROUP=$parent \
		LRU_IMMEDIATE_MEMCG_MB=$TEST_MEMCG_MAX_MB LRU_IMMEDIATE_FILE_MB=$TEST_FILE_MB \
		LRU_IMMEDIATE_STRESS_S=$TEST_STRESS_S LRU_IMMEDIATE_TESTS=$TEST_ONLY \
		"$prog" 2>&1 | tee "$tap") &
	wait_with_heartbeat $! "invariant tests" || rc=$?
	phase_end
	stop_sampler
	grep -E '^(not ok|ok .*# SKIP|1\.\.|# Totals:|# FAIL:|# known:)' "$tap" | sed 's/^/memcg-lab: tap: /' || true
	[ "$rc" -eq 0 ] || die "test_lru_immediate failed (exit $rc): see ${tap##*/}"
}

# kselftest output (TAP) to CSV rows "program,number,test,result", result
# pass, fail or skip.
kselftest_tap_to_csv() {
	awk -v prog="$1" '
	/^ok [0-9]+ # SKIP / { n = $2; sub(/^ok [0-9]+ # SKIP /, ""); print prog "," n "," $0 ",skip"; next }
	/^ok [0-9]+ / { n = $2; sub(/^ok [0-9]+ /, ""); print prog "," n "," $0 ",pass"; next }
	/^not ok [0-9]+ / { n = $3; sub(/^not ok [0-9]+ /, ""); print prog "," n "," $0 ",fail" }'
}

# The kernel's own cgroup selftests (lab/build-kselftests.sh, in the lab
# share) under the arm's policy: the series changes memcg accounting and
# reclaim, and must pass what 6.1 passes.  Their working directory is
# ext4 on the fast disk: test_memcontrol makes its page cache with
# O_TMPFILE there, which 9p lacks and which tmpfs would make
# unreclaimable (the guest has no swap).  A failed selftest is a result
# (kselftest.csv, kselftest-<program>.tap), not a failed run.
#
# systemd mounts cgroup2 with memory_recursiveprot, which 6.1's
# test_memcg_low does not expect: it lends the parent's unclaimed
# protection to the child whose memory.low is 0, which then records
# "low" events the test counts as a failure (upstream's later test skips
# that child when the option is on).  The tests therefore run with
# cgroup2 remounted as the kernel's default, nsdelegate only; the
# options systemd chose come back when they end.
shape_kselftest_cgroup() {
	local dir=$LAB/kselftest prog rc systemd_opts
	[ "$CGROUP_MODE" = v2 ] || die "the cgroup selftests need cgroup v2"
	[ -d "$dir" ] || die "no $dir: the scenario must set KSELFTESTS=cgroup"
	prepare_fast
	apply_sysctls
	mkdir -p /mnt/fast/kselftest
	systemd_opts=$(cgroup2_super_options)
	remount_cgroup2 nsdelegate
	# What the tests' results depend on besides the kernel: the cgroup2
	# mount's options, swap, THP, the working directory's filesystem.
	{
		echo "cgroup2_mount_systemd=$systemd_opts"
		echo "cgroup2_mount=$(cgroup2_super_options)"
		echo "root_subtree_control=$(cat "$CGROOT/cgroup.subtree_control")"
		echo "swap_devices=$(($(wc -l </proc/swaps) - 1))"
		echo "thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled)"
		echo "cwd_fs=$(stat -f -c %T /mnt/fast/kselftest)"
	} >"$OUT/kselftest-env.txt"
	echo "program,number,test,result" >"$OUT/kselftest.csv"
	echo "program,exit_status,seconds" >"$OUT/kselftest-exit.csv"
	phase_begin tests
	[ -s "$dir/.built" ] || die "$dir/.built: no list of programs"
	# The programs lab/build-kselftests.sh built, in its order.
	for prog in $(cat "$dir/.built"); do
		[ -x "$dir/$prog" ] || die "$dir/$prog: missing from the lab share"
		say "kselftest $prog"
		# Line-buffered: the tests fork children that would otherwise
		# print the parent's unflushed results again when they exit.
		(cd /mnt/fast/kselftest &&
			exec timeout -s KILL "$KSELFTEST_TIMEOUT_S" stdbuf -oL "$dir/$prog") \
			>"$OUT/kselftest-$prog.tap" 2>&1 &
		rc=0
		wait_with_heartbeat $! "kselftest $prog" || rc=$?
		echo "$prog,$rc,$WAITED_S" >>"$OUT/kselftest-exit.csv"
		kselftest_tap_to_csv "$prog" <"$OUT/kselftest-$prog.tap" >>"$OUT/kselftest.csv"
		grep -E '^(not ok|ok) ' "$OUT/kselftest-$prog.tap" | sed "s/^/kselftest $prog: /" |
			while read -r line; do say "$line"; done
		[ "$rc" -ne 137 ] || say "kselftest $prog: killed after KSELFTEST_TIMEOUT_S=$KSELFTEST_TIMEOUT_S s"
	done
	phase_end
	remount_cgroup2 "$systemd_opts"
}

# The cgroup2 superblock's options (nsdelegate, memory_recursiveprot, ...)
# as /proc/self/mountinfo shows them, without rw/ro.
cgroup2_super_options() {
	awk '$5 == "/sys/fs/cgroup" {print $NF}' /proc/self/mountinfo |
		tr ',' '\n' | grep -vx 'rw\|ro' | paste -sd, -
}

# Remount the cgroup2 hierarchy with exactly OPTIONS: mount(8) would
# otherwise merge in the options it is mounted with now, and a flag
# missing from a cgroup2 remount is cleared.
remount_cgroup2() {
	local options=$1
	mount --options-mode ignore -o "remount,$options" /sys/fs/cgroup ||
		die "remounting /sys/fs/cgroup with $options failed"
	[ "$(cgroup2_super_options)" = "$options" ] ||
		die "/sys/fs/cgroup has options $(cgroup2_super_options) after a remount with $options"
}

# One line of stress.csv (step, uptime, action, result), also said on the
# console: the host's hang detector needs output at least every 180 s,
# and a debug kernel's splat is easier to place next to the step.
log_stress_step() {
	echo "$1,$(uptime_s),$2,$3" >>"$OUT/stress.csv"
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
STRESS_POLICIES=(immediate keep immediate activate)
stress_step() {
	local n=$1 policy
	case $(((n - 1) % 5)) in
	0)
		policy=${STRESS_POLICIES[$((((n - 1) / 5) % ${#STRESS_POLICIES[@]}))]}
		if [ ! -w "$WRITEBACK_POLICY" ]; then
			log_stress_step "$n" "policy-$policy" n/a
		elif echo "$policy" >"$WRITEBACK_POLICY"; then
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
		if [ -n "$COMPACT_PID" ] && kill -0 "$COMPACT_PID" 2>/dev/null; then
			log_stress_step "$n" compact still-running
		else
			sh -c 'echo 1 >/proc/sys/vm/compact_memory' &
			COMPACT_PID=$!
			log_stress_step "$n" compact started
		fi
		;;
	2)
		# EAGAIN ("failed") is a normal answer under this much writeback.
		if [ "$CGROUP_MODE" != v2 ]; then
			log_stress_step "$n" proactive-reclaim n/a
		else
			log_stress_step "$n" proactive-reclaim "$(bounded_step sh -c \
				"echo ${STRESS_RECLAIM_MB}M >$CGROOT/$SLICE/memory.reclaim" 2>/dev/null)"
		fi
		;;
	3)
		# THP-backed anonymous memory: compaction and splits under
		# pressure.  The memcg OOM killer may end it (failed).
		run_in_scope "alloc-$n" -- timeout -s KILL "$STRESS_STEP_BOUND_S" \
			lab-alloc -s "$STRESS_ALLOC_MB" -o "$OUT/stress-alloc-$n.csv"
		if wait "${SCOPE_PID[alloc-$n]}"; then
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
	} >"$OUT/stress-check.txt"
	[ -z "$failed" ] || die "the series' lists did not drain after the stress mix:$failed"
	say "stress check: nr_immediate=$parked stranded=$stranded verifier bad=$bad mismatched=$mismatched"
}

# The stress mix for the debug kernel: NR_DIRTIERS dirtiers and the
# neighbour under the parent limit while, every STRESS_STEP_S, a step
# switches the writeback policy, compacts memory, reclaims proactively
# on the parent, maps THP-backed memory, or starts a short-lived writer
# whose memcg is removed under writeback.  stress.csv logs every step;
# check_series_drained() then checks the lists drained.
shape_stress() {
	local i cgs=() names=() n=0 stranded0=0
	COMPACT_PID=
	for i in $(seq "$NR_DIRTIERS"); do
		names+=("dirtier-$i")
		cgs+=("$(cg_of "dirtier-$i")")
	done
	prepare_disks "$NR_DIRTIERS"
	echo "$THP" >/sys/kernel/mm/transparent_hugepage/enabled ||
		die "cannot set THP $THP"
	set_parent_limit "$PARENT_MAX_MB"
	start_sampler "$SLICE" "${cgs[@]}" "$(cg_of neighbour)"
	stranded0=$(awk '$1 == "pgimmediate_stranded" {print $2}' /proc/vmstat)
	for i in $(seq "$NR_DIRTIERS"); do
		start_dirtier "dirtier-$i" "/mnt/stick/dirty-$i.dat"
	done
	ramp_until_writeback "${cgs[@]}"
	phase_begin stress
	run_in_scope neighbour -- env READ_FILE=/mnt/fast/read.dat \
		READ_FILE_MB="$READ_FILE_MB" NEIGHBOUR_S="$STRESS_S" \
		"$LAB/lib/neighbour.sh" "$OUT" "$PROBE_MB" "$PROBE_INTERVAL_MS" "$STRESS_S"
	echo "step,uptime_s,action,result" >"$OUT/stress.csv"
	while scope_running neighbour; do
		n=$((n + 1))
		stress_step "$n"
		[ $((n % 5)) -ne 1 ] || heartbeat "${cgs[0]}"
		sleep "$STRESS_STEP_S"
	done
	wait "${SCOPE_PID[neighbour]}" || die "neighbour failed"
	phase_end
	echo activate >"$WRITEBACK_POLICY" 2>/dev/null || true
	for i in "${names[@]}"; do
		stop_scope "$i"
	done
	# The checks need the writeback done: at the debug kernel's 1 MiB/s
	# the sync would outlast the host's 180 s silence limit.
	stick_throttle off
	if [ -n "$COMPACT_PID" ]; then
		say "stress: waiting for the last compaction (it waits for writeback)"
		sync
		wait "$COMPACT_PID" || die "compact_memory failed"
	fi
	stop_sampler
	check_series_drained "${stranded0:-0}"
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
quiesce_tracing
resolve_parameters
choose_cgroup_mode
apply_arm
say "running $SCENARIO (shape $SHAPE, arm $ARM, guest ${MEM_MB}M)"
"shape_${SHAPE//-/_}"
finish_run
say "scenario $SCENARIO done"
