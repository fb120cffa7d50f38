#!/usr/bin/env bash
# Build the guest's root filesystem image from Debian packages, without
# loop mounts:
#   1. mmdebstrap -> base tree (a folder), keyed on packages.list and this
#      script;
#   2. base + overlay/ + C tools -> ext4 image with mkfs.ext4 -d, keyed
#      on the base and those sources.
# (The series' kselftests are not in the image: lab/build-kselftests.sh
# builds them and lab/run-scenario.sh puts them in the lab share.)
# Prints the image path on stdout.  QEMU opens it with snapshot=on, so
# runs never write to it.
set -euo pipefail
. "$(dirname "$0")/../lab/lib.sh"

HERE=$LAB_ROOT/guest-rootfs
SUITE=${MEMCG_LAB_SUITE:-bookworm}
MIRROR=${MEMCG_LAB_MIRROR:-http://deb.debian.org/debian}
IMAGE_SIZE=${MEMCG_LAB_ROOTFS_SIZE:-2G}
OUTDIR=$LAB_CACHE/rootfs

package_list() {
	sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$HERE/packages.list" | paste -sd, -
}

# The base never sees lab code: only Debian packages and guest hygiene
# that must be applied inside the chroot.
build_base_tree() {
	local dir=$1 rc=0
	log "mmdebstrap $SUITE with: $(package_list) (log: $dir.log)"
	rm -rf "$dir.tmp"
	mmdebstrap --variant=minbase --mode=root --format=directory \
		--include="$(package_list)" \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--customize-hook='chroot "$1" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer systemd-timesyncd.service getty@tty1.service serial-getty@ttyS0.service systemd-networkd.service' \
		--customize-hook='echo memcg-lab >"$1/etc/hostname"' \
		--customize-hook='chroot "$1" passwd -d root' \
		"$SUITE" "$dir.tmp" "$MIRROR" 2>&1 |
		tee -a "$dir.log" | show_mmdebstrap_phases || rc=$?
	if [ "$rc" -ne 0 ]; then
		tail -n 30 "$dir.log" >&2
		die "mmdebstrap failed (exit $rc); full log: $dir.log"
	fi
	mv "$dir.tmp" "$dir"
}

# mmdebstrap's own lines ("I:", "W:", "E:") name its phases: apt-get
# update, download, extract, install, each hook, success in N seconds.
# They are a dozen log lines for a step of a minute or more; what the
# hooks and dpkg print stays in the log file.  Lines are cut at 100
# characters: a hook's line quotes its whole command, which is above.
show_mmdebstrap_phases() {
	local line
	while IFS= read -r line; do
		[[ $line =~ ^[IWE]:\  ]] || continue
		[ ${#line} -le 100 ] || line="${line:0:97}..."
		log "  mmdebstrap: $line"
	done
}

# The measurement tools.
# Always rebuilt (-B, seconds): the build folders in the cache are shared
# by every checkout of the lab, and make's timestamps once put a binary
# built from another checkout's older sources into an image.
build_tools() {
	local dest=$1
	run_logged "$OUTDIR/tools.log" make -B -C "$HERE/tools" \
		O="$OUTDIR/tools-build" DESTDIR="$dest" install
}

build_image() {
	local base=$1 img=$2
	TREE=$OUTDIR/tree.$$
	rm -rf "$TREE"
	trap 'rm -rf "$TREE"' EXIT
	log "assembling $img"
	cp -a "$base" "$TREE"
	cp -a "$HERE/overlay/." "$TREE/"
	build_tools "$TREE"
	rm -f "$img.tmp"
	truncate -s "$IMAGE_SIZE" "$img.tmp"
	run_logged "$OUTDIR/mkfs.log" mkfs.ext4 -q -F -L lab-root -d "$TREE" "$img.tmp"
	mv "$img.tmp" "$img"
	rm -rf "$TREE"
	trap - EXIT
}

main() {
	local base_key base image_key image
	mkdir -p "$OUTDIR"
	exec 9>"$OUTDIR/.lock"
	flock 9
	base_key=$(content_hash "$HERE/packages.list" "$HERE/build-rootfs.sh")
	base=$OUTDIR/base-$SUITE-$base_key
	[ -d "$base" ] || build_base_tree "$base"
	image_key=$base_key-$(content_hash "$HERE/overlay" "$HERE/tools")
	image=$OUTDIR/rootfs-$image_key.ext4
	[ -f "$image" ] || build_image "$base" "$image"
	# Keep only the newest image: old ones are several hundred MB each.
	find "$OUTDIR" -maxdepth 1 -name 'rootfs-*.ext4' ! -name "${image##*/}" -delete
	echo "$image"
}

# On one line, as in lab/build-kernel.sh: bash must not read an edit made
# to this file during a build; and a test sources what is above it.
main "$@"; exit
