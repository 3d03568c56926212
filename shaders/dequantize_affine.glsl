#version 450
// Block-wise affine dequantize (torchao's dequantize_affine, zero-point domain INT):
//   x = float(q - zp[b]) * scale[b]     (exact int32 difference, one fp32 conversion, one fp32 multiply)
// with the block id b of include/affine_quant.glslh (W fastest: a contiguous [nbN, nbC, nbH, nbW] scale tensor).  No scale
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

#include "dispatch.glslh"
#include "half.glslh"
#include "indexing.glslh"
#include "affine_quant.glslh"

#define PACK8 (IN_KIND != 0)
#define UNSIGNED (IN_KIND == 2)

layout(std430, set = 0, binding = 2) readonly buffer Scales { float t_scale[]; };

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

#define DEQUANTIZE_OUT(q, tidx) TO_OUT(dequantize_one(q, tidx))

#if !TEXTURE  // buffers

BUFFER_IO(T, int)

void main() {
  const int i = int(dispatch_index());
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
  t_out[i] = T(DEQUANTIZE_OUT(q, linear_idx_to_tidx(meta, i, hl)));
}

#else  // textures

layout(set = 0, binding = 0, FLOAT_FORMAT) uniform writeonly image3D t_out;
layout(set = 0, binding = 1, rgba32i) uniform readonly iimage3D t_in;

AFFINE_TEXTURE_MAIN(ivec4, vec4, DEQUANTIZE_OUT)

#endif
