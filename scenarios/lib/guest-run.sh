#!/bin/bash
# Runs inside the guest (started by memcg-lab-agent): resolves a scenario's
# parameters, prepares disks and cgroups, runs the scenario's shape and
# leaves everything in /results.  Shared over 9p, so editing it or a
# scenario needs no image rebuild.
#
#   guest-run.sh SCENARIO ARM
#
# This file is the entry point (the agent in the rootfs runs this path)
# and holds only the run's order, at its end.  The runner is the modules
# beside it, one concern each:
#   log.sh          say, die, phases
#   params.sh       provenance, parameters, sysctls, the arm (via arms.sh)
#   disks.sh        the stick and the fast disk, their laid-out files,
#                   the stick's throttle
#   cgroups.sh      the cgroup v1/v2 abstraction: members of the lab
#                   parent, memcg stats
#   instruments.sh  sampler, attribution, trace hists, heartbeat
#   workloads.sh    dirtiers, the ramp, the neighbour's phase, waits
# (arms.sh, the arms table's reader, is loaded by apply_arm; neighbour.sh
# is the neighbour's workload, run in its own cgroup, not sourced.)
# A shape, the procedure a scenario's SHAPE= names, is one file,
# ../shapes/<shape>.sh: shape_<shape> and the helpers only it uses.
#
# The runner's API, and the convention that marks it: each module's
# header lists under "API:" the functions a shape may call, one a line
# with its arguments, and under "Private:" the functions only the runner
# itself calls (this file and the modules).  A shape calls API functions
# and its own helpers, never a private function or another shape's
# helpers (tests/unit/test_runner_api.py checks).
#
# Two namespaces: the scenario's parameters are UPPER_CASE (what
# params.env and the scenario files define, and the run's identity,
# SCENARIO and ARM: params-resolved.env holds exactly these); the
# runner's own globals are lower_case, so that none passes for a
# parameter or is overridden by one (arms.sh's ARM_* tables, which the
# host's scripts share, are read only after the parameters are written).  Besides the parameters, a shape
# reads these runner globals: lab_dir (this share), out_dir (the
# results), cgroup_mode, cgroot and slice (cgroups.sh), scope_pid
# (run_in_scope), writeback_policy (params.sh) and waited_s
# (wait_with_heartbeat).
#
# Sourced, as `source scenarios/lib/guest-run.sh SCENARIO ARM`, it defines
# the runner's functions and globals and runs nothing (the host's unit
# tests use it so); executed, it runs the scenario.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

lab_dir=/lab
out_dir=/results
SCENARIO=$1
ARM=$2

# Where this file is: /lab/lib in the guest, scenarios/lib on the host.
_runner_dir=$(dirname "${BASH_SOURCE[0]}")
# shellcheck source=log.sh
. "$_runner_dir/log.sh"
# shellcheck source=params.sh
. "$_runner_dir/params.sh"
# shellcheck source=disks.sh
. "$_runner_dir/disks.sh"
# shellcheck source=cgroups.sh
. "$_runner_dir/cgroups.sh"
# shellcheck source=instruments.sh
. "$_runner_dir/instruments.sh"
# shellcheck source=workloads.sh
. "$_runner_dir/workloads.sh"
# Every shape, not only SHAPE's: SHAPE is known once resolve_parameters
# has read the scenario, and it checks SHAPE against the functions
# defined.  So a shape file only defines (functions, constants).
# ShellCheck checks each shape file on its own.
for _runner_shape in "$_runner_dir"/../shapes/*.sh; do
	# shellcheck source=/dev/null
	. "$_runner_shape"
done
unset _runner_dir _runner_shape

# Private:
#   finish_run    the end of every run: end-of-run files, the drain phase

finish_run() {
	cp /proc/vmstat "$out_dir/vmstat-end.txt"
	cp /proc/meminfo "$out_dir/meminfo-end.txt"
	# Writeback drains at full speed: the clean shutdown must not wait
	# minutes for a 4 MB/s disk.
	say "measurement done: drain"
	stick_throttle off
	phase_begin drain
	sync
	phase_end
}

# Sourced, the runner stops here; executed, it runs these steps.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

# A command that fails under set -e, not through die, ends the run with
# no word of why (a 6.12 queue file once did): name it, and clean up as
# die does.  An EXIT trap, not ERR with set -E: that one would also fire,
# and kill the workloads, in command substitutions whose failure the
# caller tests.
trap 'rc=$?; [ "$rc" -eq 0 ] || [ -n "${dying:-}" ] ||
	die "the runner stopped (status $rc) on: $BASH_COMMAND"' EXIT

record_guest_provenance
quiesce_tracing
resolve_parameters
check_profile
choose_cgroup_mode
apply_arm
say "running $SCENARIO (shape $SHAPE, arm $ARM, guest ${MEM_MB}M)"
"shape_${SHAPE//-/_}"
finish_run
say "scenario $SCENARIO done"
