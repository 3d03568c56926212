#!/usr/bin/env bash
# `workbench ab` on a GPU host, unattended (issue 42 item 5): three A/B pairs of 4-bit GEMVs timed interleaved
# (A B A B …), hot and cold, both interleavings (separate submits; one command buffer), the SM clock per sample:
#   q4_vec      the workbench's GEMV, uint against uvec4 weight loads (vec=1 / vec=4; #12444's question on our kernel)
#   q4_tiled    the workbench's two fp16 builds: rows layout against 4-row tiles (half2 dequantize, subgroup reduce)
#   etvk_load   ET-VK's linear_q4gsw_coop (buffer weight): ivec4 (now) against u8vec4 weight words (before #12610);
#               needs $WORKBENCH_EXECUTORCH (a checkout's backends/vulkan) and, for ET-VK's GLSL dialect,
#               $WORKBENCH_GLSLANG_DIR (the workbench's glslang build): carry them as tools/gpu_numbers.py says
# at Llama-3-8B's 4096 x 4096 (M = 1, group 32). Each pair writes OUT/ab_<pair>.csv (`workbench ab --csv`: a row
# per sample with its clock and seconds, a summary row per set with B/A, its 95 % interval and the verdict) and
# OUT/ab_<pair>.txt (what it printed); OUT/ab_summary.csv gathers the summaries. A pair that fails is named in its
# .txt and the others still run; the exit status is the number of pairs that failed.
#
#   tools/gpu_ab.sh OUT                 # on the GPU host (python3 with the workbench importable); < 120 s of GPU
#   QUICK=1 tools/gpu_ab.sh OUT         # a test run (lavapipe): 512 x 512, few pairs, a capped cold rotation
#
# Environment: PYTHON (python3), AB_GPUS (offline GPUs for the ISA counts and the phone model; default none: Mesa's
# build is not carried), AB_PAIRS (q4_vec q4_tiled etvk_load), AB_TIMEOUT (seconds a pair may run, 150).
set -uo pipefail
out=${1:?usage: tools/gpu_ab.sh OUT}
mkdir -p "$out"
py=${PYTHON:-python3}
if [[ -n "${QUICK:-}" ]]; then
  n=512; timing=(--pairs 4 --time 0.05 --quick)
else
  n=4096; timing=(--pairs 40 --time 0.4)
fi
common=(--cache hot,cold --interleave submits,command --gpu "${AB_GPUS:-none}" "${timing[@]}")
half="reduce=subgroup,scale_dtype=half,act_dtype=half,dequant=half2"
etvk="linear_q4gsw_coop:shape=1x$n,out_features=$n,weight_storage=buffer,storage=buffer"
failed=0
for pair in ${AB_PAIRS:-q4_vec q4_tiled etvk_load}; do
  case $pair in
    q4_vec)    a="q4-gemv:n=$n,k=$n,vec=1"; b="q4-gemv:n=$n,k=$n,vec=4" ;;
    q4_tiled)  a="q4-gemv:n=$n,k=$n,$half"; b="q4-gemv:n=$n,k=$n,$half,layout=tiled" ;;
    etvk_load) a="$etvk"; b="$etvk,weight_load=u8vec4"
               if [[ -z "${WORKBENCH_EXECUTORCH:-}" ]]; then
                 echo "$pair: skipped: no ExecuTorch checkout (\$WORKBENCH_EXECUTORCH)" | tee "$out/ab_$pair.txt"
                 continue
               fi ;;
    *) echo "gpu_ab: expected pairs among q4_vec q4_tiled etvk_load, got $pair" >&2; exit 2 ;;
  esac
  echo "== $pair: A $a | B $b"
  start=$SECONDS
  timeout "${AB_TIMEOUT:-150}" "$py" -m workbench.cli ab "$a" "$b" "${common[@]}" --csv "$out/ab_$pair.csv" \
    > "$out/ab_$pair.txt" 2>&1
  rc=$?
  grep -E "^(device|output|check|clock|verdict)" "$out/ab_$pair.txt"
  echo "$pair: exit $rc, $((SECONDS - start)) s" | tee -a "$out/ab_$pair.txt"
  [[ $rc -ne 0 ]] && failed=$((failed + 1))
done
"$py" - "$out" <<'EOF'
import sys
from pathlib import Path

import pandas as pd

out = Path(sys.argv[1])
frames = []
for path in sorted(out.glob("ab_*.csv")):
    if path.name == "ab_summary.csv":
        continue
    f = pd.read_csv(path)
    frames.append(f[f["row"] == "summary"].assign(pair=path.stem[3:]))
if frames:
    s = pd.concat(frames, ignore_index=True)
    s.to_csv(out / "ab_summary.csv", index=False)
    cols = [c for c in ("pair", "cache", "interleave", "pairs", "median_us_A", "median_us_B", "ratio", "ci_lo",
                        "ci_hi", "sm_clock_mhz_median", "verdict") if c in s]
    with pd.option_context("display.width", 250, "display.max_colwidth", 60, "display.float_format", "{:.4g}".format):
        print(s[cols].to_string(index=False))
    print(f"wrote {out / 'ab_summary.csv'}")
EOF
exit $failed
