/* The load core: one load process's connections driven in C, with the GIL released.
 *
 * Python builds a core from transaction programs (services/workload/program.py, flattened by
 * native/core.py), one random stream per connection (a copy of that connection's
 * random.Random state, so the draws are Python's), and the connection settings; it then runs
 * it as event loops, each on a thread of its own with a slice of the connections, while a
 * control thread reads the loops' counters once a second. */
#ifndef BENCHFLEET_CORE_H
#define BENCHFLEET_CORE_H

#include <stdint.h>
#include <stddef.h>
#include <pthread.h>
#include <mysql.h>

/* ---- random stream (mt.c): CPython's MT19937, so a state copied from random.Random draws
 * the same numbers as Python would. */
typedef struct {
    uint32_t mt[624];
    int index;
} mt_t;

uint32_t mt_uint32(mt_t *s);
double mt_random(mt_t *s);
uint64_t mt_getrandbits(mt_t *s, int k); /* 1 <= k <= 64 */
uint64_t mt_randbelow(mt_t *s, uint64_t n);

/* ---- a connection's stream (rng.c): sysbench 1.0.20's xoroshiro128+ (sb_rand.c), so at one
 * connection the core draws what sysbench draws; or CPython's MT when a test hands it a
 * random.Random state. */
typedef struct {
    int xoroshiro;
    uint64_t s[2];
    /* Only for a random.Random state (2.5 KiB): inline, it made every connection's record that
     * much larger (11 MiB at 4096 connections) for the sysbench streams that never use it. */
    mt_t *mt;
} rng_t;

double rng_random(rng_t *r); /* sb_rand_uniform_double, or random.Random.random */

/* ---- key distributions (draws.c): sysbench's sb_rand.c as services/workload/distributions.py */
enum { DIST_UNIFORM, DIST_GAUSSIAN, DIST_SPECIAL, DIST_PARETO, DIST_ZIPFIAN };
typedef struct {
    int kind;
    int iters, pct, res;
    double pareto_power;
    double zipf_exp, zipf_s, zipf_hx1;
} dist_t;

void dist_init(dist_t *d, int kind, int iters, int pct, int res, double pareto_h, double zipf_exp);
int64_t dist_draw(const dist_t *d, rng_t *s, int64_t a, int64_t b);

/* ---- latency histogram (hist.c): services/common/results/histogram.py's buckets */
#define HIST_BUCKETS 4096
typedef struct {
    uint64_t counts[HIST_BUCKETS];
    double max_us;
} hist_t;

int hist_bucket_of(double value_us);
void hist_record(hist_t *h, double value_us);

/* ---- transaction programs (program.c) */
enum { P_KEY, P_REF, P_DIGITS, P_CONST, P_NULL, P_UNIQUE, P_CYCLE };
typedef struct {
    int type;
    int64_t a, b, c, d; /* KEY lo hi save; REF reg plus; DIGITS groups; CONST value;
                           UNIQUE index offset step plus; CYCLE k step size */
    int slot;           /* UNIQUE, CYCLE: where the connection keeps its position */
} param_t;

enum { KIND_READ, KIND_WRITE, KIND_OTHER, KINDS };

typedef struct {
    int kind;
    int text;         /* sent as plain text, each ? replaced by its value */
    int nparams;
    param_t *params;
    int nsql;         /* one per table of its block, or one */
    char **sql;
    int *stmt_index;  /* per sql: its prepared statement's index on a connection (-1: text) */
    size_t text_max;  /* longest rendering of a text statement */
    int bind_base;    /* its bindings on a connection: binds[bind_base + table] */
} pstmt_t;

typedef struct {
    int tables, repeat, nstmts;
    pstmt_t *stmts;
} pblock_t;

typedef struct {
    int nblocks;
    pblock_t *blocks;
    dist_t dist;
    int by_rows;
    int registers;
    int tail_draws;  /* draws thrown away after each event (sysbench's histogram slot) */
    int nbinds, nslots;
    int nprepared;
    char **prepared; /* distinct SQL of the prepared statements, in first-use order */
} program_t;

void program_free(program_t *p);
#ifdef Py_PYTHON_H
program_t *program_from_py(PyObject *o);
#endif

/* ---- one connection (conn.c) */
enum { ST_IDLE, ST_EXEC, ST_STORE, ST_QUERY, ST_QSTORE };

typedef struct {
    const char *host, *user, *password, *database, *unix_socket, *ssl_ca;
    unsigned port;
    unsigned connect_timeout;
    int compress;        /* the compressed protocol (mysql_compression) */
    int allow_cleartext; /* the operator allows clear-text auth plugins */
} connect_t;

/* The authentication plugins a connection may use unless the operator allows clear text: none
 * sends the password as it is without TLS (mysql_clear_password and PAM's dialog do; a rogue
 * server may ask for either by an auth switch, which libmariadb otherwise accepts). */
#define SAFE_AUTH "mysql_native_password,client_ed25519,caching_sha2_password,sha256_password,parsec"

/* The buffers a prepared statement's parameters are bound to, one set per program statement
 * and table, so a statement shared by two program statements is bound again on a switch. */
typedef struct {
    MYSQL_BIND *binds;
    int64_t *ints;
    char **strs;
    unsigned long *lens;
    int n;
} pbind_t;

