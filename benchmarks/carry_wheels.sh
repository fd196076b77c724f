#!/usr/bin/env bash
# Python wheels for the GPU machine, which has no package index: fetched here, carried by the device
# tool in `.gpu-carry` (at most 64 MiB a call, the source tree included), installed there by
# gpu_run.sh's deps step. A wheel larger than one call can take (ai-dynamo-runtime 1.6.1: 74.7 MB)
# travels in parts over consecutive calls while the machine stays warm; the machine keeps the parts
# in /tmp/aitune-parts and joins them once all have arrived, checked against the whole wheel's
# SHA-256.
#
#   here:  bash benchmarks/carry_wheels.sh fetch ai-dynamo-runtime==1.6.1 ai-dynamo==1.6.1 uvloop==0.23.0 msgspec==0.23.0
#          bash benchmarks/carry_wheels.sh stage 1     # .gpu-carry: the small wheels and part 1 of each large one
#          (device call 1: any STAGES, carry [".gpu-carry"]; it keeps part 1)
#          bash benchmarks/carry_wheels.sh stage 2     # .gpu-carry: part 2 of each large one
#          (device call 2, at once, while the machine is warm: the parts are joined and installed first)
#   there: bash benchmarks/carry_wheels.sh assemble    # gpu_run.sh runs it before installing .gpu-carry/wheels
#   (`split` splits what is already in .gpu-carry-stock: fetch does it after downloading)
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

stage() {  # stage K: the K-th call's carry (1-based)
  local k=$1 part_index sum name count whl
  part_index=$(printf '%02d' $((k - 1)))
  rm -rf "$CARRY/wheels" "$CARRY/parts"
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

assemble() {  # there: keep what arrived, join what is complete into .gpu-carry/wheels
  mkdir -p "$KEEP" "$CARRY/wheels"
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
  stage) stage "${2:?stage K}" ;;
  assemble) assemble ;;
  *) echo "usage: $0 {fetch NAME==VERSION...|split|stage K|assemble}" >&2; exit 2 ;;
esac
