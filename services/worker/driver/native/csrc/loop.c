/* The per-query loop (what native/loop.py, blocking.py and failures.py did in Python): every
 * connection of a load process as a state machine over libmariadb's non-blocking calls, driven
 * by event loops over epoll (each a thread with its own slice of the connections), or the
 * process's only closed-loop connection with blocking calls.
 *
 * A transaction, and each statement, counts in the window it completes in (window.py): before
 * deadline[0] the warm-up, in [deadline[0], deadline[1]) the measurement, after it nothing, and
 * the transaction is recorded as in flight at the window's end. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
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

static void heap_push(loop_t *l, heap_t *h, double when, int conn, double pause)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 64;
        h->items = realloc(h->items, sizeof(timer_t_) * h->cap);
        if (!h->items)
            abort();
    }
    timer_t_ t = {when, l->seq++, conn, pause};
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

static void want(loop_t *l, conn_t *c, uint32_t mask)
{
    if (c->mask == mask)
        return;
    struct epoll_event ev = {.events = mask, .data.u32 = (uint32_t)c->id};
    if (epoll_ctl(l->ep, c->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) == 0) {
        c->registered = 1;
        c->mask = mask;
    }
}

static void unregister(loop_t *l, conn_t *c)
{
    if (c->registered && c->fd >= 0)
        epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
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

static int next_trx(loop_t *l, conn_t *c, double now)
{
    core_t *k = l->k;
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
        heap_push(l, &l->timers, end, c->id, 0);
        return 0;
    }
    if (intended > now) {
        heap_push(l, &l->timers, intended, c->id, 0);
        return 0;
    }
    return begin(k, c, now, intended);
}

static sink_t *sink_at(loop_t *l, double now)
{
    int where = window_of(l->k, now);
    return where == MEASURED ? &l->measured : where == WARMUP ? &l->warm : NULL;
}

static void restart(loop_t *l, conn_t *c)
{
    /* The same event again (sysbench's RESTART_EVENT): new statements, its start kept, so its
     * latency includes the failed attempt. Queued, not started here, so a statement failing at
     * once again loops in the run loop rather than in ever deeper recursion. */
    heap_push(l, &l->timers, c->t_start, c->id, 0);
}

