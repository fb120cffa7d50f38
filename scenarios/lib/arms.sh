# shellcheck shell=bash
# The arms table (scenarios/arms.tsv, which says what each column means)
# for bash: the one shell reader of it, sourced on the host
# (lab/run-scenario.sh, lab/matrix.sh, from the repository) and in the
# guest (guest-run.sh, from the lab share, where the table is
# /lab/arms.tsv).  Sourcing it loads the table; a malformed table ends
# the sourcing script, naming the line, before any arm is used.
#
# After loading:
#   ARM_NAMES           the arms, in the table's order
#   ARM_GUEST_WRITE     arm -> FILE=VALUE the guest writes, or -
#   ARM_KERNEL_NEEDS    arm -> comma-separated needs, or -
#   ARM_DESCRIPTION     arm -> one line
#   ARM_RENAMED         an old name -> the arm it is now

ARMS_TABLE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/arms.tsv

arms_table_error() {
	printf 'error: %s:%s: %s\n' "$ARMS_TABLE" "$1" "$2" >&2
	exit 1
}

# A name may stand once in the table, as an arm or as an old name: the
# analysis maps each old name to one arm.
is_arm_or_old_name() {
	[ -n "${ARM_GUEST_WRITE[$1]+set}" ] || [ -n "${ARM_RENAMED[$1]+set}" ]
}

# The header row names the columns; fields are found by name, so a
# column added to the table does not move the others.
load_arms_table() {
	local line lineno=0 i name old fields=() header=() olds=()
	local -A column=()
	declare -ga ARM_NAMES=()
	declare -gA ARM_GUEST_WRITE=() ARM_KERNEL_NEEDS=() ARM_DESCRIPTION=() ARM_RENAMED=()
	[ -r "$ARMS_TABLE" ] || arms_table_error 0 "cannot read the arms table"
	while IFS= read -r line || [ -n "$line" ]; do
		lineno=$((lineno + 1))
		[[ -z $line || $line == '#'* ]] && continue
		IFS=$'\t' read -ra fields <<<"$line"
		if [ ${#header[@]} -eq 0 ]; then
			header=("${fields[@]}")
			for i in "${!header[@]}"; do
				column[${header[i]}]=$i
			done
			for name in arm guest_write kernel_needs old_names description; do
				[ -n "${column[$name]+set}" ] || arms_table_error "$lineno" "the header has no column $name"
			done
			continue
		fi
		[ ${#fields[@]} -eq ${#header[@]} ] ||
			arms_table_error "$lineno" "${#fields[@]} fields, the header has ${#header[@]} (one tab between fields, - for none)"
		name=${fields[column[arm]]}
		[[ $name =~ ^[A-Za-z0-9_]+$ ]] ||
			arms_table_error "$lineno" "arm '$name': letters, digits and _ only (a run folder ends in -<arm>)"
		! is_arm_or_old_name "$name" ||
			arms_table_error "$lineno" "arm $name is defined twice"
		ARM_NAMES+=("$name")
		ARM_GUEST_WRITE[$name]=${fields[column[guest_write]]}
		ARM_KERNEL_NEEDS[$name]=${fields[column[kernel_needs]]}
		ARM_DESCRIPTION[$name]=${fields[column[description]]}
		[ "${fields[column[old_names]]}" != - ] || continue
		IFS=, read -ra olds <<<"${fields[column[old_names]]}"
		for old in "${olds[@]}"; do
			! is_arm_or_old_name "$old" ||
				arms_table_error "$lineno" "old name $old is an arm or another arm's old name"
			ARM_RENAMED[$old]=$name
		done
	done <"$ARMS_TABLE"
	[ ${#ARM_NAMES[@]} -gt 0 ] || arms_table_error "$lineno" "no arms"
}

# Why NAME is not an arm, on stdout, and status 1; nothing and status 0
# for an arm.  An old name is refused, not translated: a run records the
# arm it was asked for, and a new run under an old name would be filed
# under a name the lab no longer uses.
arm_name_problem() {
	local name=$1 new
	if [ -n "$name" ] && [ -n "${ARM_GUEST_WRITE[$name]+set}" ]; then
		return 0
	fi
	if [ -n "$name" ] && [ -n "${ARM_RENAMED[$name]+set}" ]; then
		new=${ARM_RENAMED[$name]}
		echo "arm '$name' is now called '$new': ${ARM_DESCRIPTION[$new]}; arms: ${ARM_NAMES[*]}"
	else
		echo "unknown arm '$name'; arms: ${ARM_NAMES[*]}"
	fi
	return 1
}

# The names an arm's runs may carry: its own, then its old ones (run
# folders and ledger lines written before a rename).
arm_and_old_names() {
	local old
	echo "$1"
	for old in "${!ARM_RENAMED[@]}"; do
		[ "${ARM_RENAMED[$old]}" != "$1" ] || echo "$old"
	done
}

# The arms any kernel runs, on one line (those that need nothing of it).
arms_for_any_kernel() {
	local name any=()
	for name in "${ARM_NAMES[@]}"; do
		[ "${ARM_KERNEL_NEEDS[$name]}" != - ] || any+=("$name")
	done
	echo "${any[*]}"
}

# "  <arm>  <description>" a line, in the table's order (make help).
print_arms() {
	local name
	for name in "${ARM_NAMES[@]}"; do
		printf '  %-10s %s\n' "$name" "${ARM_DESCRIPTION[$name]}"
	done
}

load_arms_table
