/* A transaction program from its Python encoding (native/core.py's encode), checked as it is
 * read: a malformed encoding is a ValueError naming what is wrong, never a crash in the loop. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>
#include "core.h"

void program_free(program_t *p)
{
    if (!p)
        return;
    for (int b = 0; p->blocks && b < p->nblocks; b++) {
        pblock_t *bl = &p->blocks[b];
        for (int i = 0; bl->stmts && i < bl->nstmts; i++) {
            pstmt_t *s = &bl->stmts[i];
            for (int j = 0; s->sql && j < s->nsql; j++)
                free(s->sql[j]);
            free(s->sql);
            free(s->params);
            free(s->stmt_index);
        }
        free(bl->stmts);
    }
    free(p->blocks);
    for (int i = 0; p->prepared && i < p->nprepared; i++)
        free(p->prepared[i]);
    free(p->prepared);
    free(p);
}

static char *dup_str(PyObject *o)
{
    const char *s = PyUnicode_AsUTF8(o);
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        PyErr_NoMemory();
    return d;
}

static int bad(const char *what)
{
    PyErr_Format(PyExc_ValueError, "load core program: %s", what);
    return -1;
}

static int read_stmt(program_t *p, pstmt_t *s, PyObject *o, int tables)
{
    PyObject *sqls, *params;
    int text;
    if (!PyArg_ParseTuple(o, "ipOO", &s->kind, &text, &sqls, &params))
        return -1;
    s->text = text;
    if (s->kind < 0 || s->kind >= KINDS)
        return bad("statement kind out of range");
    if (!PyTuple_Check(sqls) || !PyTuple_Check(params))
        return bad("statement sql and params must be tuples");
    s->nsql = (int)PyTuple_GET_SIZE(sqls);
    if (s->nsql != (tables ? tables : 1))
        return bad("one SQL string per table of the block");
    s->sql = calloc(s->nsql, sizeof *s->sql);
    s->stmt_index = calloc(s->nsql, sizeof *s->stmt_index);
    s->nparams = (int)PyTuple_GET_SIZE(params);
    s->params = calloc(s->nparams ? s->nparams : 1, sizeof *s->params);
    if (!s->sql || !s->stmt_index || !s->params) {
        PyErr_NoMemory();
        return -1;
    }
    size_t extra = 0;
    for (int j = 0; j < s->nparams; j++) {
        param_t *q = &s->params[j];
        long long a, b, c, d;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(params, j), "iLLLL", &q->type, &a, &b, &c, &d))
            return -1;
        q->a = a, q->b = b, q->c = c, q->d = d;
        switch (q->type) {
        case P_KEY:
            if (a > b)
                return bad("key range lo > hi");
            if (c >= p->registers)
                return bad("key saves to a register out of range");
            break;
        case P_REF:
            if (a < 0 || a >= p->registers)
                return bad("ref reads a register out of range");
            break;
        case P_DIGITS:
            if (a < 1 || a > 1000)
                return bad("digits groups out of range");
            extra += 12 * (size_t)a;
            break;
        case P_UNIQUE:
        case P_CYCLE:
            if ((q->type == P_UNIQUE ? c : b) < 1 || (q->type == P_CYCLE && c < 1))
                return bad("unique id step and size must be >= 1");
            q->slot = p->nslots++;
            break;
        case P_CONST:
        case P_NULL:
            break;
        default:
            return bad("unknown parameter type");
        }
        if (q->type != P_DIGITS)
            extra += 24;
    }
    for (int t = 0; t < s->nsql; t++) {
        if (!(s->sql[t] = dup_str(PyTuple_GET_ITEM(sqls, t))))
            return -1;
        if (strlen(s->sql[t]) + extra > s->text_max)
            s->text_max = strlen(s->sql[t]) + extra;
        s->stmt_index[t] = -1;
        for (int i = 0; !s->text && i < p->nprepared; i++)
            if (!strcmp(p->prepared[i], s->sql[t]))
                s->stmt_index[t] = i;
        if (!s->text && s->stmt_index[t] < 0)
            return bad("a prepared statement's SQL is missing from the prepared list");
    }
    if (!s->text) {
        s->bind_base = p->nbinds;
        p->nbinds += s->nsql;
    }
    return 0;
}

program_t *program_from_py(PyObject *o)
{
    PyObject *blocks, *dist, *prepared;
    int by_rows, registers, dkind, iters, pct, res, tail_draws = 0;
    double pareto_h, zipf_exp;
    if (!PyArg_ParseTuple(o, "OOpiO|i", &blocks, &dist, &by_rows, &registers, &prepared, &tail_draws))
        return NULL;
    if (tail_draws < 0 || tail_draws > 16) {
        bad("tail_draws out of range");
        return NULL;
    }
    if (!PyArg_ParseTuple(dist, "iiiidd", &dkind, &iters, &pct, &res, &pareto_h, &zipf_exp))
        return NULL;
    if (!PyTuple_Check(blocks) || !PyTuple_Check(prepared)) {
        bad("blocks and prepared must be tuples");
        return NULL;
    }
    if (dkind < DIST_UNIFORM || dkind > DIST_ZIPFIAN || iters < 1 || res < 0 || res > 100 || pct < 0 || pct > 100 ||
        !(pareto_h > 0 && pareto_h < 1) || !(zipf_exp >= 0)) {
        bad("distribution out of range");
        return NULL;
    }
    program_t *p = calloc(1, sizeof *p);
    if (!p)
        return (program_t *)PyErr_NoMemory();
    dist_init(&p->dist, dkind, iters, pct, res, pareto_h, zipf_exp);
    p->by_rows = by_rows;
    p->tail_draws = tail_draws;
    p->registers = registers < 0 ? 0 : registers;
    p->nprepared = (int)PyTuple_GET_SIZE(prepared);
    p->prepared = calloc(p->nprepared ? p->nprepared : 1, sizeof *p->prepared);
    if (!p->prepared) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int i = 0; i < p->nprepared; i++)
        if (!(p->prepared[i] = dup_str(PyTuple_GET_ITEM(prepared, i))))
            goto fail;
    p->nblocks = (int)PyTuple_GET_SIZE(blocks);
    if (p->nblocks == 0) {
        bad("no statements");
        goto fail;
    }
    p->blocks = calloc(p->nblocks, sizeof *p->blocks);
    if (!p->blocks) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int b = 0; b < p->nblocks; b++) {
        pblock_t *bl = &p->blocks[b];
        PyObject *stmts;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(blocks, b), "iiO", &bl->tables, &bl->repeat, &stmts))
            goto fail;
        if (!PyTuple_Check(stmts) || PyTuple_GET_SIZE(stmts) == 0 || bl->repeat < 0 || bl->tables < 0 ||
            (bl->repeat == 0 && bl->tables == 0)) {
            bad("a block needs statements, tables >= 0 and repeat >= 1 (0 only when it draws a table)");
            goto fail;
        }
        bl->nstmts = (int)PyTuple_GET_SIZE(stmts);
        bl->stmts = calloc(bl->nstmts, sizeof *bl->stmts);
        if (!bl->stmts) {
            PyErr_NoMemory();
            goto fail;
        }
        for (int i = 0; i < bl->nstmts; i++)
            if (read_stmt(p, &bl->stmts[i], PyTuple_GET_ITEM(stmts, i), bl->tables))
                goto fail;
    }
    int runs = 0;
    for (int b = 0; b < p->nblocks; b++)
        runs |= p->blocks[b].repeat > 0;
    if (!runs) {
        bad("no statements");
        goto fail;
    }
    return p;
fail:
    program_free(p);
    return NULL;
}
