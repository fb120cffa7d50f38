#!/usr/bin/env bash
# Compares the objects of two kernel build folders, for check-series.sh
# --n-vs-vanilla: is the series with CONFIG_LRU_IMMEDIATE=n vanilla's code?
#
#   compare-objects.sh VANILLA_DIR OTHER_DIR REPORT DIR... [-- ALLOWED...]
#
# Compares every *.o under DIR... (relative to the build folders) byte
# for byte, without what carries source line numbers, which any patch
# shifts: __bug_table (WARN/BUG entries) and the names of local symbols
# no relocation needs (initcalls are named __initcall__kmod_*_LINE_*).
# Code, data, relocations and global symbols are all compared.  An
# object only one folder has differs.
# Writes "same|differs PATH" lines to REPORT and prints one summary
# line.  Exits 0 if every differing object is in ALLOWED (and at least
# one is the same), 1 otherwise, 2 on bad usage.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

strip_line_numbers() {
	objcopy --strip-unneeded -R __bug_table -R .rela__bug_table "$1" "$2" ||
		die "objcopy failed on $1"
}

# Prints "same" or "differs" for one object in both folders.
compare_object() {
	local a=$1 b=$2 tmp result=differs
	if [ ! -f "$a" ] || [ ! -f "$b" ]; then
		echo differs
		return 0
	fi
	tmp=$(mktemp -d)
	strip_line_numbers "$a" "$tmp/a.o"
	strip_line_numbers "$b" "$tmp/b.o"
	cmp -s "$tmp/a.o" "$tmp/b.o" && result=same
	rm -rf "$tmp"
	echo "$result"
}

is_allowed() {
	local a
	for a in "${ALLOWED[@]}"; do
		[ "$1" = "$a" ] && return 0
	done
	return 1
}

# Object paths of both folders, relative, sorted, each once.
object_paths() {
	local d
	for d in "$VANILLA" "$OTHER"; do
		(cd "$d" && find "${DIRS[@]}" -name '*.o' 2>/dev/null) || true
	done | LC_ALL=C sort -u
}

main() {
	[ $# -ge 4 ] || die_usage "usage: compare-objects.sh VANILLA_DIR OTHER_DIR REPORT DIR... [-- ALLOWED...]"
	VANILLA=$1 OTHER=$2 REPORT=$3
	shift 3
	DIRS=() ALLOWED=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		DIRS+=("$1")
		shift
	done
	[ $# -eq 0 ] || { shift; ALLOWED=("$@"); }
	local d rel result same=0 expected=() unexpected=()
	for d in "$VANILLA" "$OTHER"; do
		[ -d "$d" ] || die_usage "no such build folder: $d"
	done
	: >"$REPORT" || die "cannot write $REPORT"
	while IFS= read -r rel; do
		result=$(compare_object "$VANILLA/$rel" "$OTHER/$rel")
		echo "$result $rel" >>"$REPORT"
		if [ "$result" = same ]; then
			same=$((same + 1))
		elif is_allowed "$rel"; then
			expected+=("$rel")
		else
			unexpected+=("$rel")
		fi
	done < <(object_paths)
	if [ ${#unexpected[@]} -eq 0 ] && [ $same -gt 0 ]; then
		echo "$same objects identical; differ as allowed: ${expected[*]:-none}"
		return 0
	fi
	echo "$same identical; differ: ${unexpected[*]:-none}; see $REPORT"
	return 1
}

main "$@"
