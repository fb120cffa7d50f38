# shellcheck shell=bash
# SHAPE=kselftest-cgroup: shape_kselftest_cgroup, then the helpers only it uses
# (lib/guest-run.sh sources this file).

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
	local dir=$lab_dir/kselftest prog rc systemd_opts
	[ "$cgroup_mode" = v2 ] || die "the cgroup selftests need cgroup v2"
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
		echo "root_subtree_control=$(cat "$cgroot/cgroup.subtree_control")"
		echo "swap_devices=$(($(wc -l </proc/swaps) - 1))"
		echo "thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled)"
		echo "cwd_fs=$(stat -f -c %T /mnt/fast/kselftest)"
	} >"$out_dir/kselftest-env.txt"
	echo "program,number,test,result" >"$out_dir/kselftest.csv"
	echo "program,exit_status,seconds" >"$out_dir/kselftest-exit.csv"
	phase_begin tests measured
	[ -s "$dir/.built" ] || die "$dir/.built: no list of programs"
	# The programs lab/build-kselftests.sh built, in its order.
	for prog in $(cat "$dir/.built"); do
		[ -x "$dir/$prog" ] || die "$dir/$prog: missing from the lab share"
		say "kselftest $prog"
		# Line-buffered: the tests fork children that would otherwise
		# print the parent's unflushed results again when they exit.
		(cd /mnt/fast/kselftest &&
			exec timeout -s KILL "$KSELFTEST_TIMEOUT_S" stdbuf -oL "$dir/$prog") \
			>"$out_dir/kselftest-$prog.tap" 2>&1 &
		rc=0
		wait_with_heartbeat $! "kselftest $prog" || rc=$?
		echo "$prog,$rc,$waited_s" >>"$out_dir/kselftest-exit.csv"
		kselftest_tap_to_csv "$prog" <"$out_dir/kselftest-$prog.tap" >>"$out_dir/kselftest.csv"
		grep -E '^(not ok|ok) ' "$out_dir/kselftest-$prog.tap" | sed "s/^/kselftest $prog: /" |
			while read -r line; do say "$line"; done
		[ "$rc" -ne 137 ] || say "kselftest $prog: killed after KSELFTEST_TIMEOUT_S=$KSELFTEST_TIMEOUT_S s"
	done
	phase_end
	remount_cgroup2 "$systemd_opts"
}

# kselftest output (TAP) to CSV rows "program,number,test,result", result
# pass, fail or skip.
kselftest_tap_to_csv() {
	awk -v prog="$1" '
	/^ok [0-9]+ # SKIP / { n = $2; sub(/^ok [0-9]+ # SKIP /, ""); print prog "," n "," $0 ",skip"; next }
	/^ok [0-9]+ / { n = $2; sub(/^ok [0-9]+ /, ""); print prog "," n "," $0 ",pass"; next }
	/^not ok [0-9]+ / { n = $3; sub(/^not ok [0-9]+ /, ""); print prog "," n "," $0 ",fail" }'
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
