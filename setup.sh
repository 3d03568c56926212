#!/usr/bin/env bash
# One command for a fresh Debian/Ubuntu machine: set everything up (idempotent, quick the second time), then run.
#   ./setup.sh main [ARGS…]   set up, then run the main job on the default Vulkan device (workbench main ARGS…)
#   ./setup.sh test [ARGS…]   set up (with test extras), then run the whole test suite (pytest ARGS…)
#   ./setup.sh lab            set up, then start JupyterLab on the repository
#   ./setup.sh compilers      set up, then build Mesa's Turnip, PanVK and RADV + the drm-shims (offline Adreno, Mali
#                             and AMD statistics); `./setup.sh adreno` is the same
#   ./setup.sh capture [ARGS…] set up, then build GFXReconstruct's capture layer and tools (~8 min on 2 cores; for
#                             `workbench capture`; fetched from GitHub, or WORKBENCH_GFXRECON_SOURCE names a checkout)
#   ./setup.sh validation     set up, then build the Khronos validation layer of vulkan-sdk-1.4.357.0 (GPU-AV's
#                             shared-memory race detection, for `workbench capture races`; ~35 min on 2 cores; fetched
#                             from GitHub, or WORKBENCH_VVL_SOURCE / WORKBENCH_VVL_GIT name the trees)
#   ./setup.sh peers          set up, then install other engines' wheels into the venv (ncnn, iree-base-compiler,
#                             iree-base-runtime: the programs of workbench.capture.engines, captured and replayed);
#                             with WORKBENCH_GGML naming a ggml or llama.cpp checkout, build its Vulkan backend too
#                             (workbench.toolchain.ggml, ~8 min on 2 cores)
#   ./setup.sh                set up only
# Environment: WORKBENCH_VENV (default .venv), WORKBENCH_SKIP_MESA=1 or its older name WORKBENCH_SKIP_ADRENO=1 (no
# Turnip / PanVK / RADV build), WORKBENCH_MESA_DIR (or WORKBENCH_ADRENO_DIR: its cache), WORKBENCH_SKIP_GLSLANG=1 (no
# glslc build: Debian 12's glslc is used), WORKBENCH_TORCH_INDEX (an extra pip index for a CPU torch build,
# e.g. https://download.pytorch.org/whl/cpu, where the local pip configuration has none).
set -euo pipefail
cd "$(dirname "$0")"
mode="${1:-setup}"; shift || true
venv="${WORKBENCH_VENV:-.venv}"

system_packages=(libvulkan1 mesa-vulkan-drivers glslc spirv-tools vulkan-validationlayers)
if [[ "$mode" == test ]]; then system_packages+=(chromium); fi
python3 -c 'import ensurepip, venv' 2>/dev/null || system_packages+=(python3-venv python3-pip)

missing=()
for p in "${system_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]]; then as_root=(); elif sudo -n true 2>/dev/null; then as_root=(sudo -n); else
    echo "setup: missing system packages: ${missing[*]}" >&2
    echo "setup: installing them needs root; run as root, or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

pip_quiet() {  # this machine's pip configuration warns about absent local indexes on every package
  # … and pip's resolver lists executorch's requirements that setup leaves out on purpose (docs/partitioner.md: dependencies)
  "$@" 2> >(grep -v -e "is ignored: it is neither a file nor a directory" \
               -e "^executorch .* requires .*, which is not installed" \
               -e "pip's dependency resolver does not currently take into account" >&2)
}

