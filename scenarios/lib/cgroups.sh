# shellcheck shell=bash
# The cgroup v1/v2 abstraction: members (one memcg each) of the lab
# parent, run, signalled, stopped and read the same way on both
# hierarchies, so one shape runs on both (sourced by guest-run.sh; its
# header says what API and Private mean).
#
# API:
#   cg_of NAME            member NAME's path relative to cgroot
#   set_parent_limit MB   the parent's memory limit
#   list_members          the parent's member directories
#   run_in_scope NAME [MemoryMax=SIZE] -- CMD...  run CMD in the
#                         background in member NAME (scope_pid[NAME])
#   signal_member NAME SIG  SIG to every process of member NAME
#   scope_running NAME    whether run_in_scope's command still runs
#   stop_scope NAME [SIG]  SIG (SIGINT), wait up to 60 s, then SIGKILL
#   memcg_stat CG KEY     memory.stat KEY of cgroup CG (v2 key names)
#   memcg_stat_mb KEY CG...  the sum of KEY over the CGs, in MiB
#   task_cgroup PID       the cgroup of task PID, "-" once it has exited
#   member_rchar NAME     bytes the live processes of member NAME have
#                         read through read(2) and its kin (rchar)
# Private:
#   choose_cgroup_mode    the hierarchy the guest booted with: cgroup_mode,
#                         cgroot, slice
#   cgroup_roles          the role words of cgroups.csv
#   record_member NAME    member NAME's row in cgroups.csv, by its role
#   wait_member_exists NAME  until member NAME's directory appears

# Set by choose_cgroup_mode: the hierarchy the guest booted with decides.
slice=
cgroot=/sys/fs/cgroup

# cgroup v2 (the default): systemd's lab.slice with transient scopes.
# cgroup v1 (booted with systemd.unified_cgroup_hierarchy=0): memcgs made
# with cgroup-tools under the memory controller's own mount.  Shapes only
# use the functions below, so one shape runs on both.
choose_cgroup_mode() {
	if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
		cgroup_mode=v2
		cgroot=/sys/fs/cgroup
		slice=lab.slice
		key_dirty=file_dirty
		key_writeback=file_writeback
	else
		cgroup_mode=v1
		cgroot=/sys/fs/cgroup/memory
		slice=memcg-lab
		key_dirty=dirty
		key_writeback=writeback
		[ -d "$cgroot" ] || die "cgroup v1 without a memory controller mount at $cgroot"
		cgcreate -g "memory:$slice" || die "cgcreate -g memory:$slice failed"
	fi
	echo "cgroup_mode=$cgroup_mode parent=$slice" >>"$out_dir/guest-state.txt"
}

# The roles the run's cgroups play, the words of cgroups.csv's role
# column, from which the analysis knows the parent, the dirtiers and the
# neighbour instead of knowing their names.  A member's role is its name
# without a "-<n>" index (dirtier-2 is a dirtier):
#   parent     the lab parent, slice (written with the first member)
#   dirtier    the writer whose dirty and writeback pages fill its LRU
#              (dirtier; dirtier-<n> in dirty-many and stress)
#   neighbour  the cgroup that pays: the measured phase's reader and probe
#   copier     writeback-cp's copy loop to the stick (copier-<n>)
#   alloc      the allocator of writeback-cp and stress (alloc-<n>)
#   churn      stress's short-lived writer in a small memcg, removed
#              while its pages are under writeback (churn-<n>)
# The one list on the guest side; analysis/memcg_lab/run.py ROLES is the
# analysis's, and tests/unit/test_cgroups_csv.py keeps the two equal.  A
# function, not a variable: resolve_parameters records every upper-case
# variable as a parameter of the run.
cgroup_roles() { echo parent dirtier neighbour copier alloc churn; }

# Member NAME's row of cgroups.csv ("role,cgroup", the cgroup relative to
# cgroot as the sampler names it), after the header and the parent's row
# with the first member.  A name without a role stops the run before its
# workload starts: a member the analysis cannot place is a shape to fix.
# The same member started again is one row.
record_member() {
	local role=${1%-[0-9]*} csv=$out_dir/cgroups.csv row
	[[ $role != parent && " $(cgroup_roles) " == *" $role "* ]] ||
		die "member $1 has no role: its name less any -<n> must be one of: $(cgroup_roles) (cgroups.sh, cgroup_roles)"
	[ -e "$csv" ] || printf 'role,cgroup\nparent,%s\n' "$slice" >"$csv"
	row=$role,$(cg_of "$1")
	grep -qxF "$row" "$csv" || echo "$row" >>"$csv"
}

