/* The CUDA C dialect (see render_cuda.h): what differs from the C dialect is
 * all in this table; the expressions and the kernel body are render_c.c's. */
#include "render_cuda.h"

#include <stddef.h>

#include "../prims/complex_special.h"

/* The layout the prelude declares must be the host's. */
_Static_assert(sizeof(jx_cuda_kargs) ==
                   8 * (JX_FUSION_MAX_LOADS + JX_FUSION_MAX_STORES) + 8 * JX_MAX_RANK +
                       8 * JX_FUSION_MAX_LOADS * JX_MAX_RANK + 8 * (JX_CUDA_MAX_PIECES + 3),
               "jx_cuda_kargs has padding");
_Static_assert(sizeof(jx_cuda_kargs) <= 4096, "kernel arguments over CUDA's 4 KB limit");

#define JX_STR_(x) #x
#define JX_STR(x)  JX_STR_(x)

/* Complex values in CUDA C++, which has no _Complex: two structs of parts
 * with the operators and the <complex.h> names the expressions call
 * (prim_lowering.c). The arithmetic is the textbook one (a product without
 * C99's recovery of infinities from NaN parts, a quotient by Smith's
 * method) and the functions are formulas over CUDA's real ones, so a GPU's
 * complex results agree with the C kernels' to rounding, not bit for bit. */
#define JX_CUDA_COMPLEX_FUNCS(C, R, F, BIG)                                                        \
  "JX_FN " #C " operator+(" #C " a, " #C " b) { return " #C "(a.re + b.re, a.im + b.im); }\n"      \
  "JX_FN " #C " operator-(" #C " a, " #C " b) { return " #C "(a.re - b.re, a.im - b.im); }\n"      \
  "JX_FN " #C " operator-(" #C " a) { return " #C "(-a.re, -a.im); }\n"                            \
  "JX_FN " #C " &operator+=(" #C " &a, " #C " b) { a = a + b; return a; }\n"                       \
  "JX_FN " #C " operator*(" #C " a, " #C " b) {\n"                                                 \
  "  return " #C "(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);\n}\n"                    \
  "JX_FN " #C " operator/(" #C " a, " #R " b) { return " #C "(a.re / b, a.im / b); }\n"            \
  "JX_FN " #C " operator/(" #C " a, " #C " b) {\n"                                                 \
  "  if (fabs" #F "(b.re) >= fabs" #F "(b.im)) {\n"                                                \
  "    " #R " r = b.im / b.re, d = b.re + b.im * r;\n"                                             \
  "    return " #C "((a.re + a.im * r) / d, (a.im - a.re * r) / d);\n  }\n"                        \
  "  " #R " r = b.re / b.im, d = b.im + b.re * r;\n"                                               \
  "  return " #C "((a.re * r + a.im) / d, (a.im * r - a.re) / d);\n}\n"                            \
  "JX_FN bool operator==(" #C " a, " #C " b) { return a.re == b.re && a.im == b.im; }\n"           \
  "JX_FN bool operator!=(" #C " a, " #C " b) { return !(a == b); }\n"                              \
  "JX_FN " #R " creal" #F "(" #C " z) { return z.re; }\n"                                          \
  "JX_FN " #R " cimag" #F "(" #C " z) { return z.im; }\n"                                          \
  "JX_FN " #C " conj" #F "(" #C " z) { return " #C "(z.re, -z.im); }\n"                            \
  "JX_FN " #R " cabs" #F "(" #C " z) { return hypot" #F "(z.re, z.im); }\n"                        \
  "JX_FN " #C " cexp" #F "(" #C " z) {\n"                                                          \
  "  " #R " e = exp" #F "(z.re);\n"                                                                \
  "  return " #C "(e * cos" #F "(z.im), e * sin" #F "(z.im));\n}\n"                                \
  "JX_FN " #C " clog" #F "(" #C " z) {\n"                                                          \
  "  return " #C "(log" #F "(hypot" #F "(z.re, z.im)), atan2" #F "(z.im, z.re));\n}\n"             \
  "JX_FN " #C " csqrt" #F "(" #C " z) {\n"                                                         \
  "  if (z.re == 0 && z.im == 0) return " #C "(0, z.im);\n"                                        \
  "  " #R " t = sqrt" #F "((fabs" #F "(z.re) + hypot" #F "(z.re, z.im)) / 2);\n"                   \
  "  if (z.re >= 0) return " #C "(t, z.im / (2 * t));\n"                                           \
  "  return " #C "(fabs" #F "(z.im) / (2 * t), copysign" #F "(t, z.im));\n}\n"                     \
  "JX_FN " #C " csin" #F "(" #C " z) {\n"                                                          \
  "  return " #C "(sin" #F "(z.re) * cosh" #F "(z.im), cos" #F "(z.re) * sinh" #F "(z.im));\n}\n"  \
  "JX_FN " #C " ccos" #F "(" #C " z) {\n"                                                          \
  "  return " #C "(cos" #F "(z.re) * cosh" #F "(z.im), -(sin" #F "(z.re) * sinh" #F                \
  "(z.im)));\n}\n" /* Kahan's tanh, which cannot overflow; beyond BIG tanh(x) is +-1 */            \
  "JX_FN " #C " ctanh" #F "(" #C " z) {\n"                                                         \
  "  if (fabs" #F "(z.re) > " #BIG ")\n"                                                           \
  "    return " #C "(copysign" #F "((" #R ")1, z.re), 4 * sin" #F "(z.im) * cos" #F                \
  "(z.im) * exp" #F "(-2 * fabs" #F "(z.re)));\n"                                                  \
  "  " #R " t = tan" #F "(z.im), b = 1 + t * t, s = sinh" #F "(z.re), r = sqrt" #F                 \
  "(1 + s * s);\n"                                                                                 \
  "  " #R " d = 1 + b * s * s;\n"                                                                  \
  "  return " #C "(b * r * s / d, t / d);\n}\n"                                                    \
  "JX_FN " #C " cpow" #F "(" #C " z, " #C " w) { return cexp" #F "(w * clog" #F "(z)); }\n"        \
  "JX_FN " #C " csinh" #F "(" #C " z) {\n"                                                         \
  "  return " #C "(sinh" #F "(z.re) * cos" #F "(z.im), cosh" #F "(z.re) * sin" #F "(z.im));\n}\n"  \
  "JX_FN " #C " ccosh" #F "(" #C " z) {\n"                                                         \
  "  return " #C "(cosh" #F "(z.re) * cos" #F "(z.im), sinh" #F "(z.re) * sin" #F                  \
  "(z.im));\n}\n" /* tan z = -i tanh(i z) */                                                       \
  "JX_FN " #C " ctan" #F "(" #C " z) {\n"                                                          \
  "  " #C " t = ctanh" #F "(" #C "(-z.im, z.re));\n"                                               \
  "  return " #C "(t.im, -t.re);\n}\n"

