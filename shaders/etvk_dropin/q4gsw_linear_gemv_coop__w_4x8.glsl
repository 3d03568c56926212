// Kernel Workbench's drop-in for ET-VK's q4gsw_linear_gemv_coop__w_4x8 (decode's 4-bit GEMV, M = 1).
//
// Written in the workbench (not derived from ET-VK's template); it is an ET-VK template so that ET-VK's own
// generator expands it with the checkout's YAML (q4gsw_linear_gemv_coop__w_4x8.yaml, unchanged: the variant names,
// NUM_GROUPS, WORKERS_PER_GROUP, DTYPE, IO_STORAGE, WEIGHT_STORAGE, WEIGHT_KC) and the `${...}` helpers of the
// checkout's generator declare the bindings. `workbench etvk patch` swaps it in for the template's text.
//
// The interface it keeps, as Q4gswLinear.cpp dispatches the GEMV:
//   bindings   0 out [N] (or a width-packed texture), 1 x [K] vec4s, 2 the tin GEMM's transposed input (unused),
//              3 weights (ET-VK's nc buffer prepack: ivec4 [K/4][N8], 4 K values x 8 rows each),
//              4 scales [K / group_size][N] (IO dtype), 5 bias [N], 6 output_sizes, 7 input_sizes (UBOs)
//   spec       0..2 local size (1, NUM_GROUPS, WORKERS_PER_GROUP); 3 apply_bias, 4 K (unused), 5 group_size
//   push       none
//   dispatch   ceil(N8 / NUM_GROUPS) work groups along x; one work group owns NUM_GROUPS consecutive 8-row tiles
//
// What it does differently (docs/llm-decode.md, "Drop-in GEMV"):
//   * each thread walks its K in chunks of CHUNK (2) consecutive 16-byte weight vectors; where group_size is a
//     multiple of 4 * CHUNK a chunk lies in one scale group, so the 8 rows' scales are read as two vec4s and applied
//     once per chunk (ET-VK: two multiplies per weight). CHUNK 4 keeps more loads in flight but takes 24 vec4
//     registers on Adreno a740 (occupancy 0.5), CHUNK 1 takes ET-VK's 12 (1.0); 2 takes 19 (0.625);
//   * a nibble is made a float without a conversion: OR-ed into the mantissa of 2^23 at its place in a 16-bit half
//     of the word, minus 2^23 + 8 * 16^i it is (q - 8) * 16^i exactly; the 16^-i goes into the activations once per
//     vector, so a weight costs AND, OR, SUB and one FMA of a dot product;
//   * the partial sums of the WORKERS_PER_GROUP threads of a tile are added in one pass over shared memory (one or
//     two barriers, not a log2(WORKERS_PER_GROUP)-step tree), every thread summing 8 of them.
// Where K / 4 < CHUNK * WORKERS_PER_GROUP (small K in the 64-worker variant) the threads take single vectors round
// robin instead of chunks so that none idles. Subgroup operations are not used: ET-VK's interface has no way to
// say whether the device supports them (an optional Vulkan feature), and the template must run everywhere.

#version 450 core

${define_required_extensions(IO_STORAGE, DTYPE)}
${define_required_extensions("buffer", DTYPE)}
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

#define PRECISION ${PRECISION}
#define VEC4_T ${texel_load_type(DTYPE, IO_STORAGE)}
#define T ${texel_load_component_type(DTYPE, IO_STORAGE)}

$if IO_STORAGE == "buffer":
  #define IO_BUFFER
$if WEIGHT_STORAGE != "buffer" or WEIGHT_KC == 1:
  #error "the drop-in reads the nc buffer weight layout only (the variants ET-VK's YAML lists)"

#define NUM_GROUPS ${NUM_GROUPS}
#define WORKERS ${WORKERS_PER_GROUP}
#define THREADS (NUM_GROUPS * WORKERS)
#define TILE_ROWS 8
// weight vectors a thread takes per step (consecutive along K, one scale group: group_size % (4 * CHUNK) == 0)
#define CHUNK 2
#define OUTPUTS (NUM_GROUPS * TILE_ROWS)
// threads per output in the reduction's first pass (each adds 8 workers' sums)
#define PARTS (WORKERS / 8)
#if WORKERS % 8 != 0
#error "the drop-in's reduction needs WORKERS_PER_GROUP a multiple of 8"
#endif

