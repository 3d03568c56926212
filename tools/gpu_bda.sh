#!/usr/bin/env bash
# Buffer device addresses captured and replayed on a GPU host that has bufferDeviceAddressCaptureReplay (issue 41
# item 3; NVIDIA has it, lavapipe has not): tests/capture_program_bda.py (a raw-`vulkan` program written here: pointers
# in push constants, in a bound buffer, and into a buffer no descriptor binds) captured with `workbench capture run`
# (GFXReconstruct's layer records each buffer's opaque capture address where the device has the feature, and its
# replay makes the buffers at them, so the dump step runs and dumps the captured pointers), then replayed alone by
# `workbench capture replay`, which rebases every pointer onto its own buffers (workbench.capture.pointers).
# Carry: .carry_gfx (GFXReconstruct's tools, layer and libraries, as for tools/gpu_capture_compare.sh), .gl and .whl
# (../shared/gpu/prepare.sh). Usage, after the prepare.sh prefix:
#   bash tools/gpu_bda.sh $OUT
# Writes $OUT/bda_features_<device>.txt (the device's bufferDeviceAddress* features), $OUT/bda_list_<device>.csv,
# $OUT/bda_replay_<device>.csv (a row per dispatch: exact, mismatch, reason, times), $OUT/bda_<device>.tar.gz (the
# capture folder, without capture.gfxr: to commit as tests/capture_data/<device>/bda for CI to replay) and
# $OUT/bda.log.
set -u
OUT=${1:?usage: gpu_bda.sh OUT}
PY=${PY:-python3}
W=${WORK:-/tmp/c}  # where the carried tools are unpacked and the capture is made
mkdir -p $W "$OUT"
[ -d $W/gfx ] || tar xJf .carry_gfx/gfx.tar.xz -C $W
export WORKBENCH_GFXRECON_DIR=$W/gfx LD_LIBRARY_PATH=$W/gfx/lib:${LD_LIBRARY_PATH:-}
C=$W/bda
rm -rf $C && mkdir -p $C
exec > >(tee -a "$OUT/bda.log") 2>&1
WB="$PY -m workbench.cli"
DEVICE=$($PY - "$C" "$OUT" <<'EOF'
import sys
from pathlib import Path
sys.path.insert(0, "tests")
import capture_program_bda as bda
import vulkan as v
from workbench import vk
from workbench.measure import results_folder_name
from workbench.toolchain.shaders import compile_glsl
folder, out = Path(sys.argv[1]), Path(sys.argv[2])
for name, text in (("push", bda.PUSH_GLSL), ("table", bda.TABLE_GLSL)):
    (folder / f"{name}.spv").write_bytes(compile_glsl(text, name=f"bda_{name}").code)
dev = vk.get_device()
name = results_folder_name(dev.info.name)
have = v.VkPhysicalDeviceBufferDeviceAddressFeatures()
v.vkGetPhysicalDeviceFeatures2(dev.physical_device, v.VkPhysicalDeviceFeatures2(pNext=have))
(out / f"bda_features_{name}.txt").write_text(
    f"{dev.info.name} ({dev.info.driver_name}): bufferDeviceAddress={bool(have.bufferDeviceAddress)} "
    f"bufferDeviceAddressCaptureReplay={bool(have.bufferDeviceAddressCaptureReplay)}\n")
print(name)
EOF
)
[ -n "$DEVICE" ] || { echo "no device or no shader compiler"; exit 1; }
echo "device: $DEVICE"; cat "$OUT/bda_features_$DEVICE.txt"
SECONDS=0
$WB capture run --out $C/cap -- $PY tests/capture_program_bda.py $C/push.spv $C/table.spv $C/out.bin
echo "capture run: exit $?, ${SECONDS} s"
$PY -c "from workbench import capture; capture.open('$C/cap').to_csv('$OUT/bda_list_$DEVICE.csv', index=False)"
$WB capture replay $C/cap --csv "$OUT/bda_replay_$DEVICE.csv"
echo "capture replay: exit $?"
$PY - "$OUT/bda_replay_$DEVICE.csv" <<'EOF'
import sys
import pandas as pd
frame = pd.read_csv(sys.argv[1], keep_default_na=False)
for _, row in frame.iterrows():
    print(f"dispatch {row['dispatch']}: exact={row['exact']} {row['mismatch']} {row['reason']}")
EOF
tar czf "$OUT/bda_$DEVICE.tar.gz" -C $C/cap --exclude capture.gfxr .
ls -la "$OUT"
