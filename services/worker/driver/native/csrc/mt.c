/* CPython's Mersenne Twister (Modules/_randommodule.c), so a stream started from a copy of a
 * random.Random's state draws what that object would: random(), getrandbits, randbelow. */
#include "core.h"

#define N 624
#define M 397
#define MATRIX_A 0x9908b0dfU
#define UPPER_MASK 0x80000000U
#define LOWER_MASK 0x7fffffffU

/* The next 624 words at once; out of line, so the per-draw path below stays small. */
static void __attribute__((noinline)) twist(mt_t *s)
{
    uint32_t *mt = s->mt, y;
    int kk;
    /* -(y & 1) & MATRIX_A is CPython's mag01[y & 1] without the table load. */
    for (kk = 0; kk < N - M; kk++) {
        y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
        mt[kk] = mt[kk + M] ^ (y >> 1) ^ (-(y & 0x1U) & MATRIX_A);
    }
    for (; kk < N - 1; kk++) {
        y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
        mt[kk] = mt[kk + (M - N)] ^ (y >> 1) ^ (-(y & 0x1U) & MATRIX_A);
    }
    y = (mt[N - 1] & UPPER_MASK) | (mt[0] & LOWER_MASK);
    mt[N - 1] = mt[M - 1] ^ (y >> 1) ^ (-(y & 0x1U) & MATRIX_A);
    s->index = 0;
}

static inline uint32_t next_word(mt_t *s)
{
    if (__builtin_expect(s->index >= N, 0))
        twist(s);
    uint32_t y = s->mt[s->index++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

uint32_t mt_uint32(mt_t *s) { return next_word(s); }

/* Every key draw takes one or more of these (the special distribution 4 on average, 13 at
 * most), so the two words are drawn inline rather than by two calls. */
double mt_random(mt_t *s)
{
    uint32_t a = next_word(s) >> 5;
    uint32_t b = next_word(s) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

uint64_t mt_getrandbits(mt_t *s, int k)
{
    if (k <= 32)
        return mt_uint32(s) >> (32 - k);
    /* Least significant word first, the last one cut to the bits left (CPython's order). */
    uint64_t lo = mt_uint32(s);
    uint64_t hi = mt_uint32(s) >> (64 - k);
    return lo | (hi << 32);
}

uint64_t mt_randbelow(mt_t *s, uint64_t n)
{
    int k = 64 - __builtin_clzll(n); /* n.bit_length(), as random._randbelow_with_getrandbits */
    uint64_t r = mt_getrandbits(s, k);
    while (r >= n)
        r = mt_getrandbits(s, k);
    return r;
}
