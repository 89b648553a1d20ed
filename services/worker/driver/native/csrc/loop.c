/* The per-query loop (what native/loop.py, blocking.py and failures.py did in Python): every
 * connection of a load process as a state machine over libmariadb's non-blocking calls, driven
 * by one thread over epoll, or the process's only closed-loop connection with blocking calls.
 *
 * A transaction, and each statement, counts in the window it completes in (window.py): before
 * deadline[0] the warm-up, in [deadline[0], deadline[1]) the measurement, after it nothing, and
 * the transaction is recorded as in flight at the window's end. */
#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#include "core.h"

/* Seconds after the deadline a stuck connection may hold up the end of a run. */
#define DRAIN_GRACE_S 30.0
/* Empty polls before the loop sleeps in epoll_wait (loop.py's SPIN_POLLS, measured there). */
#define SPIN_POLLS 4
#define EVENTS 256
/* sysbench reconnects after these client errors when they are ignored: CR_SERVER_GONE_ERROR,
 * CR_TCP_CONNECTION, CR_SERVER_LOST, CR_SERVER_LOST_EXTENDED (ignore_errors.RECONNECT_ON). */
static const unsigned RECONNECT_ON[] = {2006, 2011, 2013, 2055};

enum { WARMUP, MEASURED, AFTER };

double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double dl(core_t *k, int i) { double v; __atomic_load(&k->deadline[i], &v, __ATOMIC_RELAXED); return v; }

static void set_dl(core_t *k, int i, double v) { __atomic_store(&k->deadline[i], &v, __ATOMIC_RELAXED); }

void core_stop(core_t *k)
{
    double now = mono_now();
    if (dl(k, 0) > now)
        set_dl(k, 0, now);
    if (dl(k, 1) > now)
        set_dl(k, 1, now);
}

static int window_of(core_t *k, double t)
{
    if (dl(k, 0) <= t && t < dl(k, 1))
        return MEASURED;
    return t < dl(k, 0) ? WARMUP : AFTER;
}

/* ---- heaps of (when, seq) */

static int heap_less(const timer_t_ *a, const timer_t_ *b)
{
    return a->when < b->when || (a->when == b->when && a->seq < b->seq);
}

static void heap_push(core_t *k, heap_t *h, double when, int conn, double pause)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 64;
        h->items = realloc(h->items, sizeof(timer_t_) * h->cap);
        if (!h->items)
            abort();
    }
    timer_t_ t = {when, k->seq++, conn, pause};
    int i = h->n++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!heap_less(&t, &h->items[parent]))
            break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i] = t;
}

static timer_t_ heap_pop(heap_t *h)
{
    timer_t_ top = h->items[0], last = h->items[--h->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        const timer_t_ *best = &last;
        if (l < h->n && heap_less(&h->items[l], best)) {
            m = l;
            best = &h->items[l];
        }
        if (r < h->n && heap_less(&h->items[r], best))
            m = r;
        if (m == i)
            break;
        h->items[i] = h->items[m];
        i = m;
    }
    if (h->n)
        h->items[i] = last;
    return top;
}

/* ---- open-loop arrivals (arrivals.py's Schedule): Poisson, shared by the connections, read by
 * the control thread too (queue), hence the lock. */

static void draw_until(schedule_t *s, double t)
{
    while (!s->n || s->pending[(s->head + s->n - 1) % s->cap] <= t) {
        if (s->n > s->limit) {
            s->exceeded = s->n;
            return;
        }
        /* random.expovariate(rate) of Python 3.11: -log(1.0 - random()) / rate */
        s->last += -log(1.0 - mt_random(&s->rng)) / s->rate;
        if (s->n == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 1024;
            double *p = malloc(sizeof(double) * cap);
            if (!p)
                abort();
            for (size_t i = 0; i < s->n; i++)
                p[i] = s->pending[(s->head + i) % s->cap];
            free(s->pending);
            s->pending = p;
            s->head = 0;
            s->cap = cap;
        }
        s->pending[(s->head + s->n++) % s->cap] = s->last;
    }
}

