#!/usr/bin/env bash
# fresh-debian.sh — proves `make bench` and `make test` on a machine that has never seen ringo:
# debootstraps a minimal Debian 12 (bookworm) root, clones this repository into it and runs both
# as root in a chroot, every package coming from .ci/deps.sh. Not part of CI (minutes, a base
# system downloaded). Run as root: .ci/fresh-debian.sh [ROOT_DIR] (default /tmp/ringo-bookworm).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-/tmp/ringo-bookworm}
# The archive this machine's apt already reaches (its sources), so nothing else must be reachable.
mirror=${MIRROR:-$(sed -n 's/^URIs: *\(\S*debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)}
mirror=${mirror:-$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)}
mirror=${mirror:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "fresh-debian: run as root (debootstrap and chroot)"; exit 1; }
command -v debootstrap >/dev/null || { echo "fresh-debian: needs debootstrap (apt-get install debootstrap)"; exit 1; }

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -R -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
# bind MOUNT_ARGS... TARGET: mounts, makes it a slave (nothing mounted or unmounted below it in
# the root travels back to the host's /dev, whose /dev/shm other programs use), remembers it.
bind() {
  local target=${*: -1}
  mkdir -p "$target"
  mount "$@"
  mount --make-rslave "$target"
  mounted+=("$target")
}

t0=$SECONDS
# debootstrap removes ROOT/debootstrap/ when it has finished: a root without it is complete.
if [ ! -x "$root/usr/bin/apt-get" ] || [ -d "$root/debootstrap" ]; then
  echo "=== debootstrap bookworm (minbase: essential packages and apt only) from $mirror into $root"
  rm -rf "$root"
  debootstrap --variant=minbase bookworm "$root" "$mirror"
else
  echo "=== reusing the bookworm root in $root (delete it for a new one)"
fi
echo "deb $mirror bookworm main" > "$root/etc/apt/sources.list"
# Name service as on this machine (apt reaches the archive; Gloo and Open MPI resolve this host).
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
cp /etc/hosts "$root/etc/hosts" 2>/dev/null || true
dpkg-query -W -f '${Package}\n' --admindir="$root/var/lib/dpkg" | sort > "$root/tmp/packages-before"
echo "=== base system: $(wc -l < "$root/tmp/packages-before") packages, $((SECONDS - t0)) s"

# A clean clone of what is committed here: no build folder, nothing untracked.
rm -rf "$root/root/ringo"
git clone -q "$repo" "$root/root/ringo"
echo "=== cloned $(git -C "$repo" rev-parse --short HEAD) into $root/root/ringo"

bind -t proc proc "$root/proc"
bind -t sysfs sys "$root/sys"
bind --rbind /dev "$root/dev"
# The shm FIFOs and the one-shot boards live in /dev/shm: a tmpfs of the root's own.
bind -t tmpfs -o size=4g,mode=1777 shm "$root/dev/shm"

# No git in the root: the clone is there already. A bare Debian has no make to run a target with,
# so `.ci/deps.sh make` installs make alone; everything else comes from the targets' own calls.
run_in_root() { chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
                  LANG=C.UTF-8 bash -c "set -o pipefail; cd /root/ringo && $1"; }
status=0
t=$SECONDS
run_in_root ".ci/deps.sh make" || status=1
echo "=== .ci/deps.sh make: $((SECONDS - t)) s"
t=$SECONDS
run_in_root "make bench 2>&1 | tail -n 40" || status=1
run_in_root "test -x build/bin/ringo-bench" || status=1
echo "=== make bench: $((SECONDS - t)) s (build included)"
t=$SECONDS
run_in_root "make test > /root/make-test.log 2>&1; rc=\$?; tail -n 60 /root/make-test.log; exit \$rc" || status=1
echo "=== make test: $((SECONDS - t)) s"

dpkg-query -W -f '${Package}\n' --admindir="$root/var/lib/dpkg" | sort > "$root/tmp/packages-after"
echo "=== packages installed on top of the base system (by .ci/deps.sh, with their dependencies):"
comm -13 "$root/tmp/packages-before" "$root/tmp/packages-after" | tr '\n' ' ' | fold -s -w 100
echo
echo "=== fresh-debian: $([ $status -eq 0 ] && echo passed || echo FAILED) in $((SECONDS - t0)) s"
exit $status
