#!/usr/bin/env bash
# Installs the Debian packages the lab needs on the host, saying which.
#   install-deps.sh [--check] [PACKAGE...]
#     --check: list what is missing, exit 1
#     PACKAGE: also these, for a step that needs them (build-kernel.sh
#     asks for linux-source-6.12 when kernel debian-6.12 is asked for)
set -euo pipefail
. "$(dirname "$0")/lib.sh"

PACKAGES=(
	linux-source-6.1 build-essential bc bison flex libelf-dev libssl-dev
	cpio kmod ccache git
	qemu-system-x86 qemu-utils
	mmdebstrap e2fsprogs dosfstools
	python3 python3-matplotlib python3-numpy python3-pandas python3-scipy
	python3-pytest shellcheck
	fio
	jupyter-nbconvert python3-nbconvert python3-nbformat python3-ipykernel
)

CHECK_ONLY=
if [ "${1:-}" = --check ]; then
	CHECK_ONLY=1
	shift
fi
PACKAGES+=("$@")

missing_packages() {
	local p
	for p in "${PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
			grep -q '^install ok installed$' || echo "$p"
	done
}

mapfile -t missing < <(missing_packages)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ -n "$CHECK_ONLY" ]; then
	printf '%s\n' "${missing[@]}"
	exit 1
fi
[ "$(id -u)" -eq 0 ] ||
	die "missing packages: ${missing[*]}; run as root: apt-get install ${missing[*]}"
log "installing missing Debian packages: ${missing[*]}"
mkdir -p "$LAB_CACHE"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q "${missing[@]}" >"$LAB_CACHE/apt.log" 2>&1; then
	log "apt-get install failed; refreshing the package lists once"
	apt-get update -q >>"$LAB_CACHE/apt.log" 2>&1 || true
	apt-get install -y -q "${missing[@]}" >>"$LAB_CACHE/apt.log" 2>&1 ||
		die "apt-get install ${missing[*]} failed; log: $LAB_CACHE/apt.log"
fi
log "installed: ${missing[*]}"