double schedule_take(schedule_t *s, double before, int *got)
{
    pthread_mutex_lock(&s->lock);
    if (!s->n)
        draw_until(s, s->last);
    double t = s->pending[s->head];
    *got = t < before;
    if (*got) {
        s->head = (s->head + 1) % s->cap;
        s->n--;
    }
    pthread_mutex_unlock(&s->lock);
    return t;
}

long schedule_queue(schedule_t *s, double now)
{
    pthread_mutex_lock(&s->lock);
    draw_until(s, now);
    long due = 0;
    for (size_t i = 0; i < s->n && s->pending[(s->head + i) % s->cap] <= now; i++)
        due++;
    pthread_mutex_unlock(&s->lock);
    return due;
}

/* ---- registration */

static void want(core_t *k, conn_t *c, uint32_t mask)
{
    if (c->mask == mask)
        return;
    struct epoll_event ev = {.events = mask, .data.u32 = (uint32_t)c->id};
    if (epoll_ctl(k->ep, c->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) == 0) {
        c->registered = 1;
        c->mask = mask;
    }
}

static void unregister(core_t *k, conn_t *c)
{
    if (c->registered && c->fd >= 0)
        epoll_ctl(k->ep, EPOLL_CTL_DEL, c->fd, NULL);
    c->registered = 0;
    c->mask = 0;
}

/* ---- transactions */

static int begin(core_t *k, conn_t *c, double now, double intended)
{
    if (now >= dl(k, 1) || c->done || (c->left == 0 && dl(k, 0) <= now)) {
        c->done = 1;
        return 0;
    }
    conn_first(c);
    c->t_start = intended >= 0 ? intended : now;
    return 1;
}

static int next_trx(core_t *k, conn_t *c, double now)
{
    if (!k->schedule)
        return begin(k, c, now, -1);
    double end = dl(k, 1);
    if (now >= end || c->done) {
        c->done = 1;
        return 0;
    }
    int got;
    double intended = schedule_take(k->schedule, end, &got);
    if (!got) {
        /* No arrival before the deadline: idle up to it, so the interval ends where the closed
         * loop's would. */
        c->done = 1;
        heap_push(k, &k->timers, end, c->id, 0);
        return 0;
    }
    if (intended > now) {
        heap_push(k, &k->timers, intended, c->id, 0);
        return 0;
    }
    return begin(k, c, now, intended);
}

static sink_t *sink_at(core_t *k, double now)
{
    int where = window_of(k, now);
    return where == MEASURED ? &k->measured : where == WARMUP ? &k->warm : NULL;
}

static void restart(core_t *k, conn_t *c)
{
    /* The same event again (sysbench's RESTART_EVENT): new statements, its start kept, so its
     * latency includes the failed attempt. Queued, not started here, so a statement failing at
     * once again loops in the run loop rather than in ever deeper recursion. */
    heap_push(k, &k->timers, c->t_start, c->id, 0);
}

static void lost(core_t *k, conn_t *c, double now, double pause)
{
    /* Keeps trying until the end of the run, as sysbench's reconnect loop does, so a server
     * restarted during warm-up still leaves a working connection for the measurement. */
    unregister(k, c);
    conn_close(c);
    if (now >= dl(k, 1)) {
        c->done = 1;
        return;
    }
    char err[256];
    unsigned code;
    if (conn_open(c, &k->how, err, sizeof err, &code)) {
        heap_push(k, &k->retry, now + pause, c->id, pause * 2 < 1.0 ? pause * 2 : 1.0);
        return;
    }
    sink_t *s = sink_at(k, mono_now());
    if (s)
        sink_add(s, C_RECONNECTS, 1);
    if (!k->blocking)
        want(k, c, EPOLLIN);
    restart(k, c);
}

static int ignored(core_t *k, unsigned code)
{
    if (k->ignore_all)
        return 1;
    for (int i = 0; i < k->nignore; i++)
        if (k->ignore[i] == code)
            return 1;
    return 0;
}

/* A statement failed: as sysbench's check_error decides, an error of the ignore list restarts
 * the transaction (a lost connection reconnects first); any other ends the run. */
