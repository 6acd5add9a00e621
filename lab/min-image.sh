#!/usr/bin/env bash
# Issue 31's measurement of `mkfs.ext4r -d SRC` at the smallest size,
# against `mke2fs -t ext4 -d SRC` followed by `resize2fs -M`, on three
# trees:
#
#   small   100,000 small files (0 to 5,000 bytes) in 100 directories
#   big     3 files of 200 MiB of random bytes
#   rootfs  a Debian root filesystem's usual parts, copied (cp -a) from
#           this machine: /etc, /usr/bin, /usr/sbin, /usr/lib/x86_64-linux-gnu,
#           /usr/lib/python3*, /usr/lib/systemd, /usr/lib/git-core,
#           /usr/share/doc, /usr/share/man, /var/lib/dpkg, with the
#           /bin, /sbin, /lib, /lib64 symlinks of merged /usr
#
# For each tree: ours twice under one SOURCE_DATE_EPOCH (same bytes?),
# `e2fsck -fn`, and the kernel's view (loop mount, read-only) against the
# source: contents (diff -r), and type, mode, owner, size (not of
# directories), link count, mtime to the nanosecond and symlink target of
# every name below the root (find -printf),
# and extended attributes (getfattr). mke2fs is given its defaults and the
# first size from ours x 1.25 up (doubling) that holds the tree; a second
# run gives it as many inodes as ours ends with (-N), the smallest size
# again found by doubling. Sizes are printed in blocks and MiB.
#
# Needs root (loop mounts), e2fsprogs, a release build:
#   cargo build --release -p ext4r-cli
#   sudo lab/min-image.sh [WORKDIR] [TREE...]
# WORKDIR (default /var/tmp/ext4r-min-image) needs about 6 GiB; it is
# removed at the end unless KEEP=1. Keep it off tmpfs.

