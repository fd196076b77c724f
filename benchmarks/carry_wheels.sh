#!/usr/bin/env bash
# Python wheels for the GPU machine, which has no package index: fetched here, carried by the device
# tool in `.gpu-carry` (at most 64 MiB a call, the source tree included), installed there by
# gpu_run.sh's deps step. A wheel larger than one call can take (ai-dynamo-runtime 1.6.1: 74.7 MB)
# travels in parts over consecutive calls while the machine stays warm; the machine keeps the parts
# in /tmp/aitune-parts and joins them once all have arrived, checked against the whole wheel's
# SHA-256.
#
#   here:  bash benchmarks/carry_wheels.sh fetch ai-dynamo-runtime==1.6.1 ai-dynamo==1.6.1 uvloop==0.23.0 msgspec==0.23.0 \
#            pydantic==2.13.5 pydantic_core==2.46.5 annotated-types==0.8.0 typing-inspection==0.4.5  (docs/serving.md)
#          bash benchmarks/carry_wheels.sh stage 1     # .gpu-carry: the small wheels and part 1 of each large one
#          (device call 1: any STAGES, carry [".gpu-carry"]; it keeps part 1)
#          bash benchmarks/carry_wheels.sh stage 2     # .gpu-carry: part 2 of each large one
#          (device call 2, at once, while the machine is warm: the parts are joined and installed first)
#   there: bash benchmarks/carry_wheels.sh assemble    # gpu_run.sh runs it before installing .gpu-carry/wheels
#   (`split` splits what is already in .gpu-carry-stock: fetch does it after downloading)
#
# One call instead of two: `pack` repacks every large wheel's files as tar.xz (ai-dynamo-runtime:
# 74.7 MB as a wheel, 43.6 MB as tar.xz, because xz compresses the shared library far better than
# the wheel's zip deflate), and `stage packed` carries the small wheels with those archives. On the
# machine `assemble` checks each archive's SHA-256, unpacks it, zips the files into the wheel again
# and checks every file against the wheel's own RECORD hashes before pip sees it.
#   here:  bash benchmarks/carry_wheels.sh pack && bash benchmarks/carry_wheels.sh stage packed
#
# CARRY_PART_MB sets the part size (default 40, leaving room for the tree); CARRY_PYTHON the target
# interpreter's version (default 3.12, the GPU image's).
set -euo pipefail
cd "$(dirname "$0")/.."
STOCK=.gpu-carry-stock         # here: every fetched wheel and every part (not carried)
CARRY=.gpu-carry               # here and there: what one call carries
KEEP=${CARRY_KEEP_DIR:-/tmp/aitune-parts}  # there: parts kept between calls
PART_MB=${CARRY_PART_MB:-40}

fetch() {
  mkdir -p "$STOCK/parts"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "${CARRY_PYTHON:-3.12}" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$STOCK" "$@"
  split_large
}