static void failed(core_t *k, conn_t *c)
{
    unsigned code;
    char msg[400];
    conn_error(c, &code, msg, sizeof msg);
    double now = mono_now();
    sink_t *s = sink_at(k, now), after;
    if (!s) {
        memset(&after, 0, sizeof after);
        s = &after;
        if (!c->in_flight_from)
            c->in_flight_from = c->t_start;
    }
    sink_error_code(s, code);
    const char *sql = conn_current_sql(c);
    c->stage = ST_IDLE;
    k->active--;
    if (!ignored(k, code)) {
        sink_add(s, C_ERRORS, 1);
        if (!k->fatal) {
            k->fatal_code = code;
            snprintf(k->fatal_msg, sizeof k->fatal_msg, "%s", msg);
            snprintf(k->fatal_sql, sizeof k->fatal_sql, "%s", sql);
            __atomic_store_n(&k->fatal, 1, __ATOMIC_RELEASE);
        }
        /* sysbench aborts the whole run: no connection starts another transaction. */
        set_dl(k, 0, 0.0);
        set_dl(k, 1, 0.0);
        c->done = 1;
        return;
    }
    for (size_t i = 0; i < sizeof RECONNECT_ON / sizeof *RECONNECT_ON; i++) {
        if (code == RECONNECT_ON[i]) {
            lost(k, c, now, 0.05);
            return;
        }
    }
    sink_add(s, C_IGNORED, 1);
    /* No ROLLBACK, as in sysbench: the server has rolled a deadlocked transaction back, and the
     * restarted transaction's BEGIN ends whatever else was left open. */
    restart(k, c);
}

/* A statement ended at `now`: count it in its window, and its transaction if it was the last;
 * 1 when the transaction goes on, 0 when it ended. */
static int statement_done(core_t *k, conn_t *c, double now, int *where_out)
{
    int kind = conn_current_kind(c);
    if (kind == KIND_WRITE && c->prog->by_rows && !c->rows)
        kind = KIND_OTHER;
    int where;
    if (dl(k, 0) <= now && now < dl(k, 1)) {
        where = MEASURED;
        sink_add(&k->measured, C_READ + kind, 1);
        if (k->by_kind)
            hist_record(&k->kinds[kind], (now - c->ts) * 1e6);
    } else if (now < dl(k, 0)) {
        where = WARMUP;
        sink_add(&k->warm, C_READ + kind, 1);
    } else {
        where = AFTER;
    }
    *where_out = where;
    if (conn_next(c))
        return 1;
    if (where == MEASURED) {
        hist_record(&k->latency, (now - c->t_start) * 1e6);
        sink_add(&k->measured, C_TRX, 1);
        c->completed++;
        if (c->left > 0)
            c->left--;
    } else if (where == WARMUP) {
        sink_add(&k->warm, C_TRX, 1);
    } else if (!c->in_flight_from) {
        c->in_flight_from = c->t_start;
    }
    c->last_end = now;
    return 0;
}

/* Drive c as far as it goes without waiting; `start`: begin with the transaction just begun. */
static void advance(core_t *k, conn_t *c, int status, int start)
{
    int wait = start ? 0 : conn_cont(c, status);
    for (;;) {
        if (wait < 0) {
            failed(k, c);
            return;
        }
        if (wait) {
            uint32_t m = ((wait & ~MYSQL_WAIT_WRITE) ? EPOLLIN : 0) | ((wait & MYSQL_WAIT_WRITE) ? EPOLLOUT : 0);
            if (m)
                want(k, c, m);
            return;
        }
        double now = mono_now();
        if (start) {
            start = 0;
        } else {
            int where;
            if (!statement_done(k, c, now, &where)) {
                if (!next_trx(k, c, now)) {
                    k->active--;
                    return;
                }
            }
        }
        c->ts = now;
        wait = conn_start(c);
    }
}

static void start_trx(core_t *k, conn_t *c, double now, double intended)
{
    int began = (!k->schedule || intended >= 0) ? begin(k, c, now, intended) : next_trx(k, c, now);
    if (!began)
        return;
    k->active++;
    advance(k, c, 0, 1);
}

/* ---- the blocking path: the process's only connection, in closed loop */

