#!/usr/bin/env bash
# On the GPU host, after `source tools/gpu_host_setup.sh`: notebook 06 in full on each model of NOTEBOOK_MODELS
# (programs lowered here by tools/gpu_carry.sh), then `workbench etvk fidelity` on FIDELITY_MODELS with the ways of
# timing in FIDELITY_ARGS. Everything lands in $1 (default results/gpu_etvk).
set -uo pipefail
out=${1:-results/gpu_etvk}
mkdir -p "$out"
python3 -c "import executorch.devtools as d; print('executorch.devtools (Inspector) imports:', d.Inspector.__name__)"
for model in ${NOTEBOOK_MODELS-mobilenet_v2 refinenet_like}; do
  echo "== notebook 06 on $model"
  python3 - "$out/notebook_$model" "$model" <<'EOF'
import os, sys
from pathlib import Path
from workbench import notebook
folder, model = Path(sys.argv[1]), sys.argv[2]
rows = notebook.run_all(folder, full=True, selection=["06"], show_progress=False,
                        parameters={"MODEL": model, "LOWERED": f"{os.environ['WORKBENCH_LOWERED']}/{model}",
                                    "RUNTIME": os.environ["WORKBENCH_RUNNER"]})
for row in rows:
    print(row["notebook"], row["status"], row["seconds"], "s,", len(row["files"]), "files")
EOF
done
if [[ -n "${FIDELITY_MODELS-residual_add float_between refinenet_like mobilenet_v2}" ]]; then
  echo "== fidelity"
  timeout "${FIDELITY_TIMEOUT:-400}" python3 -m workbench.cli etvk fidelity \
    ${FIDELITY_MODELS-residual_add float_between refinenet_like mobilenet_v2} --lowered "$WORKBENCH_LOWERED" \
    --runtime "$WORKBENCH_RUNNER" --out "$out/fidelity" ${FIDELITY_ARGS---timestamps etvk workbench} --quiet
  echo "fidelity exit $?"
fi
