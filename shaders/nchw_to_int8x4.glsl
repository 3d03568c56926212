#version 450
// Pack an NCHW int8 tensor into an int8x4 layout: one thread per output word (int32 of 4 int8 lanes).
// The NCHW bytes are read as int words, so no 8-bit storage is needed (ET-VK's staging shaders do the same).
// Padding lanes become 0; every word is written.
#include "dispatch.glslh"
#include "indexing.glslh"
#include "int8x4.glslh"

layout(set = 0, binding = 0) writeonly buffer Packed { int packed_words[]; };
layout(set = 0, binding = 1) readonly buffer Nchw { int nchw_words[]; };
layout(set = 0, binding = 2) uniform PackedMeta { BufferMetadata meta; };
layout(constant_id = 3) const int packed_layout = 0;

int nchw_byte(ivec4 tidx, ivec4 sizes) {
  const int idx = ((tidx.w * sizes.z + tidx.z) * sizes.y + tidx.y) * sizes.x + tidx.x;
  return sext8(nchw_words[idx >> 2], idx & 3);
}

void main() {
  const int word = int(dispatch_index());
  if (word >= meta_num_words(meta)) {
    return;
  }
  const ivec4 sizes = meta_sizes(meta);
  ivec4 q = ivec4(0);
  for (int lane = 0; lane < 4; ++lane) {
    const ivec4 tidx = byte_idx_to_tidx(meta, word * 4 + lane, packed_layout);
    if (tidx_in_bounds(tidx, sizes)) {
      q = with_comp(q, lane, nchw_byte(tidx, sizes));
    }
  }
  packed_words[word] = pack4x8(q);
}
