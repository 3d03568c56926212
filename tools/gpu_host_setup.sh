# Source on the GPU host, in the repository's root, after the prefix `bash ../shared/gpu/prepare.sh --prefix` prints:
# unpacks what tools/gpu_carry.sh packed into .carry/ and points the workbench at it.
#   source tools/gpu_host_setup.sh && workbench etvk fidelity --lowered "$WORKBENCH_LOWERED" --runtime "$WORKBENCH_RUNNER" …
[[ -d .carry ]] || { echo "no .carry/: run tools/gpu_carry.sh MODEL… here first, and carry .carry" >&2; return 1; }
mkdir -p /tmp/c
for t in .carry/*.tar.xz; do tar xJf "$t" -C /tmp/c || return 1; done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .carry/wheels/*.whl \
  2>&1 | grep -v "already exists" || true
export PYTHONPATH=/tmp/site:/tmp/c/devtools:$PWD
export WORKBENCH_GLSLANG_DIR=/tmp/c/glslang WORKBENCH_EXECUTORCH=/tmp/c/etvk/executorch
export WORKBENCH_RUNNER=/tmp/c/runtime/bin/executor_runner WORKBENCH_LOWERED=/tmp/c/programs
