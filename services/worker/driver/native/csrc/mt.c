/* CPython's Mersenne Twister (Modules/_randommodule.c), so a stream started from a copy of a
 * random.Random's state draws what that object would: random(), getrandbits, randbelow. */
#include "core.h"

#define N 624
#define M 397
#define MATRIX_A 0x9908b0dfU
#define UPPER_MASK 0x80000000U
#define LOWER_MASK 0x7fffffffU

uint32_t mt_uint32(mt_t *s)
{
    static const uint32_t mag01[2] = {0x0U, MATRIX_A};
    uint32_t y;
    uint32_t *mt = s->mt;
    if (s->index >= N) {
        int kk;
        for (kk = 0; kk < N - M; kk++) {
            y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
            mt[kk] = mt[kk + M] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        for (; kk < N - 1; kk++) {
            y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
            mt[kk] = mt[kk + (M - N)] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        y = (mt[N - 1] & UPPER_MASK) | (mt[0] & LOWER_MASK);
        mt[N - 1] = mt[M - 1] ^ (y >> 1) ^ mag01[y & 0x1U];
        s->index = 0;
    }
    y = mt[s->index++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

double mt_random(mt_t *s)
{
    uint32_t a = mt_uint32(s) >> 5, b = mt_uint32(s) >> 6;
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
