/* A connection's random stream: sysbench 1.0.20's xoroshiro128+ (src/xoroshiro128plus.h) and
 * its sb_rand_uniform_double, or CPython's MT (mt.c) when the state came from random.Random. */
#include "core.h"

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoroshiro_next(uint64_t s[2])
{
    uint64_t s0 = s[0], s1 = s[1];
    uint64_t result = s0 + s1;
    s1 ^= s0;
    s[0] = rotl(s0, 55) ^ s1 ^ (s1 << 14);
    s[1] = rotl(s1, 36);
    return result;
}

double rng_random(rng_t *r)
{
    if (!r->xoroshiro)
        return mt_random(r->mt);
    /* The top 52 bits as a fraction of 1: sysbench builds the double 1.x from them and takes
     * 1 away, which is exactly this product. */
    return (double)(xoroshiro_next(r->s) >> 12) * (1.0 / 4503599627370496.0);
}