typedef struct conn {
    int id;
    MYSQL *m;
    int fd;
    MYSQL_STMT **stmts;       /* program->prepared order */
    void **bound_by;          /* per prepared statement: the pbind_t its parameters are bound to */
    unsigned char *has_result;
    pbind_t *binds;           /* program->nbinds, see pstmt_t.bind_base */
    program_t *prog;
    int64_t *regs;
    int64_t *gen_next;        /* program->nslots: where each UNIQUE/CYCLE stands */
    rng_t rng;
    /* the transaction in flight: block, repetition, statement, the block's table */
    int blk, rep, st, table;
    int stage;
    int ret;
    MYSQL_RES *res;
    MYSQL_STMT *cur;
    char *text;
    size_t text_cap;
    int64_t rows;
    int64_t left;
    int64_t completed;
    double t_start, ts, in_flight_from, last_end;
    int done;
    uint32_t mask;
    int registered;
    int nonblocking;
    int has_stmt;             /* a statement of the transaction has begun */
} conn_t;

/* Buffers for program p (every statement's bindings, registers, generator positions). */
int conn_init(conn_t *c, int id, program_t *p, int nonblocking);
void conn_free(conn_t *c);
/* Draw the current statement's parameters: into its bindings (returned) or, for plain text,
 * rendered into c->text (NULL returned). */
pbind_t *conn_draw(conn_t *c);
int conn_open(conn_t *c, const connect_t *how, char *err, size_t errlen, unsigned *code);
void conn_close(conn_t *c);
/* Start the current statement (parameters drawn now); the wait flags, 0 when finished, -1 on error. */
int conn_start(conn_t *c);
int conn_cont(conn_t *c, int status);
/* The blocking twin: 0 done, -1 error. */
int conn_run_blocking(conn_t *c);
void conn_error(conn_t *c, unsigned *code, char *msg, size_t len);
const char *conn_current_sql(conn_t *c);
int conn_current_kind(conn_t *c);
/* pvio.c: wait for replies with fewer system calls (after connecting); skip the read that
 * cannot find the reply to a statement just sent (before each non-blocking start). */
void pvio_speed_up(MYSQL *m);
void pvio_skip_first_read(MYSQL *m);
/* Enter the program's first block; advance to the next statement (0: the transaction ended). */
void conn_first(conn_t *c);
int conn_next(conn_t *c);

/* ---- counters (sink) the control thread reads */
#define MAX_CODES 64
enum { C_TRX, C_READ, C_WRITE, C_OTHER, C_ERRORS, C_IGNORED, C_RECONNECTS, COUNTERS };
typedef struct {
    uint64_t counts[COUNTERS];
    int ncodes;
    unsigned codes[MAX_CODES];
    uint64_t code_counts[MAX_CODES];
    uint64_t code_overflow;
} sink_t;

void sink_add(sink_t *s, int counter, uint64_t n);
void sink_error_code(sink_t *s, unsigned code);

/* ---- the loop (loop.c) */
typedef struct { double when; uint64_t seq; int conn; double pause; } timer_t_;
typedef struct { timer_t_ *items; int n, cap; } heap_t;

typedef struct {
    pthread_mutex_t lock;
    mt_t rng;
    double rate, last;
    double *pending;
    size_t head, n, cap;
    size_t limit;     /* arrivals it may hold due and not started (arrivals.py's MAX_BACKLOG) */
    size_t exceeded;  /* the backlog that went past limit (nothing more is drawn), or 0 */
} schedule_t;

double schedule_take(schedule_t *s, double before, int *got);
long schedule_queue(schedule_t *s, double now);

struct core;

/* One event loop: a thread driving a contiguous slice of the connections over its own epoll
 * set, with its own timers and counters, so loops never write the same memory (the control
 * thread sums their counters when it reads them). */
typedef struct loop {
    struct core *k;
    int first, n;             /* its connections: k->conns[first .. first + n) */
    int ep;
    heap_t timers, retry;
    uint64_t seq;
    int active;
    int spins;                /* empty polls before it sleeps in epoll_wait */
    sink_t measured, warm;
    hist_t latency;
    hist_t *kinds;            /* KINDS histograms when the run times statements by kind, else NULL */
} loop_t;

typedef struct core {
    int nconns;
    conn_t *conns;
    program_t **programs;     /* per connection (they may share one) */
    connect_t how;
    double deadline[2];       /* measuring from [0], ending at [1]; written by stop() */
    int by_kind;
    int ignore_all;
    int nignore;
    unsigned *ignore;
    int blocking;             /* a loop with one closed-loop connection uses blocking calls */
    schedule_t *schedule;
    int nloops;
    loop_t *loops;
    pthread_mutex_t rare;     /* the first fatal error or failure wins: loops report under it */
    int fatal;
    unsigned fatal_code;
    char fatal_msg[512];
    char fatal_sql[512];
    char failure[512];
    int running;
} core_t;

/* Split the connections into nloops contiguous slices (0 on success, -1 out of memory). */
int core_loops(core_t *k, int nloops);
void core_loops_free(core_t *k);
double mono_now(void);
void core_run(core_t *k);
void core_stop(core_t *k);

#endif
