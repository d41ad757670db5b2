#!/usr/bin/env bash
# Builds a local stand-in for python:3.12-slim when no container registry is reachable:
# a minimal Debian bookworm with python3 and venv, imported as image TAG (kept between runs).
set -euo pipefail
tag=${1:?usage: stand_in_base.sh TAG}
# One build at a time: a second caller (the tests, while .ci/run's early build runs) waits for it.
exec 9>"${TMPDIR:-/tmp}/turngate-stand-in-base.lock"
flock 9
if podman image exists "$tag"; then exit 0; fi
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}
rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$mirror" >&2
tar -C "$rootfs" -c . | podman import - "$tag" >&2
