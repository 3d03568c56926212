#version 450
// Test shader for shaders/include/indexing.glslh: one invocation per logical element (NCHW-contiguous order).
// Writes 16 ints per element (see tests/test_layouts.py::_expected_records for the meaning of each slot).
// Bindings: outputs first, then UBOs.  Spec constants 3 / 4: hashed layouts (workbench Layout.spec_constant()).

#include "indexing.glslh"

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(constant_id = 3) const int buf_layout = 0x11103210;
layout(constant_id = 4) const int tex_layout = 0x14022210;

layout(std430, set = 0, binding = 0) writeonly buffer Results {
  int results[];
};

layout(std140, set = 0, binding = 1) uniform BufMeta {
  BufferMetadata buf_meta;
};

layout(std140, set = 0, binding = 2) uniform TexMeta {
  TextureMetadata tex_meta;
};

void main() {
  ivec4 sizes = meta_sizes(buf_meta);
  int numel = sizes.x * sizes.y * sizes.z * sizes.w;
  int i = int(gl_GlobalInvocationID.x);
  if (i >= numel) {
    return;
  }
  // NCHW-contiguous decomposition of i into a WHCN tensor index.
  ivec4 tidx;
  tidx.x = i % sizes.x;
  tidx.y = (i / sizes.x) % sizes.y;
  tidx.z = (i / (sizes.x * sizes.y)) % sizes.z;
  tidx.w = i / (sizes.x * sizes.y * sizes.z);

  int base = i * 16;
  int byte_idx = tidx_to_byte_idx(buf_meta, tidx, buf_layout);
  results[base + 0] = byte_idx;
  ivec4 first = word_idx_to_tidx(buf_meta, tidx_to_word_idx(buf_meta, tidx, buf_layout), buf_layout);
  results[base + 1] = first.x;
  results[base + 2] = first.y;
  results[base + 3] = first.z;
  results[base + 4] = first.w;
  results[base + 5] = (all(equal(byte_idx_to_tidx(buf_meta, byte_idx, buf_layout), tidx)) &&
                       tidx_to_lane(buf_meta, tidx, buf_layout) == (byte_idx & 3)) ? 1 : 0;
  int lin = tidx_to_linear_idx(buf_meta, tidx);
  results[base + 6] = lin;
  results[base + 7] = (all(equal(linear_idx_to_tidx(buf_meta, lin), tidx)) &&
                       all(equal(linear_idx_to_tidx(buf_meta, lin, buf_layout), tidx))) ? 1 : 0;
  ivec4 texel = tidx_to_texel_pos(tex_meta, tidx, tex_layout);
  results[base + 8] = texel.x;
  results[base + 9] = texel.y;
  results[base + 10] = texel.z;
  results[base + 11] = texel.w;
  results[base + 12] = all(equal(texel_pos_to_tidx(tex_meta, texel.xyz, texel.w, tex_layout), tidx)) ? 1 : 0;
  results[base + 13] = meta_num_words(buf_meta);
  results[base + 14] = meta_numel(buf_meta);
  results[base + 15] = tidx_in_bounds(tidx, tex_meta.sizes) ? tex_meta.limits.x * 10000 + tex_meta.packed_dim : -1;
}
