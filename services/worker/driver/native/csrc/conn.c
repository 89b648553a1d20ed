/* One connection: open it and prepare its statements, draw a statement's parameters from the
 * program, and run the statement with libmariadb's non-blocking calls (or blocking ones for a
 * process's only closed-loop connection), storing and freeing every result as sysbench does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core.h"

#define PRIME 4294967291ULL

static uint64_t permute(uint64_t x)
{
    if (x >= PRIME)
        return x;
    uint64_t residue = x * x % PRIME;
    return x <= PRIME / 2 ? residue : PRIME - residue;
}

static int64_t unique_value(int64_t index, int64_t offset)
{
    uint64_t i = (uint64_t)index & 0xFFFFFFFFULL;
    return (int64_t)permute(((permute(i) + (uint64_t)offset) & 0xFFFFFFFFULL) ^ 0x5BF03635ULL);
}

static pstmt_t *current(conn_t *c) { return &c->prog->blocks[c->blk].stmts[c->st]; }

const char *conn_current_sql(conn_t *c)
{
    pstmt_t *s = current(c);
    return s->sql[s->nsql > 1 ? c->table : 0];
}

int conn_current_kind(conn_t *c) { return current(c)->kind; }

static void enter_block(conn_t *c)
{
    pblock_t *b = &c->prog->blocks[c->blk];
    /* sysbench.rand.uniform(1, tables), less one: the table's index. */
    c->table = b->tables ? (int)(1.0 + rng_random(&c->rng) * b->tables) - 1 : 0;
}

/* Enter the blocks from c->blk on, each drawing its table, up to the first with statements to
 * send (a block of repeat 0 only draws); 0 when the event has none left, after its tail draws. */
static int enter_blocks(conn_t *c)
{
    for (; c->blk < c->prog->nblocks; c->blk++) {
        enter_block(c);
        if (c->prog->blocks[c->blk].repeat > 0)
            return 1;
    }
    for (int i = 0; i < c->prog->tail_draws; i++)
        rng_random(&c->rng);
    return 0;
}

void conn_first(conn_t *c)
{
    c->blk = c->rep = c->st = 0;
    c->has_stmt = 0;
    /* program_from_py refused a program without a block that sends. */
    enter_blocks(c);
}

int conn_next(conn_t *c)
{
    pblock_t *b = &c->prog->blocks[c->blk];
    if (++c->st < b->nstmts)
        return 1;
    c->st = 0;
    if (++c->rep < b->repeat)
        return 1;
    c->rep = 0;
    c->blk++;
    return enter_blocks(c);
}

/* sysbench's c and pad: groups of 11 random digits joined by '-'; the length written. Each
 * digit is sb_rand_str's sb_rand_uniform('0', '9'), one draw per character. */
static size_t digits(rng_t *rng, int groups, char *out)
{
    char *p = out;
    for (int g = 0; g < groups; g++) {
        if (g)
            *p++ = '-';
        for (int i = 0; i < 11; i++)
            *p++ = (char)(uint32_t)(48.0 + rng_random(rng) * 10.0);
    }
    return (size_t)(p - out);
}

/* The value of an integer parameter (every type but DIGITS and NULL). */
static int64_t int_value(conn_t *c, const param_t *p)
{
    switch (p->type) {
    case P_KEY: {
        int64_t v = dist_draw(&c->prog->dist, &c->rng, p->a, p->b);
        if (p->c >= 0)
            c->regs[p->c] = v;
        return v;
    }
    case P_REF:
        return c->regs[p->a] + p->b;
    case P_UNIQUE: {
        int64_t i = c->gen_next[p->slot];
        c->gen_next[p->slot] = i + p->c;
        return unique_value(i, p->b) + p->d;
    }
    case P_CYCLE: {
        int64_t k = c->gen_next[p->slot];
        c->gen_next[p->slot] = k + p->b;
        return (int64_t)((unsigned __int128)k * 2147483647u % (uint64_t)p->c) + 1;
    }
    default:
        return p->a;
    }
}

static void render_text(conn_t *c, pstmt_t *s)
{
    const char *sql = s->sql[s->nsql > 1 ? c->table : 0];
    char *out = c->text;
    int j = 0;
    for (const char *q = sql; *q; q++) {
        if (*q != '?' || j >= s->nparams) {
            *out++ = *q;
            continue;
        }
        const param_t *p = &s->params[j++];
        if (p->type == P_DIGITS)
            out += digits(&c->rng, (int)p->a, out);
        else if (p->type == P_NULL)
            out += sprintf(out, "NULL");
        else
            out += sprintf(out, "%lld", (long long)int_value(c, p));
    }
    *out = 0;
}

