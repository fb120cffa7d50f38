#!/usr/bin/env bash
# The project's tests.  `make test` runs "all"; "unit" skips the boot.
#   run-tests.sh unit|all
set -euo pipefail
cd "$(dirname "$0")/.."
. lab/lib.sh

MODE=${1:-all}
case $MODE in unit | all) ;; *) die_usage "usage: run-tests.sh unit|all" ;; esac

shell_scripts() {
	git ls-files '*.sh' 'guest-rootfs/overlay/usr/local/sbin/*' 2>/dev/null ||
		find . -name '*.sh' -not -path './build/*'
}

log "shellcheck"
mapfile -t scripts < <(shell_scripts)
shellcheck -S warning -x "${scripts[@]}"

log "guest C tools build with -Wall -Wextra -Werror"
TOOLS_OUT=$LAB_ROOT/build/tools
make -s -C guest-rootfs/tools O="$TOOLS_OUT" >/dev/null

log "host unit tests"
LAB_TOOLS=$TOOLS_OUT /usr/bin/python3 -m pytest -q tests/unit

[ "$MODE" = all ] || exit 0

log "boot test: the smoke scenario on the lab kernel in QEMU"
SMOKE_RESULTS=$LAB_ROOT/build/test-results
mkdir -p "$SMOKE_RESULTS"
MEMCG_LAB_RESULTS=$SMOKE_RESULTS lab/run-scenario.sh smoke vanilla
run=$(ls -d "$SMOKE_RESULTS"/smoke/*-vanilla* | tail -n 1)
LAB_SMOKE_RUN=$run /usr/bin/python3 -m pytest -q tests/boot
