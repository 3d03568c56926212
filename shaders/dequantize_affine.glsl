#version 450
// Block-wise affine dequantize (torchao's dequantize_affine, zero-point domain INT):
//   x = float(q - zp[b]) * scale[b]     (exact int32 difference, one fp32 conversion, one fp32 multiply)
// with the block id b of quantize_affine.glsl (W fastest: a contiguous [nbN, nbC, nbH, nbW] scale tensor).  No scale
// clamp (torchao clamps only when quantizing).  fp16 outputs round the fp32 result once to nearest-even fp16 in
// round_to_half() (exact fp32 arithmetic), so the final conversion / rgba16f store is exact: Vulkan leaves the
// rounding of fp32 -> fp16 conversions to the implementation (lavapipe's rgba16f imageStore truncates).
//
// Variants (dequantize_affine.yaml): TEXTURE (0: storage buffers, 1: 3-D images, rgba32i input) x HALF (fp16
// output) x IN_KIND (buffers only; 0: one int32 per element; 1: int8 packed 4 per int32 word, lane k = linear
// element 4*word + k, sign-extended; 2: the same with uint8 lanes, zero-extended).
// Bindings: 0 output, 1 input, 2 scale (float[]), 3 zero_point (int[]), 4 metadata (shared by input and output).
// Spec constants: 3 the hashed layout of both tensors.  Push constants as quantize_affine.glsl.

#extension GL_EXT_control_flow_attributes : require
#if HALF && !TEXTURE
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif

#include "indexing.glslh"

#define PACK8 (IN_KIND != 0)
#define UNSIGNED (IN_KIND == 2)

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(constant_id = 3) const int hl = 0x11103210;

layout(push_constant) uniform Params {
  ivec4 block_size;    // WHCN
  ivec4 num_blocks;    // WHCN
  ivec4 block_stride;  // WHCN: (1, nbW, nbW*nbH, nbW*nbH*nbC)
  int quant_min;       // unused when dequantizing (torchao does not clamp the input)
  int quant_max;
};

layout(std430, set = 0, binding = 2) readonly buffer Scales { float t_scale[]; };
layout(std430, set = 0, binding = 3) readonly buffer ZeroPoints { int t_zero_point[]; };

int block_id(ivec4 tidx) {
  const ivec4 b = tidx / block_size;
  return b.x * block_stride.x + b.y * block_stride.y + b.z * block_stride.z + b.w * block_stride.w;
}

float dequantize_one(int q, ivec4 tidx) {
  const int b = block_id(tidx);
  return float(q - t_zero_point[b]) * t_scale[b];
}

#if HALF
// x rounded to the nearest fp16 value (ties to even), as an fp32: scale the fp16 ulp of x to 1 (a power of two:
// exact), roundEven, scale back.  fp16 has 11 significant bits and its smallest normal exponent is -14 (below,
// the ulp stays 2^-24: subnormals).  Beyond the largest fp16 (65504) rounding gives +-inf, as RTE does.
float round_to_half(float x) {
  if (x == 0.0 || isinf(x) || isnan(x)) {
    return x;
  }
  int e;
  frexp(x, e);         // |x| in [2^(e-1), 2^e): fp16 exponent e-1, ulp 2^(e-11)
  e = max(e, -13);     // subnormal fp16: ulp 2^-24
  const float r = ldexp(roundEven(ldexp(x, 11 - e)), e - 11);
  if (abs(r) > 65504.0) {
    return x > 0.0 ? uintBitsToFloat(0x7F800000u) : uintBitsToFloat(0xFF800000u);
  }
  return r;
}
#define TO_OUT(v) round_to_half(v)
#else
#define TO_OUT(v) (v)
#endif

#if TEXTURE

#if HALF
#define OUT_FORMAT rgba16f
#else
#define OUT_FORMAT rgba32f
#endif

layout(set = 0, binding = 0, OUT_FORMAT) uniform writeonly image3D t_out;
layout(set = 0, binding = 1, rgba32i) uniform readonly iimage3D t_in;
layout(std140, set = 0, binding = 4) uniform Meta { TextureMetadata meta; };

void main() {
  const ivec3 pos = ivec3(gl_GlobalInvocationID);
  if (any(greaterThanEqual(pos, imageSize(t_out)))) {
    return;
  }
  const ivec4 q = imageLoad(t_in, pos);
  vec4 x = vec4(0.0);  // padding components stay 0
  [[unroll]] for (int k = 0; k < 4; ++k) {
    const ivec4 t = texel_pos_to_tidx(pos, k, meta.sizes, hl);
    if (tidx_in_bounds(t, meta.sizes)) {
      x[k] = TO_OUT(dequantize_one(q[k], t));
    }
  }
  imageStore(t_out, pos, x);
}

#else  // buffers

#if HALF
#define T float16_t
#else
#define T float
#endif

layout(std430, set = 0, binding = 0) writeonly buffer Out { T t_out[]; };
layout(std430, set = 0, binding = 1) readonly buffer In { int t_in[]; };
layout(std140, set = 0, binding = 4) uniform Meta { BufferMetadata meta; };

void main() {
  const int i = int(gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x);
  if (i >= meta_numel(meta)) {
    return;
  }
#if PACK8
#if UNSIGNED
  const int q = (t_in[i >> 2] >> (8 * (i & 3))) & 0xFF;
#else
  const int q = bitfieldExtract(t_in[i >> 2], 8 * (i & 3), 8);  // signed extract: sign-extends
#endif
#else
  const int q = t_in[i];
#endif
  t_out[i] = T(TO_OUT(dequantize_one(q, linear_idx_to_tidx(meta, i, hl))));
}

#endif
