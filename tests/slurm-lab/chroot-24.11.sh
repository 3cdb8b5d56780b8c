#!/usr/bin/env bash
# Makes (once per machine) a Debian 13 chroot holding Slurm 24.11 from
# Debian's own packages, for the 24.11 live tests (up-24.11.sh runs the
# daemons inside it). Reused when it is there; built in a temp dir and
# renamed into place, so an interrupted build is never mistaken for one.
#
#   ROOT=/var/cache/nightshift/slurm-24.11 chroot-24.11.sh    # prints ROOT
#
# With SUITE=forky (chroot-26.05.sh) the same makes Debian testing's chroot:
# Slurm 26.05 and Prometheus 3. Testing's Release file may be past its
# Valid-Until on the mirror, so its date is not checked.
set -euo pipefail
SUITE=${SUITE:-trixie}
ROOT=${ROOT:-/var/cache/nightshift/slurm-24.11}
if [ -x "$ROOT/usr/sbin/slurmctld" ] && [ -f "$ROOT/.nightshift-ready" ]; then
  echo "$ROOT"
  exit 0
fi
command -v mmdebstrap >/dev/null || {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >&2
}
mkdir -p "$(dirname "$ROOT")"
tmp="$ROOT.tmp.$$"
rm -rf "$tmp"
start=$(date +%s)
extra=()
[ "$SUITE" = trixie ] || extra=(--aptopt='Acquire::Check-Valid-Until "false"')
mmdebstrap --quiet --variant=apt "${extra[@]}" \
  --include=slurmctld,slurmd,slurmrestd,slurm-client,slurm-wlm-jwt-plugin,munge,curl,procps${EXTRA_PACKAGES:+,$EXTRA_PACKAGES} \
  "$SUITE" "$tmp" http://deb.debian.org/debian >&2
rm -rf "$tmp"/var/lib/apt/lists/* "$tmp"/var/cache/apt/archives/*.deb
echo "127.0.0.1 localhost" >"$tmp/etc/hosts"
chroot "$tmp" id slurmrest >/dev/null 2>&1 ||
  chroot "$tmp" useradd -r -M -s /usr/sbin/nologin slurmrest
chroot "$tmp" id alice >/dev/null 2>&1 || chroot "$tmp" useradd -m -s /bin/bash alice
chroot "$tmp" slurmctld -V >&2
touch "$tmp/.nightshift-ready"
rm -rf "$ROOT"
mv "$tmp" "$ROOT"
echo "chroot ($SUITE): built $ROOT in $(($(date +%s) - start)) s" >&2
echo "$ROOT"