set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${EXT4R:-${CARGO_TARGET_DIR:-$here/target}/release/ext4r}
work=${1:-/var/tmp/ext4r-min-image}
shift || true
trees=("$@")
[ ${#trees[@]} -gt 0 ] || trees=(small big rootfs)
[ -x "$bin" ] || { echo "no $bin: cargo build --release -p ext4r-cli" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (loop mounts)" >&2; exit 1; }
mkdir -p "$work"
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() {
    mountpoint -q "$mnt" && umount "$mnt" || true
    [ "${KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

make_small() {
    python3 - "$1" <<'EOF'
import os, sys
root = sys.argv[1]
for d in range(100):
    os.makedirs(f'{root}/d{d:03}', exist_ok=True)
for i in range(100000):
    size = [0, 1, 60, 700, 1500, 4096, 5000][i % 7]
    with open(f'{root}/d{i % 100:03}/f{i:06}', 'wb') as f:
        f.write(bytes((j * 7 + i * 13) % 251 for j in range(size)))
EOF
}
make_big() {
    mkdir -p "$1"
    for i in 1 2 3; do head -c 200M /dev/urandom >"$1/big$i"; done
}
make_rootfs() {
    mkdir -p "$1/usr/lib" "$1/usr/share" "$1/var/lib"
    cp -a /etc "$1/"
    cp -a /usr/bin /usr/sbin "$1/usr/"
    cp -a /usr/lib/x86_64-linux-gnu /usr/lib/python3* /usr/lib/systemd /usr/lib/git-core "$1/usr/lib/"
    cp -a /usr/share/doc /usr/share/man "$1/usr/share/"
    cp -a /var/lib/dpkg "$1/var/lib/"
    for l in bin sbin lib; do ln -s usr/$l "$1/$l"; done
    ln -s usr/lib64 "$1/lib64"
}

blocks() { dumpe2fs -h "$1" 2>/dev/null | awk -F: '/^Block count/ {print $2+0}'; }
bsize() { dumpe2fs -h "$1" 2>/dev/null | awk -F: '/^Block size/ {print $2+0}'; }
mib() { echo $(( $(stat -c %s "$1") >> 20 )); }
# Every name below the root but lost+found; a directory's size is the
# host filesystem's business, not the tree's.
listing() {
    (cd "$1" && find . -mindepth 1 -path ./lost+found -prune -o \
        -printf '%y %m %U %G %s %n %T@ %p -> %l\n' | awk '$1 == "d" { $5 = "-" } 1' | sort)
}
xattrs() { (cd "$1" && getfattr -R -h -d -m - . 2>/dev/null | sort) || true; }

# mke2fs -t ext4 -d at the first size from $2 bytes up that holds $1,
# extra options after; then resize2fs -M. Prints "start_mib".
mke2fs_min() {
    local src=$1 size=$2 img=$3
    shift 3
    while :; do
        rm -f "$img"
        if E2FSPROGS_FAKE_TIME=$epoch mke2fs -q -F -t ext4 "$@" -d "$src" "$img" "$((size >> 10))k" \
            >/dev/null 2>&1; then
            break
        fi
        size=$((size * 2))
        [ $size -lt $((64 << 30)) ] || { echo "mke2fs -d failed up to 64 GiB" >&2; return 1; }
    done
    resize2fs -M "$img" >/dev/null 2>&1
    echo $((size >> 20))
}

printf '%-7s %-5s %10s %8s %8s %6s %6s %6s | %10s %8s %8s %6s | %10s %8s %8s %6s\n' \
    tree bs ours_blk MiB secs same fsck kview \
    m2fs_blk MiB from fsck mN_blk MiB from fsck
for t in "${trees[@]}"; do
    src=$work/$t
    if [ ! -d "$src" ]; then
        "make_$t" "$src"
    fi
    # Every mtime before the epoch (kept exactly: the epoch is whole
    # seconds, so a second passes first); read the tree once so that every
    # access time moves past it (clamped, the same twice).
    sleep 1
    epoch=$(date +%s)
    sleep 1
    find "$src" -type f -exec cat {} + >/dev/null
    a=$work/$t-ours.img
    b=$work/$t-again.img
    rm -f "$a" "$b"
    s0=$(date +%s.%N)
    SOURCE_DATE_EPOCH=$epoch "$bin" mkfs -q -d "$src" "$a"
    s1=$(date +%s.%N)
    secs=$(echo "$s1 - $s0" | bc)
    SOURCE_DATE_EPOCH=$epoch "$bin" mkfs -q -d "$src" "$b"
    same=no
    cmp -s "$a" "$b" && same=yes
    rm -f "$b"
    fsck=$(e2fsck -fn "$a" >/dev/null 2>&1; echo $?)
    mount -o loop,ro "$a" "$mnt"
    kview=equal
    diff -r --no-dereference "$src" "$mnt" -x lost+found >/dev/null 2>&1 || kview=content
    [ "$(listing "$src")" = "$(listing "$mnt")" ] || kview="$kview,meta"
    [ "$(xattrs "$src")" = "$(xattrs "$mnt")" ] || kview="$kview,xattr"
    umount "$mnt"
    ours=$(blocks "$a")
    bs=$(bsize "$a")
    ours_mib=$(mib "$a")
    inodes=$(dumpe2fs -h "$a" 2>/dev/null | awk -F: '/^Inode count/ {print $2+0}')
    start=$(( $(stat -c %s "$a") * 5 / 4 ))
    [ $start -ge $((16 << 20)) ] || start=$((16 << 20))
    m=$work/$t-mke2fs.img
    from=$(mke2fs_min "$src" $start "$m")
    m_fsck=$(e2fsck -fn "$m" >/dev/null 2>&1; echo $?)
    m_blk=$(blocks "$m")
    m_bs=$(bsize "$m")
    m_mib=$(mib "$m")
    rm -f "$m"
    # As many inodes as ours has after its shrink, so that inodes do not
    # bind mke2fs's minimum where they do not bind ours.
    fromN=$(mke2fs_min "$src" $start "$m" -N "$inodes")
    n_fsck=$(e2fsck -fn "$m" >/dev/null 2>&1; echo $?)
    n_blk=$(blocks "$m")
    n_bs=$(bsize "$m")
    n_mib=$(mib "$m")
    rm -f "$m" "$a"
    printf '%-7s %-5s %10s %8s %8.1f %6s %6s %6s | %10s %8s %8s %6s | %10s %8s %8s %6s\n' \
        "$t" "$bs" "$ours" "$ours_mib" "$secs" "$same" "$fsck" "$kview" \
        "$m_blk/${m_bs}" "$m_mib" "$from" "$m_fsck" "$n_blk/${n_bs}" "$n_mib" "$fromN" "$n_fsck"
done
