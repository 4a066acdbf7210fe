/* A record body's CRC-32, as zlib's crc32 computes it.
 *
 * On x86-64 CPUs with PCLMULQDQ the bulk of a body (a multiple of 16 bytes, at least
 * 64) is folded with carry-less multiplies, four 128-bit lanes at a time, then
 * reduced to 32 bits (Barrett); the tail and short bodies go to zlib. The folding
 * constants are x^k mod P(x) for CRC-32's reflected polynomial 0xEDB88320, as in
 * Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ". zlib's
 * crc32 does 3 GB/s on the machines this runs on; the fold does several times that,
 * and a 1 KiB body is hashed on every put.
 *
 * Elsewhere (other CPUs, other compilers) zlib does all of it. The kernel tests hold
 * the result equal to zlib.crc32 for every length and alignment around the edges.
 */
#ifndef AIOROCKETMQ_CRC32_H
#define AIOROCKETMQ_CRC32_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define AIOROCKETMQ_CRC32_FOLD 1

#define AIOROCKETMQ_FOLD_TARGET __attribute__((target("pclmul,sse4.1")))

AIOROCKETMQ_FOLD_TARGET static inline __m128i aiorocketmq_fold(__m128i a, __m128i b, __m128i k) {
    return _mm_xor_si128(_mm_xor_si128(b, _mm_clmulepi64_si128(a, k, 0x00)),
                         _mm_clmulepi64_si128(a, k, 0x11));
}

/* ``crc`` in zlib's inner form (inverted); ``n`` >= 64 and a multiple of 16. */
AIOROCKETMQ_FOLD_TARGET static uint32_t aiorocketmq_crc32_fold(
    uint32_t crc, const uint8_t *p, size_t n)
{
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);
    const __m128i mu_p = _mm_set_epi64x(0x1f7011641LL, 0x1db710641LL);
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    __m128i x0 = _mm_loadu_si128((const __m128i *)p);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    __m128i x, t;
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)crc));
    for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
        x0 = aiorocketmq_fold(x0, _mm_loadu_si128((const __m128i *)p), k1k2);
        x1 = aiorocketmq_fold(x1, _mm_loadu_si128((const __m128i *)(p + 16)), k1k2);
        x2 = aiorocketmq_fold(x2, _mm_loadu_si128((const __m128i *)(p + 32)), k1k2);
        x3 = aiorocketmq_fold(x3, _mm_loadu_si128((const __m128i *)(p + 48)), k1k2);
    }
    x = aiorocketmq_fold(x0, x1, k3k4);
    x = aiorocketmq_fold(x, x2, k3k4);
    x = aiorocketmq_fold(x, x3, k3k4);
    for (; n >= 16; p += 16, n -= 16)
        x = aiorocketmq_fold(x, _mm_loadu_si128((const __m128i *)p), k3k4);
    /* 128 -> 64 bits, then 64 -> 32 bits of remainder, then Barrett's reduction. */
    x = _mm_xor_si128(_mm_clmulepi64_si128(x, k3k4, 0x10), _mm_srli_si128(x, 8));
    t = _mm_srli_si128(x, 4);
    x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, low32), k5, 0x00), t);
    t = _mm_clmulepi64_si128(_mm_and_si128(x, low32), mu_p, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), mu_p, 0x00);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x, t), 1);
}

static int aiorocketmq_crc32_can_fold = -1;
#endif

/* zlib's ``crc32(crc, p, n)``. */
static inline uint32_t aiorocketmq_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
#ifdef AIOROCKETMQ_CRC32_FOLD
    if (n >= 64) {
        if (aiorocketmq_crc32_can_fold < 0)
            aiorocketmq_crc32_can_fold =
                __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
        if (aiorocketmq_crc32_can_fold) {
            size_t bulk = n & ~(size_t)15;
            crc = ~aiorocketmq_crc32_fold(~crc, p, bulk);
            p += bulk;
            n -= bulk;
        }
    }
#endif
    return (uint32_t)crc32(crc, p, (uInt)n);
}

#endif
