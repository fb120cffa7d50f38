# shellcheck shell=bash
# Shared helpers for the lab's host-side scripts.  Sourced, never run.

LAB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LAB_CACHE=${MEMCG_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/memcg-lab}
export LAB_ROOT LAB_CACHE

# Every ok run's guest time on this host, whatever its results root
# (scenario,flavour,elapsed_s,run): the matrix's estimate for a scenario
# that has never run in its results root.
RUN_DURATIONS=$LAB_CACHE/run-durations.csv

# Log lines say how long the lab has been at work: since the outermost
# make target (the Makefile sets MEMCG_LAB_T0) or lab script started, so
# a script another one runs (run-scenario.sh -> build-kernel.sh) counts
# on from its caller's start instead of from zero.  Anything but epoch
# seconds is ignored: the value reaches shell arithmetic.
[[ ${MEMCG_LAB_T0:-} =~ ^[0-9]{1,12}$ ]] || MEMCG_LAB_T0=$EPOCHSECONDS
export MEMCG_LAB_T0

# M:SS, or H:MM:SS from an hour on; a negative duration (a clock set
# back) is 0:00.
format_duration() {
	local s=$(($1 < 0 ? 0 : $1))
	if [ "$s" -ge 3600 ]; then
		printf '%d:%02d:%02d\n' $((s / 3600)) $((s % 3600 / 60)) $((s % 60))
	else
		printf '%d:%02d\n' $((s / 60)) $((s % 60))
	fi
}

# "[memcg-lab +1:23]": the start of every host log line.
log_prefix() {
	printf '[memcg-lab +%s]\n' "$(format_duration $((EPOCHSECONDS - MEMCG_LAB_T0)))"
}

log() { printf '%s %s\n' "$(log_prefix)" "$*" >&2; }
die() { printf '%s error: %s\n' "$(log_prefix)" "$*" >&2; exit 1; }
# Exit 2 means "you asked for something that does not exist".
die_usage() { printf '%s error: %s\n' "$(log_prefix)" "$*" >&2; exit 2; }

# --- the kernel axis: labels ---------------------------------------
# A run's kernel is named by a label, which goes into its folder name and
# provenance; make report compares (kernel label, arm) cells.  The labels
# the lab builds itself (lab/build-kernel.sh --label NAME), in the order
# a report lists them:
#   lab           Debian's 6.1 + patches/series + lab/kernel/memcg-lab.config (the default)
#   debug         lab + lab/kernel/debug.config (DEBUG=1)
#   pristine-6.1  Debian's 6.1 tarball without the series: the real vanilla
#   debian-6.12   Debian's linux-source-6.12, the current LTS, pristine
# Any other label names a build registered by `make kernel LABEL=name
# KSRC=...|KBUILD=...`: the folder $LAB_CACHE/kbuild-<label>.
SHIPPED_KERNEL_LABELS="lab debug pristine-6.1 debian-6.12"
# Run folders from before labels existed carry none: they ran this one
# (or debug, which their kernel_flavour says).
DEFAULT_KERNEL_LABEL=lab

# The Debian package whose tarball a pristine shipped label is built
# from; fails for a label the lab does not build from a package.
pristine_label_package() {
	case $1 in
	pristine-6.1) echo linux-source-6.1 ;;
	debian-6.12) echo linux-source-6.12 ;;
	*) return 1 ;;
	esac
}

# A label is one word a folder name can carry: <stamp>-<label>-<arm>.
# The arm is the last dash-separated part, so a label may hold dashes
# and dots (pristine-6.1), never a slash or a space.
is_valid_kernel_label() {
	[[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$ ]] && [[ $1 != *. ]]
}

is_shipped_kernel_label() {
	[[ " $SHIPPED_KERNEL_LABELS " == *" $1 "* ]]
}

