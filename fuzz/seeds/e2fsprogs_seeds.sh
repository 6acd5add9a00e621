#!/usr/bin/env bash
# Converts the e2fsprogs test images (damaged on purpose) into fs_walk seed
# inputs in OUT_DIR, which must lie outside the repository: the images are
# external data that is never copied into the project.
#
#   fuzz/seeds/e2fsprogs_seeds.sh /tmp/fs_walk_e2fsprogs [CORPUS_DIR]
#   cargo +nightly fuzz run fs_walk /tmp/fs_walk_e2fsprogs -- -rss_limit_mb=2048 -timeout=10
set -euo pipefail
out=${1:?usage: $0 OUT_DIR [CORPUS_DIR]}
corpus=${2:-$(dirname "$0")/../../../shared/corpus/e2fsprogs}
[ -d "$corpus" ] || { echo "no e2fsprogs corpus at $corpus" >&2; exit 1; }
mkdir -p "$out"
for gz in "$corpus"/*/image.gz; do
    name=$(basename "$(dirname "$gz")")
    gzip -dc "$gz" | python3 -c '
import struct, sys
img = sys.stdin.buffer.read()
if len(img) > (64 << 20):
    sys.exit(0)  # the target caps devices at 64 MiB
out = bytearray(struct.pack("<I", (len(img) + 1023) // 1024))
for i in range(0, len(img), 1024):
    c = img[i:i + 1024]
    if any(c):
        out += struct.pack("<I", i // 1024) + c.ljust(1024, b"\0")
sys.stdout.buffer.write(out)' >"$out/$name"
    [ -s "$out/$name" ] || rm -f "$out/$name"
done
ls "$out" | wc -l