static void lost(loop_t *l, conn_t *c, double now, double pause)
{
    core_t *k = l->k;
    /* Keeps trying until the end of the run, as sysbench's reconnect loop does, so a server
     * restarted during warm-up still leaves a working connection for the measurement. */
    unregister(l, c);
    conn_close(c);
    if (now >= dl(k, 1)) {
        c->done = 1;
        return;
    }
    char err[256];
    unsigned code;
    if (conn_open(c, &k->how, err, sizeof err, &code)) {
        heap_push(l, &l->retry, now + pause, c->id, pause * 2 < 1.0 ? pause * 2 : 1.0);
        return;
    }
    sink_t *s = sink_at(l, mono_now());
    if (s)
        sink_add(s, C_RECONNECTS, 1);
    if (!k->blocking)
        want(l, c, EPOLLIN);
    restart(l, c);
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
static void failed(loop_t *l, conn_t *c)
{
    core_t *k = l->k;
    unsigned code;
    char msg[400];
    conn_error(c, &code, msg, sizeof msg);
    double now = mono_now();
    sink_t *s = sink_at(l, now), after;
    if (!s) {
        memset(&after, 0, sizeof after);
        s = &after;
        if (!c->in_flight_from)
            c->in_flight_from = c->t_start;
    }
    sink_error_code(s, code);
    const char *sql = conn_current_sql(c);
    c->stage = ST_IDLE;
    l->active--;
    if (!ignored(k, code)) {
        sink_add(s, C_ERRORS, 1);
        pthread_mutex_lock(&k->rare);
        if (!k->fatal) {
            k->fatal_code = code;
            snprintf(k->fatal_msg, sizeof k->fatal_msg, "%s", msg);
            snprintf(k->fatal_sql, sizeof k->fatal_sql, "%s", sql);
            __atomic_store_n(&k->fatal, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&k->rare);
        /* sysbench aborts the whole run: no connection starts another transaction. */
        set_dl(k, 0, 0.0);
        set_dl(k, 1, 0.0);
        c->done = 1;
        return;
    }
    for (size_t i = 0; i < sizeof RECONNECT_ON / sizeof *RECONNECT_ON; i++) {
        if (code == RECONNECT_ON[i]) {
            lost(l, c, now, 0.05);
            return;
        }
    }
    sink_add(s, C_IGNORED, 1);
    /* No ROLLBACK, as in sysbench: the server has rolled a deadlocked transaction back, and the
     * restarted transaction's BEGIN ends whatever else was left open. */
    restart(l, c);
}

/* A statement ended at `now`: count it in its window, and its transaction if it was the last;
 * 1 when the transaction goes on, 0 when it ended. */
static int statement_done(loop_t *l, conn_t *c, double now, int *where_out)
{
    core_t *k = l->k;
    int kind = conn_current_kind(c);
    if (kind == KIND_WRITE && c->prog->by_rows && !c->rows)
        kind = KIND_OTHER;
    int where;
    if (dl(k, 0) <= now && now < dl(k, 1)) {
        where = MEASURED;
        sink_add(&l->measured, C_READ + kind, 1);
        if (l->kinds)
            hist_record(&l->kinds[kind], (now - c->ts) * 1e6);
    } else if (now < dl(k, 0)) {
        where = WARMUP;
        sink_add(&l->warm, C_READ + kind, 1);
    } else {
        where = AFTER;
    }
    *where_out = where;
    if (conn_next(c))
        return 1;
    if (where == MEASURED) {
        hist_record(&l->latency, (now - c->t_start) * 1e6);
        sink_add(&l->measured, C_TRX, 1);
        c->completed++;
        if (c->left > 0)
            c->left--;
    } else if (where == WARMUP) {
        sink_add(&l->warm, C_TRX, 1);
    } else if (!c->in_flight_from) {
        c->in_flight_from = c->t_start;
    }
    c->last_end = now;
    return 0;
}

/* Drive c as far as it goes without waiting; `start`: begin with the transaction just begun. */
static void advance(loop_t *l, conn_t *c, int status, int start)
{
    int wait = start ? 0 : conn_cont(c, status);
    for (;;) {
        if (wait < 0) {
            failed(l, c);
            return;
        }
        if (wait) {
            uint32_t m = ((wait & ~MYSQL_WAIT_WRITE) ? EPOLLIN : 0) | ((wait & MYSQL_WAIT_WRITE) ? EPOLLOUT : 0);
            if (m)
                want(l, c, m);
            return;
        }
        double now = mono_now();
        if (start) {
            start = 0;
        } else {
            int where;
            if (!statement_done(l, c, now, &where)) {
                if (!next_trx(l, c, now)) {
                    l->active--;
                    return;
                }
            }
        }
        c->ts = now;
        wait = conn_start(c);
    }
}

static void start_trx(loop_t *l, conn_t *c, double now, double intended)
{
    core_t *k = l->k;
    int began = (!k->schedule || intended >= 0) ? begin(k, c, now, intended) : next_trx(l, c, now);
    if (!began)
        return;
    l->active++;
    advance(l, c, 0, 1);
}

/* ---- the blocking path: the process's only connection, in closed loop */

static void run_blocking(loop_t *l, conn_t *c)
{
    core_t *k = l->k;
    int began = begin(k, c, mono_now(), -1);
    for (;;) {
        while (began) {
            if (l->kinds)
                c->ts = mono_now();
            if (conn_run_blocking(c)) {
                l->active = 1;
                failed(l, c);
                began = 0;
                break;
            }
            double now = mono_now();
            int where;
            if (statement_done(l, c, now, &where))
                continue;
            began = begin(k, c, now, -1);
        }
        double now = mono_now();
        if (l->timers.n) { /* a transaction restarted after an ignored error */
            timer_t_ t = heap_pop(&l->timers);
            began = !c->done && begin(k, c, now, t.when);
            continue;
        }
        if (l->retry.n) { /* reconnecting after a lost connection */
            timer_t_ t = heap_pop(&l->retry);
            if (t.when > now) {
                double d = t.when - now;
                struct timespec ts = {(time_t)d, (long)((d - (time_t)d) * 1e9)};
                nanosleep(&ts, NULL);
            }
            lost(l, c, mono_now(), t.pause);
            continue;
        }
        break;
    }
}

/* ---- the epoll loops */

static void run_loop(loop_t *l)
{
    core_t *k = l->k;
    conn_t *conns = k->conns + l->first;
    double now;
    l->active = 0;
    if (k->nconns == 1 && k->blocking) {
        run_blocking(l, &conns[0]);
        goto out;
    }
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    if (l->ep < 0) {
        pthread_mutex_lock(&k->rare);
        if (!k->failure[0])
            snprintf(k->failure, sizeof k->failure, "OSError: epoll_create1: %s", strerror(errno));
        pthread_mutex_unlock(&k->rare);
        set_dl(k, 0, 0.0);
        set_dl(k, 1, 0.0);
        goto out;
    }
    for (int i = 0; i < l->n; i++)
        want(l, &conns[i], EPOLLIN);
    now = mono_now();
    for (int i = 0; i < l->n; i++)
        start_trx(l, &conns[i], now, -1);
    struct epoll_event events[EVENTS];
    double stop_seen = 0.0;
    for (;;) {
        now = mono_now();
        double end = dl(k, 1);
        while (l->timers.n && (l->timers.items[0].when <= now || now >= end)) {
            timer_t_ t = heap_pop(&l->timers);
            conn_t *c = &k->conns[t.conn];
            if (now >= end || c->done) {
                c->done = 1;
                double at = end ? (now < end ? now : end) : now;
                if (at > c->last_end)
                    c->last_end = at;
                continue;
            }
            start_trx(l, c, now, t.when);
        }
        while (l->retry.n && l->retry.items[0].when <= now) {
            timer_t_ t = heap_pop(&l->retry);
            lost(l, &k->conns[t.conn], now, t.pause);
        }
        if (l->active <= 0 && !l->timers.n && !l->retry.n)
            break;
        if (!end && !stop_seen)
            stop_seen = now;
        if (now > (end ? end : (stop_seen ? stop_seen : now)) + DRAIN_GRACE_S)
            break; /* a connection stuck past the grace period: the run ends without it */
        int n = epoll_wait(l->ep, events, EVENTS, 0);
        for (int spins = l->spins; n == 0 && spins; spins--)
            n = epoll_wait(l->ep, events, EVENTS, 0);
        if (n == 0) {
            double wake = now + 0.05;
            if (l->timers.n && l->timers.items[0].when < wake)
                wake = l->timers.items[0].when;
            if (l->retry.n && l->retry.items[0].when < wake)
                wake = l->retry.items[0].when;
            double timeout = wake - mono_now();
            if (timeout > 0.05)
                timeout = 0.05;
            /* epoll waits whole milliseconds: sleep short of the next arrival, then spin to it,
             * so open-loop starts are not late by up to 1 ms. */
            int ms = timeout > 0.002 ? (int)ceil((timeout - 0.001) * 1000) : 0;
            n = epoll_wait(l->ep, events, EVENTS, ms);
        }
        for (int i = 0; i < n; i++) {
            conn_t *c = &k->conns[events[i].data.u32];
            if (c->stage == ST_IDLE || !c->m)
                continue;
            uint32_t ev = events[i].events;
            int status = (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) ? MYSQL_WAIT_READ : 0;
            if (ev & EPOLLOUT)
                status |= MYSQL_WAIT_WRITE;
            advance(l, c, status, 0);
        }
    }
out:
    if (l->ep >= 0) {
        close(l->ep);
        l->ep = -1;
    }
    now = mono_now();
    for (int i = 0; i < l->n; i++)
        if (!conns[i].last_end)
            conns[i].last_end = now;
}

static void *loop_thread(void *arg)
{
    run_loop(arg);
    return NULL;
}

int core_loops(core_t *k, int nloops)
{
    if (nloops < 1)
        nloops = 1;
    if (nloops > k->nconns)
        nloops = k->nconns;
    k->loops = calloc(nloops, sizeof *k->loops);
    if (!k->loops)
        return -1;
    k->nloops = nloops;
    /* A loop spins (polls without sleeping) for a reply only while it has a CPU of its own: where
     * loops share one, a loop that sleeps at once lets another with replies waiting run. */
    cpu_set_t cpus;
    int ncpus = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    for (int i = 0, first = 0; i < nloops; i++) {
        loop_t *l = &k->loops[i];
        l->k = k;
        l->ep = -1;
        l->first = first;
        l->spins = nloops > ncpus ? 0 : SPIN_POLLS;
        /* the first nconns % nloops loops take one connection more */
        l->n = k->nconns / nloops + (i < k->nconns % nloops);
        first += l->n;
        if (k->by_kind && !(l->kinds = calloc(KINDS, sizeof *l->kinds)))
            return -1;
    }
    return 0;
}

void core_loops_free(core_t *k)
{
    for (int i = 0; k->loops && i < k->nloops; i++) {
        free(k->loops[i].kinds);
        free(k->loops[i].timers.items);
        free(k->loops[i].retry.items);
    }
    free(k->loops);
    k->loops = NULL;
    k->nloops = 0;
}

/* Every loop to its end: the first on the calling thread, the others on threads of their own
 * (a loop whose thread cannot start runs after the first, late but counted). */
void core_run(core_t *k)
{
    pthread_t *threads = k->nloops > 1 ? calloc(k->nloops, sizeof *threads) : NULL;
    char *started = k->nloops > 1 ? calloc(k->nloops, 1) : NULL;
    for (int i = 1; threads && started && i < k->nloops; i++)
        started[i] = pthread_create(&threads[i], NULL, loop_thread, &k->loops[i]) == 0;
    run_loop(&k->loops[0]);
    for (int i = 1; i < k->nloops; i++) {
        if (started && started[i])
            pthread_join(threads[i], NULL);
        else
            run_loop(&k->loops[i]);
    }
    free(threads);
    free(started);
}
