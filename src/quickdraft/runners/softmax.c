/* Softmax over the rows of a bf16 matrix, float32 inside, for the bf16 attention on CPUs with AVX512_BF16
 * (runners/native.py builds and loads it; runners/attention.py calls it).
 *
 *   y[r, c] = exp(x[r, c] - max_c x[r, c]) / sum_c exp(x[r, c] - max_c x[r, c])   rounded to bf16 once
 *
 * exp is a degree-6 polynomial of 2^f on f in [-1/2, 1/2] scaled by 2^n (relative error about 1e-7, float32's own
 * order; bf16's rounding is 4e-3). Each row is computed by one thread from its own values and its length
 * alone, in the same order whatever the number of rows: a row gets the same bits in a pass of any size.
 * Arguments below -200 / log2(e) (masked keys, -inf padding) give exactly 0. */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>

static inline __m512 exp_nonpositive(__m512 t) {
    __m512 z = _mm512_max_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504088896341f)), _mm512_set1_ps(-200.f));
    __m512 n = _mm512_roundscale_ps(z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(z, n);  /* 2^z = 2^n 2^f */
    __m512 p = _mm512_set1_ps(1.5403530393381609e-4f);  /* ln(2)^k / k!, k = 6 .. 0 */
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076284772e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108664821580e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650695910071e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718055994531e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

static inline __mmask16 lanes(int64_t left) { return left >= 16 ? 0xFFFF : (__mmask16)((1u << left) - 1); }

static inline __m512 load_bf16(const uint16_t *x, __mmask16 m) {  /* bf16 -> float32: the high 16 bits */
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x)), 16));
}

/* x, y: [rows, cols] bf16, rows `ld` elements apart (y may be x). Returns 0, or 1 where scratch could not be had. */
int qd_softmax_bf16(const uint16_t *x, uint16_t *y, int64_t rows, int64_t cols, int64_t ld) {
    int failed = 0;
#pragma omp parallel reduction(| : failed)
    {
        float *e = aligned_alloc(64, (size_t)((cols + 15) / 16) * 64);  /* one row's exp, float32 */
        failed = e == NULL;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (e == NULL) continue;
            const uint16_t *xr = x + r * ld;
            uint16_t *yr = y + r * ld;
            __m512 top = _mm512_set1_ps(-__builtin_inff());
            for (int64_t c = 0; c < cols; c += 16)
                top = _mm512_mask_max_ps(top, lanes(cols - c), top, load_bf16(xr + c, lanes(cols - c)));
            __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(top)), sum = _mm512_setzero_ps();
            for (int64_t c = 0; c < cols; c += 16) {
                __m512 v = _mm512_maskz_mov_ps(lanes(cols - c), exp_nonpositive(_mm512_sub_ps(load_bf16(xr + c, lanes(cols - c)), max)));
                _mm512_store_ps(e + c, v);
                sum = _mm512_add_ps(sum, v);
            }
            __m512 inverse = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
            for (int64_t c = 0; c < cols; c += 16)
                _mm256_mask_storeu_epi16(yr + c, lanes(cols - c),
                                         (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_load_ps(e + c), inverse)));
        }
        free(e);
    }
    return failed;
}
