# shellcheck shell=bash
# The stick (the slow disk the dirtiers write) and the fast disk (the
# neighbour's reads): found by serial, queues tuned, filesystems made,
# files laid out, the stick's QEMU throttle asked of the host (sourced
# by guest-run.sh; its header says what API and Private mean).
#
# API:
#   prepare_disks [N]     both disks with the neighbour's read file and N
#                         dirty files (the host's copy when it has one),
#                         sysctls, caches dropped, the stick throttled
#   prepare_stick         the stick at /mnt/stick (stick_dev, STICK_FS),
#                         its queue tuned
#   prepare_fast          the fast disk at /mnt/fast (fast_dev)
#   lay_out_file PATH MB  MB of zeroes written to PATH
#   drop_caches           sync, then drop the page cache
#   stick_throttle on|off|stuck  ask the host, wait for its answer
#   stick_stuck_after S   after S seconds, the stick all but stops
#   stick_unstick         lift a stuck stick's throttle
# Private:
#   disk_by_serial SERIAL  /dev/vdX of the disk with SERIAL
#   tune_queue DEV        scheduler, request size and depth, no WBT
#   make_fs DEV FS DIR    mkfs and mount
#   mount_laid_out_disks N  mount the host's copy if it holds the files
#   warm_stick_bdi        give a kept stick a layout's write history
#   save_laid_out_disks   let the host copy the laid-out disks

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
	# With CONFIG_BLK_WBT=n WBT is off: 6.1's file refuses writes, 6.12
	# has no such file (and a write would try to create one).
	[ ! -e "$q/wbt_lat_usec" ] || echo 0 >"$q/wbt_lat_usec" 2>/dev/null || true
	local f
	for f in scheduler nr_requests max_sectors_kb max_hw_sectors_kb wbt_lat_usec; do
		if [ -f "$q/$f" ]; then
			echo "$(basename "$1") $f $(cat "$q/$f" 2>/dev/null || echo unreadable)"
		fi
	done >>"$out_dir/block-queue.txt"
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
	stick_dev=$(disk_by_serial lab-stick)
	tune_queue "$stick_dev"
	make_fs "$stick_dev" "${STICK_FS:-vfat}" /mnt/stick
}

prepare_fast() {
	fast_dev=$(disk_by_serial lab-fast)
	make_fs "$fast_dev" ext4 /mnt/fast
}

# The host owns the stick's QEMU throttle: ask on the console, wait for
# its answer in the results share (see lab/run-scenario.sh).
throttle_requests=0
stick_throttle() {
	local want=$1 i
	throttle_requests=$((throttle_requests + 1))
	say "stick: throttle $want"
	for i in $(seq 100); do
		if [ "$(cat "$out_dir/stick-throttle.state" 2>/dev/null)" = "$want $throttle_requests" ]; then
			stick_throttle=$want
			return 0
		fi
		sleep 0.1
	done
	die "the host did not answer stick throttle request $throttle_requests ($want) in 10 s"
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
	[ "${stick_throttle:-off}" = stuck ] || return 0
	stick_throttle off
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
		warm_stick_bdi
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
	stick_dev=$(disk_by_serial lab-stick)
	fast_dev=$(disk_by_serial lab-fast)
	mkdir -p /mnt/stick /mnt/fast
	mount -t "${STICK_FS:-vfat}" "$stick_dev" /mnt/stick 2>/dev/null || return 1
	if mount -t ext4 "$fast_dev" /mnt/fast 2>/dev/null; then
		local want=("/mnt/fast/read.dat $((READ_FILE_MB << 20))") got=() f
		for i in $(seq "$nr_dirty_files"); do
			want+=("/mnt/stick/dirty-$i.dat $((DIRTY_FILE_MB << 20))")
		done
		for f in /mnt/fast/*.dat /mnt/stick/*.dat; do
			[ ! -e "$f" ] || got+=("$f $(stat -c %s "$f")")
		done
		if [ "$(printf '%s\n' "${want[@]}" | sort)" = "$(printf '%s\n' "${got[@]}" | sort)" ]; then
			tune_queue "$stick_dev"
			return 0
		fi
		umount /mnt/fast
	fi
	umount /mnt/stick
	return 1
}

# A stick booted on kept disks has written nothing in this boot: its bdi
# starts from the kernel's default bandwidth estimate (100 MB/s) and no
# share of the dirty limit, where a layout leaves both learned, and its
# writeback then completed in bursts three times larger (RESULTS.md,
# "Laid-out disks").  Overwriting STICK_WARM_MB of the dirty file,
# buffered and unthrottled as the layout wrote it (vfat's direct I/O
# falls back to buffered when it extends a file), gives it that history.
warm_stick_bdi() {
	# smoke and cgroup-selftests, with machines of their own, do not warm.
	local warm_mb=${STICK_WARM_MB:-0} t0 mb
	mb=$((warm_mb < DIRTY_FILE_MB ? warm_mb : DIRTY_FILE_MB))
	[ "$mb" -gt 0 ] || return 0
	t0=$(uptime_s)
	dd if=/dev/zero of=/mnt/stick/dirty-1.dat bs=1M count="$mb" conv=notrunc,fsync status=none ||
		die "cannot overwrite ${mb}M of /mnt/stick/dirty-1.dat to warm the stick's bdi"
	say "stick's bdi warmed: ${mb}M overwritten in /mnt/stick/dirty-1.dat in $(awk -v a="$t0" -v b="$(uptime_s)" 'BEGIN { printf "%.1f", b - a }') s"
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
		state=$(cat "$out_dir/layout.state" 2>/dev/null || true)
		[ -z "$state" ] || break
		sleep 0.1
	done
	[ -n "$state" ] || die "the host did not answer the layout request in 120 s"
	[ "$state" = saved ] || say "the host could not keep the laid-out disks ($state)"
	mount -t "${STICK_FS:-vfat}" "$stick_dev" /mnt/stick
	mount -t ext4 "$fast_dev" /mnt/fast
}
