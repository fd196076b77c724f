#!/usr/bin/env bash
# JIT tuning of ResNet-50 on the GPU through AUTOWRAPT_BOOTSTRAP, run twice in fresh processes:
# the second run must reuse the first run's result (docs/reference/jit.md,
# docs/reference/tuning.md#reusing-results). Needs autowrapt (and torchvision for torchvision's resnet50;
# otherwise an equivalent in-file ResNet-50 is used). Writes $OUT/jit_resnet50.json and $OUT/jit_resnet50.log;
# DEVICE=cpu IMAGE_SIZE=32 DEPTH=tiny makes it a quick CPU check.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/aitune-jit-out}
mkdir -p "$OUT"
${PYTHON:-python3} benchmarks/jit_resnet50.py --device "${DEVICE:-cuda}" --image-size "${IMAGE_SIZE:-224}" \
  --depth "${DEPTH:-resnet50}" --iters "${ITERS:-50}" --work-dir "${WORK_DIR:-$(mktemp -d)}" \
  --out "$OUT/jit_resnet50.json" 2>&1 | tee "$OUT/jit_resnet50.log"