/* The inverse functions by Kahan's formulas ("Branch cuts for complex
 * elementary functions", 1987), which keep the principal branches and C99's
 * signed zeros on the cuts without forming z^2: with s = sqrt(1 - z) and
 * t = sqrt(1 + z), asin z = atan2(Re z, Re(s t)) + i asinh(Im(conj(s) t)),
 * acos z = 2 atan2(Re s, Re t) + i asinh(Im(conj(t) s)); with
 * s = sqrt(z - 1), t = sqrt(z + 1), acosh z = asinh(Re(conj(s) t))
 * + 2i atan2(Im s, Re t); atanh z = (log1p(z) - log1p(-z)) / 2; asinh and
 * atan through asinh z = -i asin(i z), atan z = -i atanh(i z). After
 * complex_special.h's jx_clog1p. */
#define JX_CUDA_COMPLEX_INVERSE(C, R, F)                                                           \
  "JX_FN " #C " casin" #F "(" #C " z) {\n"                                                         \
  "  " #C " s = csqrt" #F "(" #C "(1 - z.re, -z.im)), t = csqrt" #F "(" #C "(1 + z.re, z.im));\n"  \
  "  return " #C "(atan2" #F "(z.re, s.re * t.re - s.im * t.im), asinh" #F                         \
  "(s.re * t.im - s.im * t.re));\n}\n"                                                             \
  "JX_FN " #C " cacos" #F "(" #C " z) {\n"                                                         \
  "  " #C " s = csqrt" #F "(" #C "(1 - z.re, -z.im)), t = csqrt" #F "(" #C "(1 + z.re, z.im));\n"  \
  "  return " #C "(2 * atan2" #F "(s.re, t.re), asinh" #F "(t.re * s.im - t.im * s.re));\n}\n"     \
  "JX_FN " #C " cacosh" #F "(" #C " z) {\n"                                                        \
  "  " #C " s = csqrt" #F "(" #C "(z.re - 1, z.im)), t = csqrt" #F "(" #C "(z.re + 1, z.im));\n"   \
  "  return " #C "(asinh" #F "(s.re * t.re + s.im * t.im), 2 * atan2" #F "(s.im, t.re));\n}\n"     \
  "JX_FN " #C " catanh" #F "(" #C " z) {\n"                                                        \
  "  " #C " p = jx_clog1p" #F "(z), m = jx_clog1p" #F "(-z);\n"                                    \
  "  return " #C "((p.re - m.re) / 2, (p.im - m.im) / 2);\n}\n"                                    \
  "JX_FN " #C " casinh" #F "(" #C " z) {\n"                                                        \
  "  " #C " w = casin" #F "(" #C "(-z.im, z.re));\n"                                               \
  "  return " #C "(w.im, -w.re);\n}\n"                                                             \
  "JX_FN " #C " catan" #F "(" #C " z) {\n"                                                         \
  "  " #C " w = catanh" #F "(" #C "(-z.im, z.re));\n"                                              \
  "  return " #C "(w.im, -w.re);\n}\n"