# Labels of builds registered in the cache beyond the shipped ones.
registered_kernel_labels() {
	local d label
	for d in "$LAB_CACHE"/kbuild-*; do
		label=${d##*/kbuild-}
		[ -f "$d/arch/x86/boot/bzImage" ] && ! is_shipped_kernel_label "$label" &&
			is_valid_kernel_label "$label" && echo "$label"
	done
	return 0
}

# Every label a run may ask for, on one line.
known_kernel_labels() {
	local extra
	extra=$(registered_kernel_labels | tr '\n' ' ')
	echo "$SHIPPED_KERNEL_LABELS${extra:+ ${extra% }}"
}

# The label of the kernel a run boots: MEMCG_LAB_KERNEL, else for a
# MEMCG_LAB_KBUILD folder its name less "kbuild-" (the cache's folders
# are named for their labels), else debug or lab.
wanted_kernel_label() {
	local label
	if [ -n "${MEMCG_LAB_KERNEL:-}" ]; then
		label=$MEMCG_LAB_KERNEL
	elif [ -n "${MEMCG_LAB_KBUILD:-}" ]; then
		label=$(basename "$MEMCG_LAB_KBUILD")
		label=${label#kbuild-}
		is_valid_kernel_label "$label" ||
			die_usage "MEMCG_LAB_KBUILD=$MEMCG_LAB_KBUILD: its folder name is no kernel label; name one with MEMCG_LAB_KERNEL=<label> (make: KERNEL=<label>)"
	elif [ -n "${MEMCG_LAB_DEBUG:-}" ]; then
		label=debug
	else
		label=$DEFAULT_KERNEL_LABEL
	fi
	echo "$label"
}

# The kernel flavour a run boots, lab or debug: the one place that
# decides it, so that run-scenario.sh (which boots it and records it as
# KERNEL_FLAVOUR in params.env; scenarios give a debug kernel more time)
# and matrix.sh (which keeps each flavour's jobs and estimates apart)
# agree.  A kernel given by folder (MEMCG_LAB_KBUILD, or a label other
# than lab and debug) is a debug one if its .config has DEBUG_VM.
wanted_kernel_flavour() {
	local kbuild=${MEMCG_LAB_KBUILD:-}
	case ${MEMCG_LAB_KERNEL:-} in
	"") ;;
	lab) [ -n "$kbuild" ] || { echo lab; return; } ;;
	debug) [ -n "$kbuild" ] || { echo debug; return; } ;;
	*) [ -n "$kbuild" ] || kbuild=$LAB_CACHE/kbuild-$MEMCG_LAB_KERNEL ;;
	esac
	if [ -n "$kbuild" ]; then
		if grep -qx CONFIG_DEBUG_VM=y "$kbuild/.config" 2>/dev/null; then
			echo debug
		else
			echo lab
		fi
	elif [ -n "${MEMCG_LAB_DEBUG:-}" ]; then
		echo debug
	else
		echo lab
	fi
}

# --- what the lab needs of any kernel ---------------------------------
# Every option a kernel must have for the lab to boot it in QEMU and
# measure it, and why: the one list.  lab/build-kernel.sh fails a build
# that lacks one (a tree whose Kconfig dropped or renamed it), and
# run-scenario.sh a MEMCG_LAB_KBUILD folder, naming each.  "=y" means
# built in (the guest image has no modules), "=n" not set.  Derived from
# what run-scenario.sh's QEMU command line, the rootfs, the guest's
# runner (scenarios/lib, scenarios/shapes) and the guest tools use; an
# option only some scenarios or arms use (XFS, LRU_GEN for mglru, the
# series) is not here: check_arm_runs_on_kernel and the scenarios judge
# those.
LAB_NEEDED_KERNEL_OPTIONS=(
	"CONFIG_SMP=y the guest refuses to run on fewer CPUs than GUEST_CPUS"
	"CONFIG_SERIAL_8250=y console=ttyS0: progress, throttle requests, splats"
	"CONFIG_SERIAL_8250_CONSOLE=y console=ttyS0: progress, throttle requests, splats"
	"CONFIG_VIRTIO_PCI=y the disks and shares are virtio PCI devices"
	"CONFIG_VIRTIO_BLK=y the root image, the stick and the fast disk"
	"CONFIG_NET_9P=y the lab and results shares (9p)"
	"CONFIG_NET_9P_VIRTIO=y the lab and results shares (virtio-9p-pci)"
	"CONFIG_9P_FS=y the lab and results shares (mount -t 9p)"
	"CONFIG_EXT4_FS=y the root image (rootfstype=ext4) and the fast disk"
	"CONFIG_VFAT_FS=y the stick's filesystem (STICK_FS=vfat by default)"
	"CONFIG_NLS_CODEPAGE_437=y vfat's default codepage, or its mount fails"
	"CONFIG_NLS_ISO8859_1=y vfat's default iocharset, or its mount fails"
	"CONFIG_TMPFS=y systemd's /run; pinned-floor's pinned memory"
	"CONFIG_DEVTMPFS=y systemd's /dev"
	"CONFIG_CGROUPS=y systemd and the scenarios' cgroup tree"
	"CONFIG_INOTIFY_USER=y systemd"
	"CONFIG_SIGNALFD=y systemd"
	"CONFIG_TIMERFD=y systemd"
	"CONFIG_EPOLL=y systemd"
	"CONFIG_FHANDLE=y systemd"
	"CONFIG_UNIX=y systemd and journald sockets"
	"CONFIG_MEMCG=y memory.stat/events/current of every cgroup: what the lab measures"
	"CONFIG_CGROUP_WRITEBACK=y writeback per memcg: the dirtier's own dirty and writeback pages"
	"CONFIG_BLK_CGROUP=y io.stat per cgroup (the sampler)"
	"CONFIG_PSI=y memory.pressure: the neighbour's cost"
	"CONFIG_PSI_DEFAULT_DISABLED=n PSI on without psi=1"
	"CONFIG_TRANSPARENT_HUGEPAGE=y guest-state.txt reads /sys/kernel/mm/transparent_hugepage"
	"CONFIG_FTRACE=y tracefs events: reclaim-throttle.csv, attribution.csv"
	"CONFIG_HIST_TRIGGERS=y in-kernel sums: reclaim-throttle.csv, lab-reclaim-attrib"
	"CONFIG_SYNTH_EVENTS=y lab-reclaim-attrib's reclaim pass times"
	"CONFIG_DEBUG_FS=y the stick's bdi state (bdi-stick.csv)"
)

