/* The latency histogram's buckets (services/common/results/histogram.py: bucket i holds
 * [B**(i-1), B**i) with B = 1.01, below 1 us bucket 0) and the counters the control thread
 * reads while the loop adds to them: one writer, relaxed atomic stores and loads. */
#include <math.h>
#include "core.h"

int hist_bucket_of(double value_us)
{
    /* math.log(_BASE) as histogram.py computes it; every thread computes the same value. */
    static double log_base = 0.0;
    if (value_us < 1.0)
        return 0;
    if (log_base == 0.0)
        log_base = log(1.0 + 2.0 * 0.005);
    double i = log(value_us) / log_base;
    if (i >= HIST_BUCKETS - 2)
        return HIST_BUCKETS - 1; /* beyond 1.01**4094 us: never a latency */
    return (int)i + 1;
}

void hist_record(hist_t *h, double value_us)
{
    int i = hist_bucket_of(value_us);
    __atomic_store_n(&h->counts[i], __atomic_load_n(&h->counts[i], __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
    if (value_us > h->max_us)
        __atomic_store(&h->max_us, &value_us, __ATOMIC_RELAXED);
}

void sink_add(sink_t *s, int counter, uint64_t n)
{
    __atomic_store_n(&s->counts[counter], __atomic_load_n(&s->counts[counter], __ATOMIC_RELAXED) + n,
                     __ATOMIC_RELAXED);
}

void sink_error_code(sink_t *s, unsigned code)
{
    int n = __atomic_load_n(&s->ncodes, __ATOMIC_RELAXED);
    for (int i = 0; i < n; i++) {
        if (s->codes[i] == code) {
            __atomic_store_n(&s->code_counts[i], s->code_counts[i] + 1, __ATOMIC_RELAXED);
            return;
        }
    }
    if (n == MAX_CODES) {
        __atomic_store_n(&s->code_overflow, s->code_overflow + 1, __ATOMIC_RELAXED);
        return;
    }
    s->codes[n] = code;
    s->code_counts[n] = 1;
    /* Published after its code and count are written, so a reader never sees a half entry. */
    __atomic_store_n(&s->ncodes, n + 1, __ATOMIC_RELEASE);
}
