#version 450
// fp32 buffer (any float buffer layout) -> int8x4 (any packed-int8 layout):
//   q = clamp(roundEven(x * inv_scale) + zp, -128, 127)   (ET-VK's q8ta_quantize order, ties to even).
// One thread per output word; the 4 lanes of a word are 4 consecutive elements along the packed dim (block 4 in
// every int8 layout).  Padding lanes (past the tensor's sizes) are written zp, as ET-VK's q8ta_quantize does.
// The last stage of the decomposed pixel-shuffle chain.
// Bindings: 0 output words, 1 input floats, 2 output BufferMetadata, 3 input BufferMetadata.
// Spec constants: 3 input layout (float), 4 output layout (int8).  Push constants: float inv_scale, int zp.

#extension GL_EXT_control_flow_attributes : require

#include "dispatch.glslh"
#include "indexing.glslh"
#include "int8x4.glslh"

layout(constant_id = 3) const int in_layout = 0x11103210;
layout(constant_id = 4) const int out_layout = 0x44023102;

BUFFER_IO(int, float)
BUFFER_IO_METADATA

layout(push_constant) uniform Params {
  float inv_scale;
  int zp;
} p;

void main() {
  const int w = int(dispatch_index());
  if (w >= meta_num_words(out_meta)) {
    return;
  }
  const ivec4 sizes = meta_sizes(out_meta);
  const int pd = layout_packed_dim(out_layout);
  const ivec4 first = word_idx_to_tidx(out_meta, w, out_layout);  // lane 0
  ivec4 q = ivec4(p.zp);
  [[unroll]] for (int k = 0; k < 4; ++k) {
    const ivec4 tidx = with_comp(first, pd, comp_of(first, pd) + k);
    if (tidx_in_bounds(tidx, sizes)) {
      precise float s = t_in[tidx_to_linear_idx(in_meta, tidx)] * p.inv_scale;
      q[k] = clamp(int(roundEven(s)) + p.zp, -128, 127);
    }
  }
  t_out[w] = pack4x8(q);
}