layout(std430) buffer;

${layout_declare_tensor(B, "w", "t_output", DTYPE, IO_STORAGE, is_scalar_array=True)}
${layout_declare_tensor(B, "r", "t_fp_input", DTYPE, IO_STORAGE, is_scalar_array=False)}
${layout_declare_tensor(B, "r", "t_transposed_input", DTYPE, "buffer", is_scalar_array=False)}
${layout_declare_tensor(B, "r", "t_q4_weights", "int", WEIGHT_STORAGE, is_scalar_array=False, vec_size=4)}
// the same [groups, N] scales read four at a time: N % 4 == 0 keeps a group's row 16-byte aligned
${layout_declare_tensor(B, "r", "t_scales", DTYPE, "buffer", is_scalar_array=False, vec_size=4)}
${layout_declare_tensor(B, "r", "t_bias", DTYPE, "buffer", is_scalar_array=True)}

${layout_declare_ubo(B, "ivec4", "output_sizes")}
${layout_declare_ubo(B, "ivec4", "input_sizes")}

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

${layout_declare_spec_const(C, "int", "apply_bias", "0")}
${layout_declare_spec_const(C, "int", "K", "1024")}
${layout_declare_spec_const(C, "int", "group_size", "32")}

// each thread's 8 sums (two vec4), then the first pass's sums
shared vec4 partial[2 * THREADS];
shared float parts[THREADS];

const uint EXP23 = 0x4B000000u;  // the float 2^23: OR-ing v < 2^23 into its mantissa gives 2^23 + v
// 2^23 + 8 * 16^i for the low (i = 0, 2) and high (i = 1, 3) nibble of the two bytes of a 16-bit half
const vec4 BIAS_LO = vec4(8388616.0, 8390656.0, 8388616.0, 8390656.0);
const vec4 BIAS_HI = vec4(8388736.0, 8421376.0, 8388736.0, 8421376.0);
const uvec4 MASK_LO = uvec4(0xFu, 0xF00u, 0xFu, 0xF00u);
const uvec4 MASK_HI = uvec4(0xF0u, 0xF000u, 0xF0u, 0xF000u);

vec4 load_x(const int k4) {
#ifdef IO_BUFFER
  return vec4(t_fp_input[k4]);
#else
  return vec4(texelFetch(t_fp_input, ivec3(k4, 0, 0), 0));
#endif
}

// One weight vector (4 K values x 8 rows) dotted with its 4 activations, unscaled: d[r] = sum_b (q - 8) * x_b.
// Word c holds rows 2c (low nibble of each byte) and 2c + 1 (high nibble); byte b is K value b.
// xl / xh: the activations times 16^-i of the nibble's place (exact powers of two).
void dot_vector(const ivec4 w, const vec4 xl, const vec4 xh, inout vec4 d0, inout vec4 d1) {
  float r[TILE_ROWS];
  [[unroll]] for (int c = 0; c < 4; ++c) {
    const uint v = uint(w[c]);
    const uvec4 halves = uvec4(v, v, v >> 16, v >> 16);
    r[2 * c] = dot(uintBitsToFloat((halves & MASK_LO) | EXP23) - BIAS_LO, xl);
    r[2 * c + 1] = dot(uintBitsToFloat((halves & MASK_HI) | EXP23) - BIAS_HI, xh);
  }
  d0 += vec4(r[0], r[1], r[2], r[3]);
  d1 += vec4(r[4], r[5], r[6], r[7]);
}

void scaled_x(const vec4 x, out vec4 xl, out vec4 xh) {
  xl = x * vec4(1.0, 0.00390625, 1.0, 0.00390625);
  xh = x * vec4(0.0625, 0.000244140625, 0.0625, 0.000244140625);
}