pbind_t *conn_draw(conn_t *c)
{
    pstmt_t *s = current(c);
    if (s->text) {
        render_text(c, s);
        return NULL;
    }
    int t = s->nsql > 1 ? c->table : 0;
    pbind_t *pb = &c->binds[s->bind_base + t];
    for (int j = 0; j < s->nparams; j++) {
        const param_t *p = &s->params[j];
        if (p->type == P_DIGITS)
            pb->lens[j] = digits(&c->rng, (int)p->a, pb->strs[j]);
        else if (p->type != P_NULL)
            pb->ints[j] = int_value(c, p);
    }
    return pb;
}

/* Draw the current prepared statement's parameters into its buffers, binding them first when
 * the statement was last bound to another program statement's buffers. */
static int fill_params(conn_t *c, pstmt_t *s)
{
    int t = s->nsql > 1 ? c->table : 0;
    int k = s->stmt_index[t];
    pbind_t *pb = conn_draw(c);
    c->cur = c->stmts[k];
    if (s->nparams && c->bound_by[k] != pb) {
        if (mysql_stmt_bind_param(c->cur, pb->binds))
            return -1;
        c->bound_by[k] = pb;
    }
    return k;
}

static int settle(conn_t *c, int wait)
{
    for (;;) {
        if (wait)
            return wait;
        switch (c->stage) {
        case ST_QUERY:
            if (c->ret)
                return -1;
            if (mysql_field_count(c->m)) {
                c->stage = ST_QSTORE;
                wait = mysql_store_result_start(&c->res, c->m);
                continue;
            }
            if (c->prog->by_rows)
                c->rows = (int64_t)mysql_affected_rows(c->m);
            c->stage = ST_IDLE;
            return 0;
        case ST_QSTORE:
            if (!c->res)
                return -1;
            mysql_free_result(c->res);
            c->res = NULL;
            c->stage = ST_IDLE;
            return 0;
        case ST_EXEC:
            if (c->ret)
                return -1;
            if (mysql_stmt_field_count(c->cur)) {
                /* sysbench stores every result set (mysql_stmt_store_result) and frees it. */
                c->stage = ST_STORE;
                wait = mysql_stmt_store_result_start(&c->ret, c->cur);
                continue;
            }
            if (c->prog->by_rows)
                c->rows = (int64_t)mysql_stmt_affected_rows(c->cur);
            mysql_stmt_free_result(c->cur);
            c->stage = ST_IDLE;
            return 0;
        case ST_STORE:
            if (c->ret)
                return -1;
            mysql_stmt_free_result(c->cur);
            c->stage = ST_IDLE;
            return 0;
        default:
            return 0;
        }
    }
}

int conn_start(conn_t *c)
{
    pstmt_t *s = current(c);
    c->has_stmt = 1;
    c->ret = 0;
    if (s->text) {
        conn_draw(c);
        c->stage = ST_QUERY;
        pvio_skip_first_read(c->m);
        return settle(c, mysql_real_query_start(&c->ret, c->m, c->text, strlen(c->text)));
    }
    c->stage = ST_EXEC;
    if (fill_params(c, s) < 0)
        return -1;
    pvio_skip_first_read(c->m);
    return settle(c, mysql_stmt_execute_start(&c->ret, c->cur));
}

int conn_cont(conn_t *c, int status)
{
    int wait;
    switch (c->stage) {
    case ST_QUERY:
        wait = mysql_real_query_cont(&c->ret, c->m, status);
        break;
    case ST_QSTORE:
        wait = mysql_store_result_cont(&c->res, c->m, status);
        break;
    case ST_EXEC:
        wait = mysql_stmt_execute_cont(&c->ret, c->cur, status);
        break;
    case ST_STORE:
        wait = mysql_stmt_store_result_cont(&c->ret, c->cur, status);
        break;
    default:
        return 0;
    }
    return settle(c, wait);
}

