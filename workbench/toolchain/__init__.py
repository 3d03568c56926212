"""The shader toolchain: GLSL → validated SPIR-V, cached (``shaders``), and the compilers it builds once outside the
repository (``glslang``: glslc, glslangValidator, spirv-val and spirv-dis from Debian 13's sources, for ET-VK's whole
GLSL dialect; ``debian_source``: fetching, checking and unpacking Debian source packages, build steps logged into a
cache folder with a lock and a stamp)."""