/* Integer arithmetic with the reference kernels' semantics (binary.c,
 * convert.c), which C++'s operators leave undefined or differ from:
 * +, -, * and negation wrap (computed in an unsigned type at least as wide:
 * a narrow product would overflow int), x / 0 = -1 (all ones), x % 0 = x,
 * INT_MIN / -1 = INT_MIN, shifts by the width or more give 0 (the sign for
 * an arithmetic right shift, which treats unsigned bits as signed), and a
 * float converts truncated toward zero, saturated at the type's range, NaN
 * to 0. jx_int_t<T>: u, the unsigned type T's arithmetic wraps in; w, the
 * unsigned type of T's width; s, the signed one. */
#define JX_CUDA_INT_T(T, U, W, S)                                                                  \
  "template <> struct jx_int_t<" #T "> { typedef " #U " u; typedef " #W " w; typedef " #S " s; "   \
  "};\n"
#define JX_CUDA_INTEGERS                                                                           \
  "template <class T> struct jx_int_t;\n" JX_CUDA_INT_T(                                           \
      int8_t, unsigned, uint8_t, int8_t) JX_CUDA_INT_T(uint8_t, unsigned, uint8_t, int8_t)         \
      JX_CUDA_INT_T(int16_t, unsigned, uint16_t, int16_t) JX_CUDA_INT_T(                           \
          uint16_t, unsigned, uint16_t,                                                            \
          int16_t) JX_CUDA_INT_T(int32_t, unsigned, uint32_t,                                      \
                                 int32_t) JX_CUDA_INT_T(uint32_t, unsigned, uint32_t, int32_t)     \
          JX_CUDA_INT_T(int64_t, uint64_t, uint64_t, int64_t) JX_CUDA_INT_T(                       \
              uint64_t, uint64_t, uint64_t,                                                        \
              int64_t) "#define JX_IU typename jx_int_t<T>::u\n"                                   \
                       "#define JX_IW typename jx_int_t<T>::w\n"                                   \
                       "#define JX_IS typename jx_int_t<T>::s\n"                                   \
                       "#define JX_IBITS ((unsigned)(8 * sizeof(T)))\n"                            \
                       "template <class T> JX_FN T jx_iadd(T a, T b) { return (T)((JX_IU)a + "     \
                       "(JX_IU)b); }\n"                                                            \
                       "template <class T> JX_FN T jx_isub(T a, T b) { return (T)((JX_IU)a - "     \
                       "(JX_IU)b); }\n"                                                            \
                       "template <class T> JX_FN T jx_imul(T a, T b) { return (T)((JX_IU)a * "     \
                       "(JX_IU)b); }\n"                                                            \
                       "template <class T> JX_FN T jx_ineg(T a) { return (T)((JX_IU)0 - "          \
                       "(JX_IU)a); }\n"                                                            \
                       "template <class T> JX_FN T jx_isign(T a) { return (T)((a > 0) - ((T)-1 < " \
                       "(T)0 && a < 0)); }\n"                                                      \
                       "template <class T> JX_FN T jx_idiv(T a, T b) {\n"                          \
                       "  if (b == 0) return (T)(JX_IW)~(JX_IW)0;\n"                               \
                       "  if ((T)-1 < (T)0 && b == (T)-1) return jx_ineg(a);\n"                    \
                       "  return (T)(a / b);\n}\n"                                                 \
                       "template <class T> JX_FN T jx_irem(T a, T b) {\n"                          \
                       "  if (b == 0) return a;\n"                                                 \
                       "  if ((T)-1 < (T)0 && b == (T)-1) return 0;\n"                             \
                       "  return (T)(a % b);\n}\n"                                                 \
                       "template <class T> JX_FN T jx_ishl(T a, T b) {\n"                          \
                       "  return (JX_IW)b >= JX_IBITS ? (T)0 : (T)((JX_IU)(JX_IW)a << "            \
                       "(JX_IW)b);\n}\n"                                                           \
                       "template <class T> JX_FN T jx_ishr(T a, T b) {\n"                          \
                       "  return (JX_IW)b >= JX_IBITS ? (T)0 : (T)((JX_IW)a >> (JX_IW)b);\n}\n"    \
                       "template <class T> JX_FN T jx_isar(T a, T b) {\n"                          \
                       "  if ((JX_IW)b >= JX_IBITS) return (T)((JX_IS)a < 0 ? (JX_IS)-1 : "        \
                       "(JX_IS)0);\n"                                                              \
                       "  return (T)(JX_IS)((JX_IS)a >> (JX_IW)b);\n}\n"                           \
                       "template <class T> JX_FN T jx_f2i(double x) {\n"                           \
                       "  const int sgn = (T)-1 < (T)0;\n"                                         \
                       "  const double top = (double)((JX_IW)1 << (JX_IBITS - 1));\n"              \
                       "  if (x != x) return 0;\n"                                                 \
                       "  if (x <= (sgn ? -top : 0.0)) return sgn ? (T)((JX_IW)1 << (JX_IBITS - "  \
                       "1)) : (T)0;\n"                                                             \
                       "  if (x >= (sgn ? top : 2.0 * top))\n"                                     \
                       "    return sgn ? (T)(((JX_IW)1 << (JX_IBITS - 1)) - 1) : (T)~(JX_IW)0;\n"  \
                       "  return (T)x;\n}\n"

