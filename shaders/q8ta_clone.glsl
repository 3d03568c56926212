#version 450
// int8 layout conversion (the runtime side of a partitioner transition between two int8 representations):
// read an int8 tensor in one representation, write it in another, in one dispatch.
//
// Representations: an int8x4 buffer (any packed-int8 layout: 4W4C, 4H4W, 4W, 4C, 4C1W; int32 words of 4
// little-endian int8 lanes) or a 3-D rgba32i image in a float texture layout (W / H / C packed: one int8 value per
// component, 4 consecutive elements along the packed dim per texel) -- the "int8 tensor in a float texture layout"
// that a float-only identity op forces (etvk.md section 7.4, before PR #19395).
//
// DST_TEXTURE = 0: one thread per output word; lane k is element k along the output's packed dim (block 4 in every
// int8 layout), padding lanes are written 0.  DST_TEXTURE = 1: one thread per output texel; padding components 0.
// Each element is read from the input representation (SRC_TEXTURE 0: word + lane through the input's hashed layout
// and BufferMetadata; 1: texel + component through the input's texture layout and TextureMetadata).
//
// Bindings: 0 output, 1 input, 2 output metadata, 3 input metadata (BufferMetadata or TextureMetadata).
// Spec constants: 3 output layout, 4 input layout (hashed).  No push constants.

#extension GL_EXT_control_flow_attributes : require

#include "dispatch.glslh"
#include "indexing.glslh"
#include "int8x4.glslh"

#ifndef SRC_TEXTURE
#define SRC_TEXTURE 0
#endif
#ifndef DST_TEXTURE
#define DST_TEXTURE 0
#endif

layout(constant_id = 3) const int out_layout = 0x44023102;
layout(constant_id = 4) const int in_layout = 0x44023102;

#if DST_TEXTURE
layout(set = 0, binding = 0, rgba32i) uniform writeonly iimage3D t_out;
#else
layout(std430, set = 0, binding = 0) writeonly buffer Out { int t_out[]; };
#endif
#if SRC_TEXTURE
layout(set = 0, binding = 1, rgba32i) uniform readonly iimage3D t_in;
#else
layout(std430, set = 0, binding = 1) readonly buffer In { int t_in[]; };
#endif
#if DST_TEXTURE
layout(std140, set = 0, binding = 2) uniform OutMeta { TextureMetadata out_meta; };
#else
layout(std140, set = 0, binding = 2) uniform OutMeta { BufferMetadata out_meta; };
#endif
#if SRC_TEXTURE
layout(std140, set = 0, binding = 3) uniform InMeta { TextureMetadata in_meta; };
#else
layout(std140, set = 0, binding = 3) uniform InMeta { BufferMetadata in_meta; };
#endif

// The int8 value of tensor element tidx (WHCN) in the input representation.
int load_element(ivec4 tidx) {
#if SRC_TEXTURE
  const ivec4 where = tidx_to_texel_pos(tidx, in_meta.sizes, in_layout);
  return comp_of(imageLoad(t_in, where.xyz), where.w);
#else
  const int b = tidx_to_byte_idx(in_meta, tidx, in_layout);
  return sext8(t_in[b >> 2], b & 3);
#endif
}

void main() {
#if DST_TEXTURE
  const ivec3 pos = ivec3(gl_GlobalInvocationID);
  if (any(greaterThanEqual(pos, imageSize(t_out)))) {
    return;
  }
  const ivec4 sizes = out_meta.sizes;
  ivec4 v = ivec4(0);
  [[unroll]] for (int comp = 0; comp < 4; ++comp) {
    const ivec4 tidx = texel_pos_to_tidx(pos, comp, sizes, out_layout);
    if (tidx_in_bounds(tidx, sizes)) {
      v = with_comp(v, comp, load_element(tidx));
    }
  }
  imageStore(t_out, pos, v);
#else
  const int w = int(dispatch_index());
  if (w >= meta_num_words(out_meta)) {
    return;
  }
  const ivec4 sizes = meta_sizes(out_meta);
  const int pd = layout_packed_dim(out_layout);
  const ivec4 first = word_idx_to_tidx(out_meta, w, out_layout);  // lane 0's element
  ivec4 q = ivec4(0);
  [[unroll]] for (int k = 0; k < 4; ++k) {
    const ivec4 tidx = with_comp(first, pd, comp_of(first, pd) + k);
    if (tidx_in_bounds(tidx, sizes)) {
      q = with_comp(q, k, load_element(tidx));
    }
  }
  t_out[w] = pack4x8(q);
#endif
}
