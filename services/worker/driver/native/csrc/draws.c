/* sysbench's key distributions (src/sb_rand.c), written as services/workload/distributions.py
 * computes them, operation for operation and in sb_rand.c's order of float operations (a sum
 * grouped otherwise rounds differently now and then), so all three give the same key from the
 * same stream. */
#include <math.h>
#include "core.h"

static double helper1(double x)
{
    return fabs(x) > 1e-8 ? log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x));
}

static double helper2(double x)
{
    return fabs(x) > 1e-8 ? expm1(x) / x : 1 + x * 0.5 * (1 + x / 3 * (1 + 0.25 * x));
}

static double h_integral(double x, double e)
{
    double log_x = log(x);
    return helper2((1 - e) * log_x) * log_x;
}

static double h(double x, double e) { return exp(-e * log(x)); }

static double h_integral_inverse(double x, double e)
{
    double t = x * (1 - e);
    if (t < -1.0)
        t = -1.0;
    return exp(helper1(t) * x);
}

void dist_init(dist_t *d, int kind, int iters, int pct, int res, double pareto_h, double zipf_exp)
{
    d->kind = kind;
    d->iters = iters;
    d->pct = pct;
    d->res = res;
    d->pareto_power = log(pareto_h) / log(1.0 - pareto_h);
    d->zipf_exp = zipf_exp;
    d->zipf_s = 2 - h_integral_inverse(h_integral(2.5, zipf_exp) - h(2, zipf_exp), zipf_exp);
    d->zipf_hx1 = h_integral(1.5, zipf_exp) - 1;
}

int64_t dist_draw(const dist_t *d, rng_t *s, int64_t a, int64_t b)
{
    switch (d->kind) {
    case DIST_UNIFORM:
        /* sb_rand_uniform: a + u * (b - a + 1), truncated as a whole. */
        return (int64_t)((double)a + rng_random(s) * (double)(b - a + 1));
    case DIST_GAUSSIAN: {
        double t = (double)(b - a + 1), sum = 0.0;
        for (int i = 0; i < d->iters; i++)
            sum += rng_random(s) * t;
        return a + (int64_t)(sum * (1.0 / d->iters));
    }
    case DIST_SPECIAL: {
        double t = (double)(b - a);
        double rnd = rng_random(s);
        /* res = 100 sends every draw to the hot rows (sysbench's 100 / 0.0 is infinite). */
        if (d->res < 100 && rnd * (t * (100.0 / (100.0 - d->res))) < t) {
            double sum = 0.0;
            for (int i = 0; i < d->iters; i++)
                sum += rng_random(s);
            return (int64_t)((double)a + sum * t * (1.0 / d->iters));
        }
        double dd = t * (d->pct / 100.0);
        double res = rnd * (dd + 1);
        res += t / 2 - t * (d->pct / 200.0);
        return a + (int64_t)res;
    }
    case DIST_PARETO:
        return a + (int64_t)((double)(b - a + 1) * pow(rng_random(s), d->pareto_power));
    default: {
        double e = d->zipf_exp;
        int64_t n = b - a + 1;
        double h_n = h_integral((double)n + 0.5, e);
        for (;;) {
            double u = h_n + rng_random(s) * (d->zipf_hx1 - h_n);
            double x = h_integral_inverse(u, e);
            int64_t k = (int64_t)(x + 0.5);
            if (k < 1)
                k = 1;
            if (k > n)
                k = n;
            if ((double)k - x <= d->zipf_s || u >= h_integral((double)k + 0.5, e) - h((double)k, e))
                return a + k - 1;
        }
    }
    }
}