static const char cuda_complex_prelude[] =
    "#define JX_CM __device__ __forceinline__\n"
    "struct jx_c64 {\n"
    "  float re, im;\n"
    "  JX_CM jx_c64() : re(0), im(0) {}\n"
    "  JX_CM jx_c64(double r) : re((float)r), im(0) {}\n"
    "  JX_CM jx_c64(float r, float i) : re(r), im(i) {}\n"
    "  JX_CM explicit operator float() const { return re; }\n"
    "  JX_CM explicit operator double() const { return re; }\n"
    "};\n"
    "struct jx_c128 {\n"
    "  double re, im;\n"
    "  JX_CM jx_c128() : re(0), im(0) {}\n"
    "  JX_CM jx_c128(double r) : re(r), im(0) {}\n"
    "  JX_CM jx_c128(double r, double i) : re(r), im(i) {}\n"
    "  JX_CM jx_c128(jx_c64 z) : re(z.re), im(z.im) {}\n"
    "  JX_CM explicit operator jx_c64() const { return jx_c64((float)re, (float)im); }\n"
    "  JX_CM explicit operator float() const { return (float)re; }\n"
    "  JX_CM explicit operator double() const { return re; }\n"
    "};\n"
    "JX_FN jx_c64 jx_cmplxf(float r, float i) { return jx_c64(r, i); }\n"
    "JX_FN jx_c128 jx_cmplx(double r, double i) { return jx_c128(r, i); }\n" JX_CUDA_COMPLEX_FUNCS(
        jx_c64, float, f, 9)
        JX_CUDA_COMPLEX_FUNCS(jx_c128, double, ,
                              22) "JX_IPOW(jx_c64)\n"
                                  "JX_IPOW(jx_c128)\n"
                                  "JX_PW(jx_c64)\n"
                                  "JX_PW(jx_c128)\n" JX_COMPLEX_SPECIAL_TEXT(jx_c64, float, f)
                                      JX_COMPLEX_SPECIAL_TEXT(jx_c128, double, )
                                          JX_CUDA_COMPLEX_INVERSE(jx_c64, float, f)
                                              JX_CUDA_COMPLEX_INVERSE(jx_c128, double, );

