# shellcheck shell=bash
# SHAPE=invariants: shape_invariants (lib/guest-run.sh sources this file).

# The patch series' invariant tests, its kselftest test_lru_immediate
# (the series' selftest patch, built by lab/build-kselftests.sh
# lru-immediate, in the lab share), on the throttled stick; KTAP in
# kselftest-test_lru_immediate.tap.
# They make their own memcgs under a parent of the root, outside
# systemd's slices; their exit status is the run's.  The harness takes no
# options: the parameters go in LRU_IMMEDIATE_* environment variables.
shape_invariants() {
	local parent=$cgroot/memcg-lab-invariants rc=0 prog=$lab_dir/kselftest/test_lru_immediate
	local tap=$out_dir/kselftest-test_lru_immediate.tap
	[ "$cgroup_mode" = v2 ] || die "the invariant tests need cgroup v2"
	[ -x "$prog" ] || die "no $prog: the scenario must set KSELFTESTS=lru-immediate"
	prepare_stick
	apply_sysctls
	stick_throttle on
	mkdir -p "$parent"
	echo +memory >"$parent/cgroup.subtree_control" ||
		die "cannot enable the memory controller in $parent"
	# The tests' memcgs (see test_lru_immediate.c), sampled while they exist.
	local rel=${parent#"$cgroot"/} cgs=() t
	for t in park activate immediate toggle rmdir fadvise-dontneed compact_memory mlock truncate strand mglru large; do
		cgs+=("$rel/$t")
	done
	start_sampler "$rel" "${cgs[@]}"
	phase_begin tests measured
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
