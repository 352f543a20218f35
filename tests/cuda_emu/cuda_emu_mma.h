/* The tensor-core instructions the attention kernels use, for cuda_emu.h:
 * PTX `mma.sync.aligned.m16n8k16.row.col.f32.<bf16|f16>.<bf16|f16>.f32`,
 * d = a b + d over a warp, and `ldmatrix` (x4, plain or .trans), which
 * loads the fragments, as functions the kernel source calls in place of its
 * inline assembly when CUDA_EMU_MMA is defined.
 *
 * The fragments are spread over the warp's 32 lanes exactly as the PTX ISA
 * documents them (lane = 4 g + c: "groupID" g, "threadID_in_group" c), so a
 * kernel that fills a register with the wrong elements gets a wrong product
 * here as on a GPU:
 *  - a (16 x 16, row-major), 4 registers of two bf16 or f16 each (the lower
 *    column in the low half): register r holds row g + 8 (r % 2), columns
 *    2 c + 8 (r / 2) and the next;
 *  - b (16 x 8, column-major), 2 registers: register r holds rows
 *    2 c + 8 r and the next, column g;
 *  - c and d (16 x 8, f32), 4 values: value e is row g + 8 (e / 2),
 *    column 2 c + e % 2.
 * Each lane publishes its registers in a per-warp table (static storage, as
 * __shared__ is here: blocks run one at a time), the warp meets, each lane
 * computes its own four results from the table, and the warp meets again
 * before the table can be reused. The products of two bf16 (or two f16)
 * are exact in f32; the sum over k runs in order in f32 and adds c last (the hardware's
 * order and internal precision are unspecified: results agree within the
 * f32 rounding of a 16-term sum, not in bits). */
#ifndef JX_TESTS_CUDA_EMU_MMA_H
#define JX_TESTS_CUDA_EMU_MMA_H

#define CUDA_EMU_MMA 1

struct cuda_emu_mma_lane {
  unsigned a[4], b[2];
};
static cuda_emu_mma_lane cuda_emu_mma_table[32][32]; /* [warp][lane], 1024 threads at most */

/* element `half` (0: low) of a register of two bf16, as f32 */
static inline float cuda_emu_bf16_half(unsigned reg, int half) {
  return __uint_as_float(half ? reg & 0xffff0000u : reg << 16);
}

/* element `half` (0: low) of a register of two f16, as f32 (exact) */
static inline float cuda_emu_f16_half(unsigned reg, int half) {
  const unsigned h = half ? reg >> 16 : reg & 0xffffu, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  const float mag = e == 31  ? (m ? __builtin_nanf("") : __builtin_inff())
                    : e == 0 ? std::ldexp((float)m, -24)
                             : std::ldexp((float)(m | 0x400u), (int)e - 25);
  return h & 0x8000u ? -mag : mag;
}

static inline void cuda_emu_mma_m16n8k16(float d[4], const unsigned a[4], const unsigned b[2],
                                         float (*half)(unsigned, int)) {
  const unsigned tid = cuda_emu_linear_tid(), lane = tid % 32;
  cuda_emu_mma_lane *w = cuda_emu_mma_table[tid / 32];
  for (int r = 0; r < 4; r++) w[lane].a[r] = a[r];
  for (int r = 0; r < 2; r++) w[lane].b[r] = b[r];
  __syncwarp();
  float out[4];
  for (int e = 0; e < 4; e++) {
    const unsigned row = lane / 4 + 8 * (e / 2), col = 2 * (lane % 4) + e % 2;
    float sum = 0.0f;
    for (unsigned k = 0; k < 16; k++) {
      /* a[row][k]: lane 4 (row % 8) + (k % 8) / 2, register row / 8 + 2 (k / 8) */
      const float x = half(w[4 * (row % 8) + (k % 8) / 2].a[row / 8 + 2 * (k / 8)], k % 2);
      /* b[k][col]: lane 4 col + (k % 8) / 2, register k / 8 */
      const float y = half(w[4 * col + (k % 8) / 2].b[k / 8], k % 2);
      sum += x * y;
    }
    out[e] = d[e] + sum;
  }
  __syncwarp(); /* every lane has read the table */
  for (int e = 0; e < 4; e++) d[e] = out[e];
}

static inline void cuda_emu_mma_m16n8k16_bf16(float d[4], const unsigned a[4],
                                              const unsigned b[2]) {
  cuda_emu_mma_m16n8k16(d, a, b, cuda_emu_bf16_half);
}
static inline void cuda_emu_mma_m16n8k16_f16(float d[4], const unsigned a[4], const unsigned b[2]) {
  cuda_emu_mma_m16n8k16(d, a, b, cuda_emu_f16_half);
}

/* PTX `ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16`: four 8 x 8
 * matrices of 16-bit values, lane l giving the address of row l % 8 of
 * matrix l / 8 (16 bytes, 16-byte aligned); register i of lane l receives
 * matrix i's row l / 4, columns 2 (l % 4) and the next (lower column in the
 * low half), or with trans its column l / 4, rows 2 (l % 4) and the next.
 * The rows' addresses go through a per-warp table as mma's registers do. */
static const unsigned short *cuda_emu_ldsm_table[32][32]; /* [warp][lane] */

static inline void cuda_emu_ldmatrix_x4(unsigned r[4], const unsigned short *row, int trans) {
  const unsigned tid = cuda_emu_linear_tid(), lane = tid % 32;
  if ((unsigned long long)row % 16) {
    std::fprintf(stderr, "cuda_emu: ldmatrix row address %p of lane %u not 16-byte aligned\n",
                 (const void *)row, lane);
    std::abort();
  }
  const unsigned short **w = cuda_emu_ldsm_table[tid / 32];
  w[lane] = row;
  __syncwarp();
  const unsigned g = lane / 4, c2 = 2 * (lane % 4);
  for (int i = 0; i < 4; i++) {
    const unsigned short *const *m = w + 8 * i; /* matrix i's rows */
    r[i] = trans ? (unsigned)m[c2][g] | (unsigned)m[c2 + 1][g] << 16
                 : (unsigned)m[g][c2] | (unsigned)m[g][c2 + 1] << 16;
  }
  __syncwarp(); /* every lane has read the table */
}

#endif