/* the end of jx_cuda_kargs: a split reduction's pieces (render_cuda.h) */
#define KARGS_TAIL                                                                                 \
  "  int64_t pieces, part;\n  int64_t piece[" JX_STR(                                              \
      JX_CUDA_MAX_PIECES) " + 1];\n} jx_cuda_kargs;\n"

const jx_dialect jx_dialect_cuda = {
    .name = "CUDA",
    /* NVRTC has no <stdint.h> or <math.h>: its math functions are built in,
     * the types and the two constants fastmath.h uses are spelled here (the
     * bits of glibc's INFINITY and NAN) */
    .header =
        "typedef signed char int8_t;\n"
        "typedef unsigned char uint8_t;\n"
        "typedef short int16_t;\n"
        "typedef unsigned short uint16_t;\n"
        "typedef int int32_t;\n"
        "typedef unsigned int uint32_t;\n"
        "typedef long long int64_t;\n"
        "typedef unsigned long long uint64_t;\n"
        "#define INFINITY __int_as_float(0x7f800000)\n"
        "#define NAN __int_as_float(0x7fc00000)\n"
        "#define JX_FN static __device__ __forceinline__\n"
        "#define JX_FM_FN JX_FN\n"
        "#define JX_FM_TABLE static __device__ const\n" JX_CUDA_INTEGERS "typedef struct {\n"
        "  char *buf[" JX_STR(JX_FUSION_MAX_LOADS) " + " JX_STR(
            JX_FUSION_MAX_STORES) "];\n"
                                  "  int64_t dims[" JX_STR(
                                      JX_MAX_RANK) "];\n"
                                                   "  int64_t strides[" JX_STR(JX_FUSION_MAX_LOADS) " * " JX_STR(
                                                       JX_MAX_RANK) "];\n" KARGS_TAIL,
    .signature = "extern \"C\" __global__ void %s(const jx_cuda_kargs a, int64_t row_begin,\n"
                 "                                int64_t row_end) {\n",
    .buf = "a.buf",
    .dims = "a.dims",
    .strides = "a.strides",
    .row_loop = "for (int64_t row = row_begin + blockIdx.y; row < row_end; row += gridDim.y) {",
    .col_loop = "for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < inner;\n"
                "         j += (int64_t)gridDim.x * blockDim.x) {",
    .restrict_kw = "__restrict__",
    /* a row reduction: the threads of block x 0 share each row (the
     * executor launches row reductions with one block along x) */
    .row_block = "if (blockIdx.x == 0) {",
    .shared_kw = "__shared__",
    .thread_id = "threadIdx.x",
    .threads = "blockDim.x",
    .barrier = "__syncthreads();",
    .complex_prelude = cuda_complex_prelude,
    /* a column reduction: tiles of 32 columns (neighbouring threads read
     * neighbouring addresses) by blockDim.x / 32 row groups (fewer threads:
     * one row group of blockDim.x columns) */
    .col_tile_loop =
        "const int cols_ = blockDim.x < 32 ? (int)blockDim.x : 32;\n"
        "    const int grp_ = (int)blockDim.x / cols_;\n"
        "    const int tx_ = (int)threadIdx.x % cols_, ty_ = (int)threadIdx.x / cols_;\n"
        "    for (int64_t t0_ = (int64_t)blockIdx.x * cols_; t0_ < inner;\n"
        "         t0_ += (int64_t)gridDim.x * cols_) {\n"
        "      const int64_t c0 = t0_ + tx_, cw = c0 < inner && ty_ < grp_ ? 1 : 0;",
    /* block z of a split reduction reduces piece z (render_cuda.h) */
    .piece_range = "const int64_t rb_ = a.pieces ? a.piece[blockIdx.z] : 0,\n"
                   "                  re_ = a.pieces ? a.piece[blockIdx.z + 1] : %s;",
    .piece_part = "(int64_t)blockIdx.z * a.part",
    .pieces_flag = "a.pieces",
    .literal_dims_from = 1 << 16,
};

char *jx_render_cuda_prelude(void) { return jx_render_prelude(&jx_dialect_cuda); }

char *jx_render_cuda(const jx_program *p, const jx_fusion_group *g, const char *name) {
  return jx_render_kernel(&jx_dialect_cuda, p, g, name);
}