# Prints one line per needed option the .config ($1) lacks: "CONFIG_X=y
# (why; got: value)".  Prints nothing for a kernel that has them all.
missing_needed_options() {
	local config=$1 entry want sym val got
	for entry in "${LAB_NEEDED_KERNEL_OPTIONS[@]}"; do
		want=${entry%% *}
		sym=${want%%=*}
		val=${want#*=}
		got=$(grep -E "^$sym=" "$config" 2>/dev/null | cut -d= -f2- || true)
		if [ "$val" = n ]; then
			[ -z "$got" ] || [ "$got" = n ] && continue
		else
			[ "$got" = "$val" ] && continue
		fi
		echo "$want (${entry#* }; got: ${got:-not set})"
	done
}

# Fails, naming every needed option the .config ($1) lacks; $2 says
# whose kernel it is.
check_needed_options() {
	local config=$1 what=$2 missing=()
	[ -f "$config" ] || die "$what: no $config"
	mapfile -t missing < <(missing_needed_options "$config")
	[ ${#missing[@]} -eq 0 ] && return 0
	local m
	for m in "${missing[@]}"; do
		log "  $m"
	done
	die "$what lacks ${#missing[@]} option(s) the lab needs (above; the list: LAB_NEEDED_KERNEL_OPTIONS in lab/lib.sh)"
}

# Hash of files' contents (and their names), used as a rebuild key.
content_hash() {
	local f
	for f in "$@"; do
		[ -e "$f" ] || die "missing input for hash: $f"
		printf '%s\0' "${f#"$LAB_ROOT"/}"
		if [ -d "$f" ]; then
			# Symlinks count by their target: masked units are
			# links to /dev/null.
			(cd "$f" && find . -type f -print0 | LC_ALL=C sort -z |
				xargs -0 -r sha256sum &&
				find . -type l -printf '%p -> %l\n' | LC_ALL=C sort)
		else
			sha256sum <"$f"
		fi
	done | sha256sum | cut -c1-16
}

# Patches listed in patches/series, in order, as absolute paths.
series_patches() {
	local line
	[ -f "$LAB_ROOT/patches/series" ] || die "patches/series is missing"
	while IFS= read -r line || [ -n "$line" ]; do
		line=${line%%#*}
		line=${line//[[:space:]]/}
		[ -n "$line" ] || continue
		[ -f "$LAB_ROOT/patches/$line" ] ||
			die "patches/series lists $line, which is not in patches/"
		printf '%s\n' "$LAB_ROOT/patches/$line"
	done <"$LAB_ROOT/patches/series"
}

# Hash of patches/series and every patch it lists: the series' identity
# (lab/build-kernel.sh's tree, lab/build-kselftests.sh's lru-immediate).
series_hash() {
	local patches=()
	mapfile -t patches < <(series_patches)
	content_hash "$LAB_ROOT/patches/series" "${patches[@]}"
}

# Files of the source tree that no kernel build reads: a patch that
# touches only these (the series' selftest) must not force a rebuild.
KERNEL_UNBUILT_PATHS='tools/|Documentation/|MAINTAINERS$'

# The hash of the series' patches that change what the kernel build
# reads, in series order: it names the kernel tree and the bzImage.
kernel_series_hash() {
	local p files patches=()
	while IFS= read -r p; do
		files=$(sed -n 's|^diff --git a/\([^ ]*\) .*|\1|p' "$p")
		grep -Eqv "^($KERNEL_UNBUILT_PATHS)" <<<"$files" && patches+=("$p")
	done < <(series_patches)
	[ ${#patches[@]} -gt 0 ] || { echo none; return; }
	content_hash "${patches[@]}"
}

# Sets KERNEL_CC for kernel builds: gcc through ccache when it is
# installed, with the cache and sloppiness every lab build shares (so
# the lab, debug and check-series builds hit each other's objects).
setup_kernel_cc() {
	export CCACHE_DIR=${CCACHE_DIR:-$LAB_CACHE/ccache}
	export CCACHE_SLOPPINESS=time_macros,include_file_mtime,include_file_ctime
	KERNEL_CC=gcc
	if command -v ccache >/dev/null; then
		KERNEL_CC="ccache gcc"
	fi
}

# Prints the last lines of a log when a long step fails.
run_logged() {
	local logfile=$1
	shift
	if ! "$@" >>"$logfile" 2>&1; then
		tail -n 30 "$logfile" >&2
		die "'$*' failed; full log: $logfile"
	fi
}
