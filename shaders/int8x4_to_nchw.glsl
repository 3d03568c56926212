#version 450
// Unpack an int8x4 layout to NCHW int8: one thread per 4 consecutive NCHW bytes (one output word).
#include "dispatch.glslh"
#include "indexing.glslh"
#include "int8x4.glslh"

layout(set = 0, binding = 0) writeonly buffer Nchw { int nchw_words[]; };
layout(set = 0, binding = 1) readonly buffer Packed { int packed_words[]; };
layout(set = 0, binding = 2) uniform PackedMeta { BufferMetadata meta; };
layout(constant_id = 3) const int packed_layout = 0;

void main() {
  const int out_word = int(dispatch_index());
  const ivec4 sizes = meta_sizes(meta);
  const int numel = sizes.x * sizes.y * sizes.z * sizes.w;
  if (out_word * 4 >= numel) {
    return;
  }
  ivec4 q = ivec4(0);
  for (int k = 0; k < 4; ++k) {
    int i = out_word * 4 + k;
    if (i < numel) {
      // NCHW linear index → WHCN tensor index
      const ivec4 tidx = ivec4(i % sizes.x, (i / sizes.x) % sizes.y, (i / (sizes.x * sizes.y)) % sizes.z,
                               i / (sizes.x * sizes.y * sizes.z));
      const int b = tidx_to_byte_idx(meta, tidx, packed_layout);
      q = with_comp(q, k, sext8(packed_words[b >> 2], b & 3));
    }
  }
  nchw_words[out_word] = pack4x8(q);
}