split_large() {  # every stock wheel over CARRY_PART_MB into parts, with the whole wheel's SHA-256
  mkdir -p "$STOCK/parts"
  local whl name size
  for whl in "$STOCK"/*.whl; do
    name=$(basename "$whl")
    size=$(stat -c %s "$whl")
    if [ "$size" -gt $((PART_MB * 1024 * 1024)) ]; then
      rm -f "$STOCK/parts/$name".part-*
      split -b "${PART_MB}M" -d -a 2 "$whl" "$STOCK/parts/$name.part-"
      local count
      count=$(find "$STOCK/parts" -name "$name.part-*" | wc -l)
      echo "$(sha256sum "$whl" | cut -d' ' -f1) $name $count" > "$STOCK/parts/$name.sha256"
      echo "$name: $size bytes in $count parts of ${PART_MB} MiB"
    else
      echo "$name: $size bytes"
    fi
  done
}

pack() {  # every stock wheel over CARRY_PART_MB as <wheel>.tar.xz of its files, with that file's SHA-256
  mkdir -p "$STOCK/packed"
  local whl name size tmp
  for whl in "$STOCK"/*.whl; do
    name=$(basename "$whl")
    size=$(stat -c %s "$whl")
    [ "$size" -gt $((PART_MB * 1024 * 1024)) ] || continue
    if [ ! -f "$STOCK/packed/$name.sha256" ]; then
      tmp=$(mktemp -d)
      python3 -m zipfile -e "$whl" "$tmp"
      tar -C "$tmp" -cf - . | xz -9 -T0 > "$STOCK/packed/$name.tar.xz"
      rm -rf "$tmp"
      echo "$(sha256sum "$STOCK/packed/$name.tar.xz" | cut -d' ' -f1) $name" > "$STOCK/packed/$name.sha256"
    fi
    echo "$name: $size bytes as a wheel, $(stat -c %s "$STOCK/packed/$name.tar.xz") as tar.xz"
  done
}

stage_packed() {  # one call: the small wheels whole, the large ones as packed archives
  rm -rf "$CARRY/wheels" "$CARRY/parts" "$CARRY/packed"
  mkdir -p "$CARRY/wheels" "$CARRY/packed"
  local whl name
  for whl in "$STOCK"/*.whl; do
    name=$(basename "$whl")
    if [ -f "$STOCK/packed/$name.sha256" ]; then
      cp "$STOCK/packed/$name.sha256" "$STOCK/packed/$name.tar.xz" "$CARRY/packed/"
    elif [ "$(stat -c %s "$whl")" -gt $((PART_MB * 1024 * 1024)) ]; then
      echo "$name is over ${PART_MB} MiB and not packed: run 'pack' first" >&2
      return 1
    else
      cp "$whl" "$CARRY/wheels/"
    fi
  done
  du -sh "$CARRY" | sed 's/^/carry now: /'
}

unpack() {  # there: each packed archive back into its wheel, checked against its own RECORD
  local sum want name tmp
  for sum in "$CARRY"/packed/*.sha256; do
    [ -f "$sum" ] || continue
    read -r want name < "$sum"
    if [ "$(sha256sum "$CARRY/packed/$name.tar.xz" | cut -d' ' -f1)" != "$want" ]; then
      echo "packed: $name.tar.xz arrived with another SHA-256 than packed; not installed" >&2
      return 1
    fi
    tmp=$(mktemp -d)
    tar -C "$tmp" -xJf "$CARRY/packed/$name.tar.xz"
    if ! python3 - "$tmp" "$CARRY/wheels/$name.tmp" <<'PY'
import base64, csv, hashlib, pathlib, sys, zipfile
root, out = pathlib.Path(sys.argv[1]), sys.argv[2]
records = list(root.glob("*.dist-info/RECORD"))
if len(records) != 1:
    sys.exit(f"expected one *.dist-info/RECORD, found {len(records)}")
listed = set()
for row in csv.reader(records[0].read_text().splitlines()):
    if not row:
        continue
    path, digest = row[0], row[1]
    if path.startswith("/") or ".." in pathlib.PurePosixPath(path).parts:
        sys.exit(f"{path}: a path outside the wheel")
    listed.add(path)
    if not digest:
        continue  # RECORD itself
    algo, value = digest.split("=", 1)
    have = base64.urlsafe_b64encode(hashlib.new(algo, (root / path).read_bytes()).digest()).rstrip(b"=").decode()
    if have != value:
        sys.exit(f"{path}: content differs from the wheel's RECORD")
extra = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - listed
if extra:
    sys.exit(f"files the wheel's RECORD does not list: {sorted(extra)[:5]}")
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as whl:
    for path in sorted(listed):
        whl.write(root / path, path)
PY
    then
      echo "packed: $name did not unpack to the wheel's recorded files; not installed" >&2
      rm -rf "$tmp" "$CARRY/wheels/$name.tmp"
      return 1
    fi
    rm -rf "$tmp"
    mv "$CARRY/wheels/$name.tmp" "$CARRY/wheels/$name"
    echo "packed: $name rebuilt from tar.xz, every file as its RECORD lists"
  done
}

stage() {  # stage K: the K-th call's carry (1-based)
  [ "$1" = packed ] && { stage_packed; return; }
  local k=$1 part_index sum name count whl
  part_index=$(printf '%02d' $((k - 1)))
  rm -rf "$CARRY/wheels" "$CARRY/parts" "$CARRY/packed"
  mkdir -p "$CARRY/wheels" "$CARRY/parts"
  for whl in "$STOCK"/*.whl; do
    [ -f "$whl" ] || continue
    name=$(basename "$whl")
    [ -f "$STOCK/parts/$name.sha256" ] && continue  # travels in parts
    [ "$k" = 1 ] && cp "$whl" "$CARRY/wheels/"
  done
  for sum in "$STOCK"/parts/*.sha256; do
    [ -f "$sum" ] || continue
    read -r _ name count < "$sum"
    [ "$k" -le "$count" ] || continue
    cp "$sum" "$STOCK/parts/$name.part-$part_index" "$CARRY/parts/"
  done
  du -sh "$CARRY" | sed 's/^/carry now: /'
}

assemble() {  # there: unpack packed archives; keep what parts arrived, join what is complete
  mkdir -p "$KEEP" "$CARRY/wheels"
  unpack || return 1
  cp "$CARRY"/parts/* "$KEEP"/ 2>/dev/null || true
  local sum want name count have
  for sum in "$KEEP"/*.sha256; do
    [ -f "$sum" ] || continue
    read -r want name count < "$sum"
    have=$(find "$KEEP" -name "$name.part-*" | wc -l)
    if [ "$have" -lt "$count" ]; then
      echo "parts: $name has $have of $count (the rest come with the next call)"
      continue
    fi
    cat $(find "$KEEP" -name "$name.part-*" | sort) > "$CARRY/wheels/$name.tmp"
    if [ "$(sha256sum "$CARRY/wheels/$name.tmp" | cut -d' ' -f1)" != "$want" ]; then
      echo "parts: $name joined to another SHA-256 than fetched; not installed" >&2
      rm -f "$CARRY/wheels/$name.tmp"
      return 1
    fi
    mv "$CARRY/wheels/$name.tmp" "$CARRY/wheels/$name"
    echo "parts: $name joined from $count parts"
  done
}

case "${1:-}" in
  fetch) shift; fetch "$@" ;;
  split) split_large ;;
  pack) pack ;;
  stage) stage "${2:?stage K}" ;;
  assemble) assemble ;;
  *) echo "usage: $0 {fetch NAME==VERSION...|split|pack|stage K|stage packed|assemble}" >&2; exit 2 ;;
esac
