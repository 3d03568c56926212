#!/usr/bin/env bash
# `capture compare` on a GPU host (issue 41 items 6-7): IREE's programs captured with their coverage rows, then the
# field's ops (workbench.capture.engines.field) captured on ET-VK's runtime, ncnn and IREE and compared.
# Carry: .carry_cov (executor_runner, names.json), .carry_gfx (GFXReconstruct), .carry_cmp (etvk_prog/: the field's
# program lowered here by `python -m workbench.etvk.model.field`; vmfb/: IREE's modules compiled here with
# $WORKBENCH_IREE_VMFB_DIR set), .whl (ncnn, iree-base-runtime), .gl; with $WORKBENCH_GGML (+ $WORKBENCH_GGML_DIR)
# llama.cpp's ggml as a fourth engine. Usage, after the prepare.sh prefix:
#   bash tools/gpu_capture_compare.sh $OUT
# Writes $OUT/capture_coverage_peers.csv (the committed table of data/<device>/ with IREE's rows added),
# $OUT/capture_compare.csv, $OUT/capture_compare_summary.csv and $OUT/compare.log.
set -u
OUT=${1:?usage: gpu_capture_compare.sh OUT}
PY=${PY:-python3}
mkdir -p /tmp/c "$OUT"
[ -d /tmp/c/cov ] || tar xJf .carry_cov/cov.tar.xz -C /tmp/c
[ -d /tmp/c/gfx ] || tar xJf .carry_gfx/gfx.tar.xz -C /tmp/c
export WORKBENCH_GFXRECON_DIR=/tmp/c/gfx LD_LIBRARY_PATH=/tmp/c/gfx/lib:${LD_LIBRARY_PATH:-}
export WORKBENCH_IREE_VMFB_DIR=$PWD/.carry_cmp/vmfb
C=/tmp/c/cmp
rm -rf $C && mkdir -p $C
exec > >(tee -a "$OUT/compare.log") 2>&1
WB="$PY -m workbench.cli"
DEVICE=$($PY -c "from workbench import vk; print(''.join(c if c.isalnum() else '_' for c in vk.get_device().info.name).strip('_'))")
echo "device: $DEVICE"
cp "data/$DEVICE/capture_coverage_peers.csv" "$OUT/" 2>/dev/null
for prog in matmul elementwise; do
  $WB capture run --out $C/iree_$prog -- $PY -m workbench.capture.engines.iree $prog
  $WB capture coverage $C/iree_$prog --engine iree --program $prog --csv "$OUT/capture_coverage_peers.csv"
done
$PY -c "from workbench.etvk.model import capture_join as j, build
j.capture_program(build.from_path('/tmp/c/cov/bin/executor_runner'), j.lowered_program('.carry_cmp/etvk_prog'), '$C/etvk')"
$WB capture run --hide-extension VK_KHR_push_descriptor --out $C/ncnn -- $PY -m workbench.capture.engines.ncnn --net field
$WB capture run --out $C/iree -- $PY -m workbench.capture.engines.iree field
$WB capture coverage $C/iree --engine iree --program field --csv "$OUT/capture_coverage_peers.csv"
GGML_SOURCE=
if [ -n "${WORKBENCH_GGML:-}" ]; then   # llama.cpp's ggml (a checkout, built at run time): its own path choice
  $WB capture run --out $C/ggml -- $PY -m workbench.capture.engines.ggml --net field --path default && GGML_SOURCE=$C/ggml=ggml
fi
$WB capture compare $C/etvk=etvk $C/ncnn=ncnn $C/iree=iree $GGML_SOURCE --names /tmp/c/cov/names.json --gpus none \
  --warm-seconds ${WARM_SECONDS:-0.5} ${COMPARE_OPTIONS:-} --csv "$OUT/capture_compare.csv" \
  --summary-csv "$OUT/capture_compare_summary.csv"
