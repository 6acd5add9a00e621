#!/usr/bin/env bash
# Makes the seed corpus of the fs_walk fuzz target: small ext2/3/4 images
# built by mke2fs and filled through a loop mount by the kernel (so they hold
# what Linux writes: htree directories, extent trees, block maps, symlinks of
# every kind, in-inode and block xattrs, inline data, EA inodes), stored in
# the target's sparse input format (see fuzz/fuzz_targets/fs_walk.rs).
#
# Needs root (loop mount), e2fsprogs and python3. Touches only a temp dir and
# the loop devices that mount(8) attaches for it (auto-cleared on umount).
#
#   fuzz/seeds/make_fs_walk_seeds.sh OUT_DIR
set -euo pipefail
out=$(realpath "${1:?usage: $0 OUT_DIR}")
mkdir -p "$out"
tmp=$(mktemp -d)
mnt="$tmp/mnt"
mkdir "$mnt"
cleanup() {
    mountpoint -q "$mnt" && umount "$mnt"
    rm -rf "$tmp"
}
trap cleanup EXIT

# IMAGE -> sparse input: u32 LE size in KiB, then for each non-zero KiB
# chunk a u32 LE chunk index and its 1024 bytes.
to_sparse() {
    python3 - "$1" "$2" <<'PY'
import struct, sys
img = open(sys.argv[1], 'rb').read()
out = bytearray(struct.pack('<I', len(img) // 1024))
for i in range(0, len(img), 1024):
    c = img[i:i + 1024]
    if any(c):
        out += struct.pack('<I', i // 1024) + c.ljust(1024, b'\0')
open(sys.argv[2], 'wb').write(out)
PY
}

# populate DIR LONGNAMES: the same tree in every image.
populate() {
    local d=$1 n=$2
    # htree once it outgrows one block; hard links, to keep the inode
    # table (and so the seed) small.
    mkdir "$d/big"
    : >"$d/big/empty"
    for i in $(seq 1 "$n"); do
        ln "$d/big/empty" "$d/big/entry-with-a-rather-long-name-$i"
    done
    echo hello >"$d/small"
    head -c 3000 /dev/urandom >"$d/three-blocks"
    # Sparse: holes between single blocks; the last one past 12 + 256
    # blocks needs a double-indirect block in a block map, and with
    # extents five separate extents need an index node.
    for b in 0 13 40 270 300; do
        printf 'block %d' "$b" | dd of="$d/sparse" bs=1024 seek="$b" conv=notrunc status=none
    done
    ln -s small "$d/fast-link"
    ln -s "$(printf 'x%.0s' $(seq 1 100))/target" "$d/slow-link"
    ln -s big/../small "$d/dir-link"
    ln -s loop-b "$d/loop-a"
    ln -s loop-a "$d/loop-b"
    mkdir -p "$d/sub/deeper"
    echo deep >"$d/sub/deeper/file"
    ln "$d/small" "$d/sub/hardlink"
    mknod "$d/sub/chr" c 1 3
    mkfifo "$d/sub/fifo"
    setfattr -n user.small -v v "$d/small"
    setfattr -n user.big -v "$(head -c 600 /dev/zero | tr '\0' y)" "$d/small"
    setfattr -n trusted.t -v 0x0102 "$d/sub"
    setfattr -n user.onlink -v x -h "$d/fast-link" 2>/dev/null || true
}

# make NAME SIZE_KIB LONGNAMES [mke2fs options...]
make() {
    local name=$1 kib=$2 n=$3
    shift 3
    local img="$tmp/$name.img"
    truncate -s "${kib}K" "$img"
    mke2fs -q -F -E root_owner=0:0 -U clear -E hash_seed=00000000-0000-0000-0000-000000000000 \
        "$@" "$img" >/dev/null
    mount -o loop "$img" "$mnt"
    populate "$mnt" "$n"
    [ -n "${EXTRA:-}" ] && eval "$EXTRA"
    umount "$mnt"
    to_sparse "$img" "$out/seed-$name"
    printf '%-28s %6d bytes\n' "seed-$name" "$(stat -c %s "$out/seed-$name")"
}

# ext4, 1 KiB blocks, metadata_csum, extents (index node in "sparse").
make ext4-1k 256 40 -t ext4 -b 1024 -N 96 -I 256 -O ^has_journal
# ext4 with inline data: small files and directories inside the inode.
EXTRA='mkdir "$mnt/inl"; echo tiny >"$mnt/inl/f"; ln -s "$(printf y%.0s $(seq 1 70))" "$mnt/inl/l"' \
    make ext4-inline 256 40 -t ext4 -b 1024 -N 96 -I 256 -O ^has_journal,inline_data,64bit
# ext2-style block maps (indirect and double-indirect blocks), 128-byte inodes.
make ext2 256 40 -t ext2 -b 1024 -N 96 -I 128
# ext3: block maps plus a journal (inode 8, 1024 blocks) and resize inode.
make ext3 4096 40 -t ext3 -b 1024 -N 48 -I 128 -J size=1
# ext4, 4 KiB blocks, ea_inode: a value too large for a block lives in an inode.
EXTRA='setfattr -n user.huge -v "$(head -c 6000 /dev/zero | tr "\0" z)" "$mnt/sub/deeper/file"' \
    make ext4-4k-eainode 512 100 -t ext4 -b 4096 -N 160 -I 256 -O ^has_journal,ea_inode