void main() {
  const int j = int(gl_LocalInvocationID.y);        // tile of the work group
  const int worker = int(gl_LocalInvocationID.z);
  const int t = int(gl_LocalInvocationIndex);       // j + NUM_GROUPS * worker
  const int n8_base = int(gl_WorkGroupID.x) * NUM_GROUPS;
  const int n8 = n8_base + j;

  const int N = output_sizes.x;
  const int K4 = input_sizes.x / 4;
  const int N4 = (N + 3) / 4;
  const int N8 = (N4 + 1) / 2;
  const int blocks = group_size / 4;               // weight vectors per scale group
  // scales of rows 8 * n8 .. + 7 in group g: vec4s g * N / 4 + 2 * n8 and + 1 (the second past N when N % 8 == 4)
  const int scale_pitch = N / 4;
  const bool tile_valid = n8 < N8;
  const bool second_half = 8 * n8 + 4 < N;

  vec4 acc0 = vec4(0.0), acc1 = vec4(0.0);
  if (tile_valid) {
    if (blocks % CHUNK == 0 && K4 >= CHUNK * WORKERS) {
      // chunks of CHUNK consecutive vectors, one scale group each
      for (int c = worker; CHUNK * c < K4; c += WORKERS) {
        const int k4 = CHUNK * c;
        vec4 d0 = vec4(0.0), d1 = vec4(0.0);
        [[unroll]] for (int u = 0; u < CHUNK; ++u) {
          const ivec4 w = t_q4_weights[(k4 + u) * N8 + n8];
          vec4 xl, xh;
          scaled_x(load_x(k4 + u), xl, xh);
          dot_vector(w, xl, xh, d0, d1);
        }
        const int s = (k4 / blocks) * scale_pitch + 2 * n8;
        const vec4 s0 = vec4(t_scales[s]);
        const vec4 s1 = second_half ? vec4(t_scales[s + 1]) : vec4(0.0);
        acc0 = fma(s0, d0, acc0);
        acc1 = fma(s1, d1, acc1);
      }
    } else {
      // one vector at a time, round robin (small K, or a group size that is not a multiple of 16)
      for (int k4 = worker; k4 < K4; k4 += WORKERS) {
        const ivec4 w = t_q4_weights[k4 * N8 + n8];
        vec4 xl, xh;
        scaled_x(load_x(k4), xl, xh);
        vec4 d0 = vec4(0.0), d1 = vec4(0.0);
        dot_vector(w, xl, xh, d0, d1);
        const int s = (k4 / blocks) * scale_pitch + 2 * n8;
        acc0 = fma(vec4(t_scales[s]), d0, acc0);
        acc1 = fma(second_half ? vec4(t_scales[s + 1]) : vec4(0.0), d1, acc1);
      }
    }
  }

  partial[2 * t] = acc0;
  partial[2 * t + 1] = acc1;
  memoryBarrierShared();
  barrier();

  // first pass: thread t adds 8 workers' sums of output o (tile o / 8, row o % 8)
  const int o = t % OUTPUTS;
  const int part = t / OUTPUTS;
  const int tile = o / TILE_ROWS, row = o % TILE_ROWS;
  float sum = 0.0;
  [[unroll]] for (int i = 0; i < 8; ++i) {
    sum += partial[2 * (tile + NUM_GROUPS * (8 * part + i)) + row / 4][row % 4];
  }

#if defined(IO_BUFFER) && PARTS == 1
  const int n = 8 * n8_base + o;
  if (n < N) {
    t_output[n] = T(apply_bias > 0 ? sum + float(t_bias[n]) : sum);
  }
#else
  parts[part * OUTPUTS + o] = sum;
  memoryBarrierShared();
  barrier();
#ifdef IO_BUFFER
  if (t < OUTPUTS) {
    float total = 0.0;
    [[unroll]] for (int p = 0; p < PARTS; ++p) {
      total += parts[p * OUTPUTS + t];
    }
    const int n = 8 * n8_base + t;
    if (n < N) {
      t_output[n] = T(apply_bias > 0 ? total + float(t_bias[n]) : total);
    }
  }
#else
  // width-packed texture: thread t writes texel n4 = 2 * n8_base + t (4 outputs)
  const int n4 = 2 * n8_base + t;
  if (t < OUTPUTS / 4 && n4 < N4) {
    vec4 texel = vec4(0.0);
    [[unroll]] for (int e = 0; e < 4; ++e) {
      float total = 0.0;
      [[unroll]] for (int p = 0; p < PARTS; ++p) {
        total += parts[p * OUTPUTS + 4 * t + e];
      }
      const int n = 4 * n4 + e;
      texel[e] = (apply_bias > 0 && n < N) ? total + float(t_bias[n]) : total;
    }
    imageStore(t_output, ivec3(n4, 0, 0), texel);
  }
#endif
#endif
}