static void run_blocking(core_t *k, conn_t *c)
{
    int began = begin(k, c, mono_now(), -1);
    for (;;) {
        while (began) {
            if (k->by_kind)
                c->ts = mono_now();
            if (conn_run_blocking(c)) {
                k->active = 1;
                failed(k, c);
                began = 0;
                break;
            }
            double now = mono_now();
            int where;
            if (statement_done(k, c, now, &where))
                continue;
            began = begin(k, c, now, -1);
        }
        double now = mono_now();
        if (k->timers.n) { /* a transaction restarted after an ignored error */
            timer_t_ t = heap_pop(&k->timers);
            began = !c->done && begin(k, c, now, t.when);
            continue;
        }
        if (k->retry.n) { /* reconnecting after a lost connection */
            timer_t_ t = heap_pop(&k->retry);
            if (t.when > now) {
                double d = t.when - now;
                struct timespec ts = {(time_t)d, (long)((d - (time_t)d) * 1e9)};
                nanosleep(&ts, NULL);
            }
            lost(k, c, mono_now(), t.pause);
            continue;
        }
        break;
    }
}

/* ---- the epoll loop */

void core_run(core_t *k)
{
    double now;
    k->active = 0;
    if (k->nconns == 1 && k->blocking) {
        run_blocking(k, &k->conns[0]);
        goto out;
    }
    k->ep = epoll_create1(EPOLL_CLOEXEC);
    if (k->ep < 0) {
        snprintf(k->failure, sizeof k->failure, "OSError: epoll_create1: %s", strerror(errno));
        set_dl(k, 0, 0.0);
        set_dl(k, 1, 0.0);
        goto out;
    }
    for (int i = 0; i < k->nconns; i++)
        want(k, &k->conns[i], EPOLLIN);
    now = mono_now();
    for (int i = 0; i < k->nconns; i++)
        start_trx(k, &k->conns[i], now, -1);
    struct epoll_event events[EVENTS];
    double stop_seen = 0.0;
    for (;;) {
        now = mono_now();
        double end = dl(k, 1);
        while (k->timers.n && (k->timers.items[0].when <= now || now >= end)) {
            timer_t_ t = heap_pop(&k->timers);
            conn_t *c = &k->conns[t.conn];
            if (now >= end || c->done) {
                c->done = 1;
                double at = end ? (now < end ? now : end) : now;
                if (at > c->last_end)
                    c->last_end = at;
                continue;
            }
            start_trx(k, c, now, t.when);
        }
        while (k->retry.n && k->retry.items[0].when <= now) {
            timer_t_ t = heap_pop(&k->retry);
            lost(k, &k->conns[t.conn], now, t.pause);
        }
        if (k->active <= 0 && !k->timers.n && !k->retry.n)
            break;
        if (!end && !stop_seen)
            stop_seen = now;
        if (now > (end ? end : (stop_seen ? stop_seen : now)) + DRAIN_GRACE_S)
            break; /* a connection stuck past the grace period: the run ends without it */
        int n = epoll_wait(k->ep, events, EVENTS, 0);
        for (int spins = SPIN_POLLS; n == 0 && spins; spins--)
            n = epoll_wait(k->ep, events, EVENTS, 0);
        if (n == 0) {
            double wake = now + 0.05;
            if (k->timers.n && k->timers.items[0].when < wake)
                wake = k->timers.items[0].when;
            if (k->retry.n && k->retry.items[0].when < wake)
                wake = k->retry.items[0].when;
            double timeout = wake - mono_now();
            if (timeout > 0.05)
                timeout = 0.05;
            /* epoll waits whole milliseconds: sleep short of the next arrival, then spin to it,
             * so open-loop starts are not late by up to 1 ms. */
            int ms = timeout > 0.002 ? (int)ceil((timeout - 0.001) * 1000) : 0;
            n = epoll_wait(k->ep, events, EVENTS, ms);
        }
        for (int i = 0; i < n; i++) {
            conn_t *c = &k->conns[events[i].data.u32];
            if (c->stage == ST_IDLE || !c->m)
                continue;
            uint32_t ev = events[i].events;
            int status = (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) ? MYSQL_WAIT_READ : 0;
            if (ev & EPOLLOUT)
                status |= MYSQL_WAIT_WRITE;
            advance(k, c, status, 0);
        }
    }
out:
    if (k->ep >= 0) {
        close(k->ep);
        k->ep = -1;
    }
    now = mono_now();
    for (int i = 0; i < k->nconns; i++)
        if (!k->conns[i].last_end)
            k->conns[i].last_end = now;
}
