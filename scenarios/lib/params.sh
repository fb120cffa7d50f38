# shellcheck shell=bash
# The run's parameters and the kernel's settings: provenance, the
# scenario's resolved parameters, sysctls, the arm (sourced by
# guest-run.sh; its header says what API and Private mean).
#
# API:
#   apply_sysctls         each SYSCTLS entry, by sysctl -w
# Private:
#   cmdline_value KEY     the kernel command line's value of KEY
#   record_guest_provenance  what the guest is: cmdline, uname, config, ...
#   guest_cpu_mbps        how fast this guest's CPU hashes, in MB/s
#   resolve_parameters    params.env, then the scenario's defaults;
#                         params-resolved.env
#   write_parameters DEFINED_BEFORE  the parameters defined since, as
#                         params-resolved.env holds them
#   apply_arm             what the arm ARM writes (scenarios/arms.tsv);
#                         arm.txt

# The value of kernel parameter $1 (its last, as the kernel takes it).
cmdline_value() {
	tr ' ' '\n' </proc/cmdline | sed -n "s/^$1=//p" | tail -n 1
}

record_guest_provenance() {
	cp /proc/cmdline "$out_dir/cmdline.txt"
	uname -a >"$out_dir/uname.txt"
	sysctl -a >"$out_dir/sysctl.txt" 2>/dev/null || true
	zcat /proc/config.gz >"$out_dir/guest-kernel.config" 2>/dev/null ||
		echo "CONFIG_IKCONFIG_PROC not available" >"$out_dir/guest-kernel.config"
	cp /proc/meminfo "$out_dir/meminfo-start.txt"
	cp /proc/vmstat "$out_dir/vmstat-start.txt"
	dpkg-query -W -f='${Package} ${Version}\n' >"$out_dir/rootfs-packages.txt" 2>/dev/null ||
		echo "dpkg-query failed" >"$out_dir/rootfs-packages.txt"
	{
		echo "cgroup_fs=$(stat -fc %T "$cgroot")"
		# MGLRU as booted; arm.txt has it as the arm left it.
		echo "lru_gen_at_boot=$(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo absent)"
		echo "thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled)"
		echo "cpus_online=$(nproc)"
		# tsc, or jiffies (1 ms) when the TSC was dropped: see host_tsc_khz
		# in lab/run-scenario.sh.
		echo "clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
		echo "boot_trace_events=$(boot_trace_events | paste -sd' ')"
		echo "guest_cpu_mbps=$(guest_cpu_mbps)"
	} >"$out_dir/guest-state.txt"
}

# The guest's CPU speed under TCG, measured, not assumed: one host ran
# the same build twice as fast 4 h apart (boot 12 s then 6 s, stick
# layout 64 s then 36 s), and reclaim counts moved with it.  Comparing
# this figure tells runs of one speed from a drifted batch.  The best of
# three hashes of 8 MiB (about a second in all under TCG here), so that
# what else the booting guest runs meanwhile does not count.
guest_cpu_mbps() {
	local t0 t1 i mbps best=0
	for i in 1 2 3; do
		t0=$(date +%s%N)
		head -c 8M /dev/zero | sha256sum >/dev/null
		t1=$(date +%s%N)
		mbps=$((8 * 1048576 * 1000 / (t1 - t0 + 1)))
		[ "$mbps" -le "$best" ] || best=$mbps
	done
	echo "$best"
}

# The scenario's parameters are declared where they are assigned: by
# params.env (the host's KERNEL_*, GUEST_CPUS and SET), by the scenario
# file and the bases it sources, and here (MEM_MB, the sampler's
# intervals).  What was defined before is the shell's, systemd's or the
# runner's (lower-case), never a parameter, so params-resolved.env holds
# exactly the upper-case names defined since, and the run's identity.
resolve_parameters() {
	local defined_before
	[ -f "$lab_dir/$SCENARIO.scenario" ] || die "no scenario $SCENARIO"
	SCENARIO_DIR=$lab_dir
	defined_before=" $(compgen -v | tr '\n' ' ') "
	MEM_MB=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
	# Host overrides (make scenario SET="...") come first: scenario files
	# only assign defaults with ${VAR:=...}.
	[ -f "$out_dir/params.env" ] && . "$out_dir/params.env"
	. "$lab_dir/$SCENARIO.scenario"
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
	write_parameters "$defined_before" >"$out_dir/params-resolved.env"
}

# The parameters, as `set` quotes them, one a line in name order: the
# upper-case names not in DEFINED_BEFORE (bash's own BASH_* aside, which
# appear as the shell is used), and SCENARIO and ARM.
#   write_parameters DEFINED_BEFORE
write_parameters() {
	local v names=(ARM SCENARIO)
	for v in $(compgen -v); do
		[[ $v =~ ^[A-Z][A-Z0-9_]*$ && $v != BASH* && $1 != *" $v "* ]] && names+=("$v")
	done
	set | grep -E "^($(IFS='|' && echo "${names[*]}"))="
}

writeback_policy=/proc/sys/vm/reclaim_writeback_policy
# An arm writes one value into one kernel file, or nothing (the table's
# guest_write).  The host refuses an arm the kernel cannot run before
# the boot (check_arm_runs_on_kernel, on its .config and System.map);
# the guest checks again on the running kernel, and names what is
# missing, rather than measure under the wrong policy.
apply_arm() {
	local problem write file value
	# The arms table (/lab/arms.tsv) and its reader, loaded here, their
	# one user, so that sourcing the runner (as tests do) needs no /lab.
	. "$lab_dir/lib/arms.sh"
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
		echo "reclaim_writeback_policy=$(cat "$writeback_policy" 2>/dev/null || echo absent)"
		echo "memcg_dirty_limit=$(cat /proc/sys/vm/memcg_dirty_limit 2>/dev/null || echo absent)"
	} >"$out_dir/arm.txt"
}

apply_sysctls() {
	local kv
	for kv in ${SYSCTLS:-}; do
		sysctl -q -w "$kv" || die "sysctl $kv failed"
	done
}
