#!/usr/bin/env bash
# Pack what a GPU host without ExecuTorch needs to run notebook 06 and `workbench etvk fidelity` there, into .carry/
# (git-ignored), compressed to fit the device tool's 64 MiB carry beside the tracked tree:
#   runtime.tar.xz    ET-VK's executor_runner built here (`workbench etvk build`; static but for libc / libstdc++)
#   glslang.tar.xz    the glslc that speaks ET-VK's dialect (workbench.toolchain.glslang)
#   etvk.tar.xz       the checkout's tracked backends/vulkan files as in its working tree (GLSL, codegen, Python)
#   programs.tar.xz   models lowered here by the checkout's ET-VK Python (`workbench etvk lower`): the host has
#                     no ExecuTorch Python to lower with, and lowering does not depend on the device
#   devtools.tar.xz   the Python of the executorch wheel (cp312) without its native libraries: Inspector reads the
#                     ETDumps (with the wheel's flatc)
#   wheels/           Jupyter (nbclient, ipykernel, ipywidgets) and ruamel.yaml (executorch.exir) for Python 3.12,
#                     less what the host image has
# Usage: tools/gpu_carry.sh MODEL…   (needs WORKBENCH_EXECUTORCH, a built runtime and the glslang build)
# On the host:  mkdir -p /tmp/c && for t in .carry/*.tar.xz; do tar xJf $t -C /tmp/c; done
#               pip install --no-index --no-deps --target /tmp/site .carry/wheels/*.whl
#               PYTHONPATH=/tmp/site:/tmp/c/devtools:$PWD WORKBENCH_GLSLANG_DIR=/tmp/c/glslang
#               WORKBENCH_EXECUTORCH=/tmp/c/etvk/executorch; runner: /tmp/c/runtime/bin/executor_runner
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
: "${WORKBENCH_EXECUTORCH:?set WORKBENCH_EXECUTORCH to the ExecuTorch checkout}"
[[ $# -gt 0 ]] || { echo "usage: tools/gpu_carry.sh MODEL… (e.g. mobilenet_v2 refinenet_like)" >&2; exit 2; }
grep -qxF /.carry/ .git/info/exclude || echo /.carry/ >> .git/info/exclude
py=${PYTHON:-python3}
rm -rf .carry && mkdir -p .carry/wheels
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
xz_dir() { tar -C "$1" -cf - "$2" | xz -T0 -6 > ".carry/$3.tar.xz"; }

runner=$("$py" -c "from workbench.etvk.model import build; r = build.find(); print(r.root if r else '')")
[[ -n "$runner" ]] || { echo "no ET-VK runtime built for $WORKBENCH_EXECUTORCH: run workbench etvk build" >&2; exit 1; }
mkdir -p "$stage/runtime/bin" && cp "$runner/bin/executor_runner" "$stage/runtime/bin/" && cp "$runner/build.json" "$stage/runtime/"
xz_dir "$stage" runtime runtime

glslang=$("$py" -c "from workbench.toolchain import glslang; print(glslang.cache_root() if glslang.is_set_up() else '')")
[[ -n "$glslang" ]] || { echo "no glslang build: run python -m workbench.toolchain.glslang setup" >&2; exit 1; }
mkdir -p "$stage/glslang" && cp -r "$glslang"/. "$stage/glslang/"
xz_dir "$stage" glslang glslang

mkdir -p "$stage/etvk/executorch"
(cd "$WORKBENCH_EXECUTORCH" && git ls-files -z backends/__init__.py backends/vulkan | tar --null -T - -cf -) \
  | tar -x -C "$stage/etvk/executorch"
xz_dir "$stage" etvk etvk

for model in "$@"; do
  "$py" -m workbench.cli etvk lower "$model" --out "$stage/programs/$model" --quiet
done
xz_dir "$stage" programs programs

"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 -d "$stage" executorch==1.5.1
mkdir -p "$stage/devtools"
unzip -q "$stage"/executorch-*.whl 'executorch/*' -x 'executorch/backends/*' 'executorch/examples/*' '*/test/*' \
  '*/tests/*' 'executorch/lib/*' 'executorch/include/*' 'executorch/share/*' '*.so' -d "$stage/devtools"
xz_dir "$stage" devtools devtools

# the host image has pygments, packaging, psutil, attrs, python-dateutil, typing-extensions, tzdata (KINDS.md);
# debugpy and the JupyterLab widget front-ends are not needed to execute a notebook headless
"$py" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$stage/wheels" nbclient nbformat ipykernel ipywidgets
for skip in pygments packaging psutil attrs python_dateutil typing_extensions tzdata debugpy widgetsnbextension \
            jupyterlab_widgets; do rm -f "$stage"/wheels/"$skip"-*.whl; done
# what executorch.exir needs beyond the host image (torchao is optional there)
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 -d "$stage/wheels" ruamel.yaml
cp "$stage"/wheels/*.whl .carry/wheels/
echo "packed: $(du -sh .carry | cut -f1) in .carry/ ($(ls .carry/*.tar.xz | wc -l) archives, $(ls .carry/wheels | wc -l) wheels)"