# The Python environment; a stamp of pyproject.toml makes a second run a no-op.
extras=""; [[ "$mode" == test ]] && extras="[test]"
stamp="$venv/.workbench-installed$extras"
want="$(sha256sum pyproject.toml | cut -c1-64)"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup: creating $venv"
  python3 -m venv "$venv"
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  echo "setup: installing the workbench and its dependencies into $venv"
  pip=(pip_quiet "$venv/bin/python" -m pip install -q --disable-pip-version-check)
  index=(); [[ -n "${WORKBENCH_TORCH_INDEX:-}" ]] && index=(--extra-index-url "$WORKBENCH_TORCH_INDEX")
  # torch pinned to a CPU build: an unpinned torch may pull a multi-GB CUDA build.
  "${pip[@]}" "${index[@]}" "torch==2.13.0"
  # ExecuTorch's Python (VulkanPartitioner, TagMemoryMetaPass, the shader codegen gen_vulkan_spv.py) and torchao as
  # the quantization reference. executorch goes in without its dependency list: that list pulls coremltools,
  # scikit-learn, hydra-core, pytorch-tokenizers … (none needed to lower to Vulkan or to expand shaders) and could
  # replace the CPU torch; the few it needs here are in pyproject.toml.
  "${pip[@]}" "${index[@]}" "torchao==0.18.0"
  "${pip[@]}" --no-deps "executorch==1.5.1"
  "${pip[@]}" "${index[@]}" -e ".$extras"
  echo "$want" > "$stamp"
fi

export PATH="$PWD/$venv/bin:$PATH"
# The shader compiler for ET-VK's whole GLSL dialect (GL_EXT_integer_dot_product in headers, GL_KHR_cooperative_matrix):
# glslc / glslangValidator / spirv-val built from Debian 13's shaderc, glslang and SPIRV-Tools sources once (~6 min on
# 2 cores) and cached in ~/.cache/workbench/glslang (WORKBENCH_GLSLANG_DIR); workbench.toolchain.shaders prefers it. A second run
# finds the stamp and returns at once.
if [[ ( "$mode" == main || "$mode" == test ) && -z "${WORKBENCH_SKIP_GLSLANG:-}" ]]; then
  "$venv/bin/python" -m workbench.toolchain.glslang setup --quiet
  export WORKBENCH_REQUIRE_GLSLANG=1
fi
# Adreno, Mali and AMD statistics without their GPUs: Mesa 25.0.7's Turnip, PanVK and RADV on no-op kernel drivers,
# built once (~10 min on 2 cores) and cached in ~/.cache/workbench/mesa (WORKBENCH_MESA_DIR); a second run finds the
# stamp and returns at once (a Turnip-only cache of before is rebuilt once).
if [[ ( "$mode" == main || "$mode" == test ) && -z "${WORKBENCH_SKIP_MESA:-}${WORKBENCH_SKIP_ADRENO:-}" ]]; then
  workbench compilers setup --quiet
  export WORKBENCH_REQUIRE_MESA=1
fi
case "$mode" in
  main) exec workbench main "$@" ;;
  test) exec "$venv/bin/python" -m pytest "$@" ;;
  lab)  exec "$venv/bin/jupyter" lab --notebook-dir="$PWD" "$@" ;;
  compilers|adreno) exec "$venv/bin/workbench" compilers setup "$@" ;;
  capture) exec "$venv/bin/python" -m workbench.toolchain.gfxreconstruct setup "$@" ;;
  validation) exec "$venv/bin/python" -m workbench.toolchain.validation setup "$@" ;;
  peers) pip_quiet "$venv/bin/python" -m pip install -q --disable-pip-version-check "ncnn==1.0.20261020" \
           "iree-base-compiler==3.13.0" "iree-base-runtime==3.13.0" "$@"
         if [ -n "${WORKBENCH_GGML:-}" ]; then "$venv/bin/python" -m workbench.toolchain.ggml setup || exit 1; fi
         echo "setup: done ($venv, with ncnn, iree-base-compiler and iree-base-runtime${WORKBENCH_GGML:+ and ggml})" ;;
  setup) echo "setup: done ($venv)" ;;
  *) echo "setup: unknown mode '$mode' (expected main, test, lab, compilers, capture, validation, peers or nothing)" >&2; exit 2 ;;
esac