int conn_run_blocking(conn_t *c)
{
    pstmt_t *s = current(c);
    c->has_stmt = 1;
    if (s->text) {
        conn_draw(c);
        c->stage = ST_QUERY;
        if (mysql_real_query(c->m, c->text, strlen(c->text)))
            return -1;
        if (mysql_field_count(c->m)) {
            c->stage = ST_QSTORE;
            MYSQL_RES *res = mysql_store_result(c->m);
            if (!res)
                return -1;
            mysql_free_result(res);
        } else if (c->prog->by_rows) {
            c->rows = (int64_t)mysql_affected_rows(c->m);
        }
        c->stage = ST_IDLE;
        return 0;
    }
    c->stage = ST_EXEC;
    if (fill_params(c, s) < 0)
        return -1;
    if (mysql_stmt_execute(c->cur))
        return -1;
    if (mysql_stmt_field_count(c->cur)) {
        c->stage = ST_STORE;
        if (mysql_stmt_store_result(c->cur))
            return -1;
    } else if (c->prog->by_rows) {
        c->rows = (int64_t)mysql_stmt_affected_rows(c->cur);
    }
    mysql_stmt_free_result(c->cur);
    c->stage = ST_IDLE;
    return 0;
}

void conn_error(conn_t *c, unsigned *code, char *msg, size_t len)
{
    if ((c->stage == ST_EXEC || c->stage == ST_STORE) && c->cur) {
        *code = mysql_stmt_errno(c->cur);
        snprintf(msg, len, "%s", mysql_stmt_error(c->cur));
    } else if (c->m) {
        *code = mysql_errno(c->m);
        snprintf(msg, len, "%s", mysql_error(c->m));
    } else {
        *code = 2006;
        snprintf(msg, len, "not connected");
    }
    if (*code == 0 && c->stage == ST_EXEC && c->cur && !mysql_stmt_errno(c->cur)) {
        /* mysql_stmt_bind_param refused the buffers: a bug in the program's encoding. */
        snprintf(msg, len, "cannot bind the parameters of %s", conn_current_sql(c));
    }
}