# The cgroup path (relative to cgroot) of member NAME of the lab parent.
cg_of() {
	if [ "$cgroup_mode" = v2 ]; then
		echo "$slice/$1.scope"
	else
		echo "$slice/$1"
	fi
}

# MemoryMax of the parent, in MiB.
set_parent_limit() {
	if [ "$cgroup_mode" = v2 ]; then
		systemctl set-property --runtime "$slice" MemoryMax="$1M" ||
			die "systemctl set-property $slice MemoryMax=$1M failed"
	else
		cgset -r memory.limit_in_bytes="$1M" "$slice" ||
			die "cgset memory.limit_in_bytes=$1M $slice failed"
	fi
}

list_members() {
	find "$cgroot/$slice" -mindepth 1 -maxdepth 1 -type d | sort
}

# $2 may be written with the v2 names file_dirty / file_writeback.
memcg_stat() {
	local key=$2
	case $key in file_dirty) key=$key_dirty ;; file_writeback) key=$key_writeback ;; esac
	awk -v k="$key" '$1 == k {print $2}' "$cgroot/$1/memory.stat" 2>/dev/null
}

# Runs a command in the background in member NAME of the lab parent: a
# transient scope NAME.scope (v2) or a memcg made with cgcreate and
# entered with cgexec (v1).  The only property is MemoryMax=<size>, given
# before "--".  Every member is made here, so its role is recorded here
# (record_member), and no shape repeats it.
declare -A scope_pid
run_in_scope() {
	local name=$1 max=
	shift
	record_member "$name"
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		case $1 in
		MemoryMax=*) max=${1#MemoryMax=} ;;
		*) die "run_in_scope: unsupported property $1" ;;
		esac
		shift
	done
	[ "${1:-}" = -- ] && shift
	if [ "$cgroup_mode" = v2 ]; then
		systemd-run --quiet --scope --collect --unit="$name" --slice="$slice" \
			${max:+-p MemoryMax="$max"} "$@" &
	else
		cgcreate -g "memory:$slice/$name" || die "cgcreate memory:$slice/$name failed"
		if [ -n "$max" ]; then
			cgset -r memory.limit_in_bytes="$max" "$slice/$name" ||
				die "cgset memory.limit_in_bytes=$max $slice/$name failed"
		fi
		cgexec -g "memory:$slice/$name" "$@" &
	fi
	scope_pid[$name]=$!
	wait_member_exists "$name"
}

wait_member_exists() {
	local i
	for i in $(seq 50); do
		[ -d "$cgroot/$(cg_of "$1")" ] && return 0
		sleep 0.1
	done
	die "$(cg_of "$1") did not appear under $cgroot"
}

# Sends a signal to every process of member NAME.
signal_member() {
	if [ "$cgroup_mode" = v2 ]; then
		systemctl kill --signal="$2" "$1.scope" 2>/dev/null || true
	else
		xargs -r kill -s "${2#SIG}" <"$cgroot/$(cg_of "$1")/cgroup.procs" 2>/dev/null || true
	fi
}

scope_running() { kill -0 "${scope_pid[$1]}" 2>/dev/null; }

# The sum of /proc/PID/io's rchar over member NAME's processes: what a
# reader has read so far, page cache hits and misses alike, and none of
# its page faults.  A process that exits meanwhile counts 0.
member_rchar() {
	local pid sum=0 n
	while read -r pid; do
		n=$(awk '$1 == "rchar:" { print $2 }' "/proc/$pid/io" 2>/dev/null) || n=0
		sum=$((sum + ${n:-0}))
	done <"$cgroot/$(cg_of "$1")/cgroup.procs"
	echo "$sum"
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
		echo "$name killed after 60 s" >>"$out_dir/notes.txt"
	fi
	wait "${scope_pid[$name]}" || true
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