int conn_open(conn_t *c, const connect_t *how, char *err, size_t errlen, unsigned *code)
{
    MYSQL *m = mysql_init(NULL);
    if (!m) {
        *code = 2008;
        snprintf(err, errlen, "out of memory initialising a connection");
        return -1;
    }
    if (c->nonblocking)
        mysql_options(m, MYSQL_OPT_NONBLOCK, 0);
    unsigned timeout = how->connect_timeout;
    mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
    /* Connector/C sends any file a server asks for by default; a rogue target could ask. */
    unsigned no_infile = 0;
    mysql_options(m, MYSQL_OPT_LOCAL_INFILE, &no_infile);
    if (how->compress)
        /* The compressed protocol, if the server agrees (sysbench's --mysql-compression). */
        mysql_options(m, MYSQL_OPT_COMPRESS, NULL);
    if (!how->allow_cleartext) {
        int refused = 1;
#if MARIADB_PACKAGE_VERSION_ID >= 30300
        refused = mysql_options(m, MARIADB_OPT_RESTRICTED_AUTH, SAFE_AUTH) != 0;
#endif
        if (refused) {
            *code = 2059;
            snprintf(err, errlen, "this MariaDB Connector/C cannot restrict authentication plugins (3.3 and "
                                  "later can), so it would send a password in clear text to a server asking "
                                  "for it; the password is not sent");
            mysql_close(m);
            return -1;
        }
    }
    if (how->ssl_ca) {
        my_bool verify = 1;
        mysql_ssl_set(m, NULL, NULL, how->ssl_ca, NULL, NULL);
        mysql_options(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
    }
    if (!mysql_real_connect(m, how->host, how->user, how->password, how->database, how->port,
                            how->unix_socket, 0)) {
        *code = mysql_errno(m);
        snprintf(err, errlen, "%s", mysql_error(m));
        mysql_close(m);
        return -1;
    }
    pvio_speed_up(m);
    program_t *p = c->prog;
    for (int i = 0; i < p->nprepared; i++) {
        MYSQL_STMT *st = mysql_stmt_init(m);
        if (!st || mysql_stmt_prepare(st, p->prepared[i], strlen(p->prepared[i]))) {
            *code = st ? mysql_stmt_errno(st) : mysql_errno(m);
            snprintf(err, errlen, "%s", st ? mysql_stmt_error(st) : mysql_error(m));
            if (st)
                mysql_stmt_close(st);
            for (int j = 0; j < i; j++)
                mysql_stmt_close(c->stmts[j]);
            mysql_close(m);
            return -1;
        }
        c->stmts[i] = st;
        c->bound_by[i] = NULL;
    }
    c->m = m;
    c->fd = mysql_get_socket(m);
    c->stage = ST_IDLE;
    return 0;
}

void conn_close(conn_t *c)
{
    if (!c->m)
        return;
    for (int i = 0; i < c->prog->nprepared; i++) {
        if (c->stmts[i])
            mysql_stmt_close(c->stmts[i]);
        c->stmts[i] = NULL;
    }
    if (c->res) {
        mysql_free_result(c->res);
        c->res = NULL;
    }
    /* mysql_close sends COM_QUIT; on a dead socket it fails quietly. */
    mysql_close(c->m);
    c->m = NULL;
    c->fd = -1;
}

int conn_init(conn_t *c, int id, program_t *p, int nonblocking)
{
    memset(c, 0, sizeof *c);
    c->id = id;
    c->fd = -1;
    c->prog = p;
    c->nonblocking = nonblocking;
    c->left = -1;
    c->stmts = calloc(p->nprepared ? p->nprepared : 1, sizeof *c->stmts);
    c->bound_by = calloc(p->nprepared ? p->nprepared : 1, sizeof *c->bound_by);
    c->binds = calloc(p->nbinds ? p->nbinds : 1, sizeof *c->binds);
    c->regs = calloc(p->registers ? p->registers : 1, sizeof *c->regs);
    c->gen_next = calloc(p->nslots ? p->nslots : 1, sizeof *c->gen_next);
    size_t text_max = 1;
    if (!c->stmts || !c->bound_by || !c->binds || !c->regs || !c->gen_next)
        return -1;
    for (int b = 0; b < p->nblocks; b++) {
        for (int i = 0; i < p->blocks[b].nstmts; i++) {
            pstmt_t *s = &p->blocks[b].stmts[i];
            if (s->text_max + 1 > text_max)
                text_max = s->text_max + 1;
            for (int j = 0; j < s->nparams; j++) {
                param_t *q = &s->params[j];
                if (q->type == P_UNIQUE || q->type == P_CYCLE)
                    c->gen_next[q->slot] = q->a;
            }
            if (s->text)
                continue;
            for (int t = 0; t < s->nsql; t++) {
                pbind_t *pb = &c->binds[s->bind_base + t];
                int n = s->nparams ? s->nparams : 1;
                pb->binds = calloc(n, sizeof *pb->binds);
                pb->ints = calloc(n, sizeof *pb->ints);
                pb->strs = calloc(n, sizeof *pb->strs);
                pb->lens = calloc(n, sizeof *pb->lens);
                if (!pb->binds || !pb->ints || !pb->strs || !pb->lens)
                    return -1;
                pb->n = s->nparams;
                for (int j = 0; j < s->nparams; j++) {
                    MYSQL_BIND *bd = &pb->binds[j];
                    const param_t *q = &s->params[j];
                    if (q->type == P_NULL) {
                        bd->buffer_type = MYSQL_TYPE_NULL;
                    } else if (q->type == P_DIGITS) {
                        size_t cap = 12 * (size_t)q->a + 1;
                        pb->strs[j] = malloc(cap);
                        if (!pb->strs[j])
                            return -1;
                        bd->buffer_type = MYSQL_TYPE_STRING;
                        bd->buffer = pb->strs[j];
                        bd->buffer_length = cap;
                        bd->length = &pb->lens[j];
                    } else {
                        bd->buffer_type = MYSQL_TYPE_LONGLONG;
                        bd->buffer = &pb->ints[j];
                    }
                }
            }
        }
    }
    c->text = malloc(text_max);
    c->text_cap = text_max;
    return c->text ? 0 : -1;
}

void conn_free(conn_t *c)
{
    conn_close(c);
    if (c->binds) {
        for (int i = 0; i < c->prog->nbinds; i++) {
            pbind_t *pb = &c->binds[i];
            for (int j = 0; pb->strs && j < pb->n; j++)
                free(pb->strs[j]);
            free(pb->binds);
            free(pb->ints);
            free(pb->lens);
            free(pb->strs);
        }
    }
    free(c->binds);
    free(c->stmts);
    free(c->bound_by);
    free(c->regs);
    free(c->gen_next);
    free(c->text);
    free(c->rng.mt);
    c->rng.mt = NULL;
    c->binds = NULL;
}
