/* services.worker.driver.native._core: the Core type Python drives (native/core.py), and
 * draw(), which runs a program on a stream without a server so tests compare its statements
 * with services/workload/program.py's Interpreter. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "core.h"

static PyObject *CoreError;

/* ---- helpers */

static int read_state(PyObject *state, mt_t *out)
{
    /* random.Random.getstate(): (3, (624 words..., index), gauss_next) */
    PyObject *words;
    int version;
    PyObject *gauss;
    if (!PyArg_ParseTuple(state, "iOO", &version, &words, &gauss))
        return -1;
    if (version != 3 || !PyTuple_Check(words) || PyTuple_GET_SIZE(words) != 625) {
        PyErr_SetString(PyExc_ValueError, "load core: a random.Random state of version 3 (624 words and an index)");
        return -1;
    }
    for (int i = 0; i < 624; i++) {
        unsigned long w = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(words, i));
        if (w == (unsigned long)-1 && PyErr_Occurred())
            return -1;
        out->mt[i] = (uint32_t)w;
    }
    long index = PyLong_AsLong(PyTuple_GET_ITEM(words, 624));
    if (index < 0 || index > 624) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "load core: random state index out of range");
        return -1;
    }
    out->index = (int)index;
    return 0;
}

/* A connection's stream: ("xoroshiro128+", s0, s1) from services/workload/sb_random.py's
 * SysbenchStream.getstate(), or a random.Random state (tests). */
static int read_stream(PyObject *state, rng_t *out)
{
    if (PyTuple_Check(state) && PyTuple_GET_SIZE(state) == 3 && PyUnicode_Check(PyTuple_GET_ITEM(state, 0))) {
        const char *tag = PyUnicode_AsUTF8(PyTuple_GET_ITEM(state, 0));
        if (!tag)
            return -1;
        if (strcmp(tag, "xoroshiro128+")) {
            PyErr_Format(PyExc_ValueError, "load core: random stream %s: not xoroshiro128+", tag);
            return -1;
        }
        for (int i = 0; i < 2; i++) {
            out->s[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(state, i + 1));
            if (out->s[i] == (unsigned long long)-1 && PyErr_Occurred())
                return -1;
        }
        out->xoroshiro = 1;
        return 0;
    }
    out->xoroshiro = 0;
    if (!out->mt && !(out->mt = malloc(sizeof *out->mt))) {
        PyErr_NoMemory();
        return -1;
    }
    return read_state(state, out->mt);
}

static PyObject *hist_to_py(hist_t *h)
{
    PyObject *buckets = PyDict_New();
    if (!buckets)
        return NULL;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        uint64_t n = __atomic_load_n(&h->counts[i], __ATOMIC_RELAXED);
        if (!n)
            continue;
        PyObject *key = PyLong_FromLong(i), *val = PyLong_FromUnsignedLongLong(n);
        if (!key || !val || PyDict_SetItem(buckets, key, val)) {
            Py_XDECREF(key);
            Py_XDECREF(val);
            Py_DECREF(buckets);
            return NULL;
        }
        Py_DECREF(key);
        Py_DECREF(val);
    }
    double max_us;
    __atomic_load(&h->max_us, &max_us, __ATOMIC_RELAXED);
    return Py_BuildValue("(Nd)", buckets, max_us);
}

/* ---- draw(): a program's transactions without a server */

static PyObject *value_list(conn_t *c, pbind_t *pb)
{
    pstmt_t *s = &c->prog->blocks[c->blk].stmts[c->st];
    PyObject *out = PyTuple_New(s->nparams);
    if (!out)
        return NULL;
    for (int j = 0; j < s->nparams; j++) {
        PyObject *v;
        if (s->params[j].type == P_NULL)
            v = Py_NewRef(Py_None);
        else if (s->params[j].type == P_DIGITS)
            v = PyUnicode_FromStringAndSize(pb->strs[j], (Py_ssize_t)pb->lens[j]);
        else
            v = PyLong_FromLongLong(pb->ints[j]);
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, j, v);
    }
    return out;
}

static const char *KIND_NAMES[KINDS] = {"read", "write", "other"};

static PyObject *core_draw(PyObject *self, PyObject *args)
{
    PyObject *prog_obj, *state;
    int events;
    if (!PyArg_ParseTuple(args, "OOi", &prog_obj, &state, &events))
        return NULL;
    program_t *p = program_from_py(prog_obj);
    if (!p)
        return NULL;
    conn_t c;
    PyObject *out = NULL;
    if (conn_init(&c, 0, p, 0)) {
        PyErr_NoMemory();
        goto done;
    }
    if (read_stream(state, &c.rng))
        goto done;
    out = PyList_New(0);
    for (int e = 0; out && e < events; e++) {
        PyObject *trx = PyList_New(0);
        if (!trx)
            goto fail;
        conn_first(&c);
        do {
            pbind_t *pb = conn_draw(&c);
            pstmt_t *s = &p->blocks[c.blk].stmts[c.st];
            PyObject *item;
            if (pb)
                item = Py_BuildValue("(ssN)", KIND_NAMES[s->kind], conn_current_sql(&c), value_list(&c, pb));
            else
                item = Py_BuildValue("(ssO)", KIND_NAMES[s->kind], c.text, Py_None);
            if (!item || PyList_Append(trx, item)) {
                Py_XDECREF(item);
                Py_DECREF(trx);
                goto fail;
            }
            Py_DECREF(item);
        } while (conn_next(&c));
        if (PyList_Append(out, trx)) {
            Py_DECREF(trx);
            goto fail;
        }
        Py_DECREF(trx);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    conn_free(&c);
    program_free(p);
    return out;
}

/* arrivals(rate, start, random_state, n, before): the first n intended starts the core's
 * schedule hands out before `before` (fewer when one is at or after it). */
static PyObject *core_arrivals(PyObject *self, PyObject *args)
{
    double rate, start, before;
    PyObject *state;
    int n;
    if (!PyArg_ParseTuple(args, "ddOid", &rate, &start, &state, &n, &before))
        return NULL;
    if (!(rate > 0)) {
        PyErr_SetString(PyExc_ValueError, "load core: arrival rate must be > 0");
        return NULL;
    }
    schedule_t s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.lock, NULL);
    s.rate = rate;
    s.last = start;
    s.limit = SIZE_MAX;
    PyObject *out = NULL;
    if (read_state(state, &s.rng) == 0) {
        out = PyList_New(0);
        for (int i = 0; out && i < n; i++) {
            int got;
            double t = schedule_take(&s, before, &got);
            if (!got)
                break;
            PyObject *v = PyFloat_FromDouble(t);
            if (!v || PyList_Append(out, v))
                Py_CLEAR(out);
            Py_XDECREF(v);
        }
    }
    free(s.pending);
    pthread_mutex_destroy(&s.lock);
    return out;
}

static PyObject *core_bucket_of(PyObject *self, PyObject *arg)
{
    double v = PyFloat_AsDouble(arg);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(hist_bucket_of(v));
}

/* ---- the Core type */

typedef struct {
    PyObject_HEAD
    core_t k;
    PyObject *keep; /* the connect strings' owners */
    int opened;
    int rare_init;
} CoreObject;

static void Core_dealloc(CoreObject *self)
{
    core_t *k = &self->k;
    if (!k->running) {
        for (int i = 0; k->conns && i < k->nconns; i++)
            conn_free(&k->conns[i]);
        for (int i = 0; k->programs && i < k->nconns; i++)
            program_free(k->programs[i]);
        free(k->conns);
        free(k->programs);
        free(k->ignore);
        core_loops_free(k);
        if (self->rare_init)
            pthread_mutex_destroy(&k->rare);
        if (k->schedule) {
            pthread_mutex_destroy(&k->schedule->lock);
            free(k->schedule->pending);
            free(k->schedule);
        }
    }
    /* A core still running (a connection stuck past the drain grace) is left to the process's
     * exit: freeing what its thread uses would crash it. */
    Py_XDECREF(self->keep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static const char *opt_str(PyObject *o)
{
    return o == Py_None ? NULL : PyUnicode_AsUTF8(o);
}

/* The largest packet a program sends: a statement as text, or its execute packet (never longer
 * than its text rendering: the values without the SQL), with room for the packet's headers. */
static size_t packet_max(const program_t *p)
{
    size_t most = 0;
    for (int b = 0; b < p->nblocks; b++)
        for (int i = 0; i < p->blocks[b].nstmts; i++)
            if (p->blocks[b].stmts[i].text_max > most)
                most = p->blocks[b].stmts[i].text_max;
    for (int i = 0; i < p->nprepared; i++)
        if (strlen(p->prepared[i]) > most)
            most = strlen(p->prepared[i]);
    return most + 64;
}

/* libmariadb gives each connection a network buffer of net_buffer_length bytes (8 KiB unless
 * set; one process-wide setting), written to in full when the connection opens: 32 MiB at 4096
 * connections. A buffer that holds the largest packet the programs send writes each statement
 * in one send, as the default does; reads grow the buffer to a longer reply by themselves. */
static void size_net_buffer(core_t *k)
{
    static const size_t DEFAULT = 8192, FLOOR = 1024;
    size_t need = FLOOR;
    for (int i = 0; i < k->nconns; i++)
        if (k->programs[i] && packet_max(k->programs[i]) > need)
            need = packet_max(k->programs[i]);
    need = (need + 1023) / 1024 * 1024;
    if (need > DEFAULT)
        need = DEFAULT;
    MYSQL *m = mysql_init(NULL);
    if (m) {
        mysql_options(m, MYSQL_OPT_NET_BUFFER_LENGTH, &need);
        mysql_close(m);
    }
}

/* Core(programs, states, budgets, connect, by_kind, ignore, blocking, rate, arrivals_state, backlog
 *      [, loops]) */
static int Core_init(CoreObject *self, PyObject *args, PyObject *kw)
{
    PyObject *programs, *states, *budgets, *connect, *ignore, *arrivals;
    int by_kind, blocking, loops = 1;
    double rate;
    Py_ssize_t backlog;
    if (!PyArg_ParseTuple(args, "OOOOpOpdOn|i", &programs, &states, &budgets, &connect, &by_kind, &ignore,
                          &blocking, &rate, &arrivals, &backlog, &loops))
        return -1;
    if (backlog < 1) {
        PyErr_SetString(PyExc_ValueError, "load core: the open-loop backlog bound must be >= 1");
        return -1;
    }
    if (self->k.conns) {
        PyErr_SetString(PyExc_RuntimeError, "load core: already initialised");
        return -1;
    }
    if (!PyList_Check(programs) || !PyList_Check(states) || !PyList_Check(budgets) ||
        PyList_GET_SIZE(states) != PyList_GET_SIZE(programs) ||
        PyList_GET_SIZE(budgets) != PyList_GET_SIZE(programs) || PyList_GET_SIZE(programs) == 0) {
        PyErr_SetString(PyExc_ValueError, "load core: one program, random state and budget per connection");
        return -1;
    }
    core_t *k = &self->k;
    pthread_mutex_init(&k->rare, NULL);
    self->rare_init = 1;
    k->deadline[0] = k->deadline[1] = 0.0;
    PyObject *host, *user, *password, *database, *sock, *ssl_ca;
    unsigned port, timeout;
    int compress, allow_cleartext;
    if (!PyArg_ParseTuple(connect, "UUUOIOOIpp", &host, &user, &password, &database, &port, &sock, &ssl_ca,
                          &timeout, &compress, &allow_cleartext))
        return -1;
    self->keep = Py_NewRef(connect);
    k->how.host = PyUnicode_AsUTF8(host);
    k->how.user = PyUnicode_AsUTF8(user);
    k->how.password = PyUnicode_AsUTF8(password);
    k->how.database = opt_str(database);
    k->how.unix_socket = opt_str(sock);
    k->how.ssl_ca = opt_str(ssl_ca);
    k->how.port = port;
    k->how.connect_timeout = timeout;
    k->how.compress = compress;
    k->how.allow_cleartext = allow_cleartext;
    if (PyErr_Occurred())
        return -1;
    k->by_kind = by_kind;
    k->blocking = blocking && PyList_GET_SIZE(programs) == 1 && rate <= 0;
    if (ignore == Py_None) {
        k->ignore_all = 1;
    } else {
        if (!PyTuple_Check(ignore)) {
            PyErr_SetString(PyExc_ValueError, "load core: ignore is None (all) or a tuple of codes");
            return -1;
        }
        k->nignore = (int)PyTuple_GET_SIZE(ignore);
        k->ignore = calloc(k->nignore ? k->nignore : 1, sizeof *k->ignore);
        if (!k->ignore) {
            PyErr_NoMemory();
            return -1;
        }
        for (int i = 0; i < k->nignore; i++) {
            k->ignore[i] = (unsigned)PyLong_AsUnsignedLong(PyTuple_GET_ITEM(ignore, i));
            if (PyErr_Occurred())
                return -1;
        }
    }
    if (rate > 0) {
        k->schedule = calloc(1, sizeof *k->schedule);
        if (!k->schedule) {
            PyErr_NoMemory();
            return -1;
        }
        pthread_mutex_init(&k->schedule->lock, NULL);
        k->schedule->rate = rate;
        k->schedule->limit = (size_t)backlog;
        if (read_state(arrivals, &k->schedule->rng))
            return -1;
    }
    int n = (int)PyList_GET_SIZE(programs);
    k->programs = calloc(n, sizeof *k->programs);
    k->conns = calloc(n, sizeof *k->conns);
    if (!k->programs || !k->conns) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < n; i++) {
        /* Connections given the same program object share one compiled copy. */
        PyObject *po = PyList_GET_ITEM(programs, i);
        program_t *p = NULL;
        for (int j = 0; j < i; j++)
            if (PyList_GET_ITEM(programs, j) == po) {
                p = k->programs[j];
                break;
            }
        k->programs[i] = p ? NULL : program_from_py(po);
        if (!p && !k->programs[i])
            return -1;
        if (conn_init(&k->conns[i], i, p ? p : k->programs[i], !k->blocking)) {
            PyErr_NoMemory();
            k->nconns = i + 1;
            return -1;
        }
        k->nconns = i + 1;
        if (read_stream(PyList_GET_ITEM(states, i), &k->conns[i].rng))
            return -1;
        long long left = PyLong_AsLongLong(PyList_GET_ITEM(budgets, i));
        if (left == -1 && PyErr_Occurred())
            return -1;
        k->conns[i].left = left;
    }
    if (core_loops(k, loops)) {
        PyErr_NoMemory();
        return -1;
    }
    size_net_buffer(k);
    return 0;
}

static PyObject *Core_open(CoreObject *self, PyObject *arg)
{
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0 || i >= self->k.nconns) {
        PyErr_Format(PyExc_IndexError, "load core: no connection %ld", i);
        return NULL;
    }
    char err[512];
    unsigned code = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = conn_open(&self->k.conns[i], &self->k.how, err, sizeof err, &code);
    Py_END_ALLOW_THREADS
    if (rc) {
        PyObject *e = Py_BuildValue("(Is)", code, err);
        if (e) {
            PyErr_SetObject(CoreError, e);
            Py_DECREF(e);
        }
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Core_go(CoreObject *self, PyObject *args)
{
    double t0, t_measure, t_end;
    if (!PyArg_ParseTuple(args, "ddd", &t0, &t_measure, &t_end))
        return NULL;
    self->k.deadline[0] = t_measure;
    self->k.deadline[1] = t_end;
    if (self->k.schedule)
        self->k.schedule->last = t0;
    Py_RETURN_NONE;
}

static PyObject *Core_run(CoreObject *self, PyObject *arg)
{
    double t0 = PyFloat_AsDouble(arg);
    if (t0 == -1.0 && PyErr_Occurred())
        return NULL;
    core_t *k = &self->k;
    for (int i = 0; i < k->nconns; i++)
        if (!k->conns[i].m) {
            PyErr_Format(PyExc_RuntimeError, "load core: connection %d is not open", i);
            return NULL;
        }
    k->running = 1;
    Py_INCREF(self); /* kept alive while its thread runs, whatever the caller drops */
    Py_BEGIN_ALLOW_THREADS
    for (double now = mono_now(); now < t0; now = mono_now()) {
        double d = t0 - now;
        struct timespec ts = {(time_t)d, (long)((d - (time_t)d) * 1e9)};
        nanosleep(&ts, NULL);
    }
    core_run(k);
    Py_END_ALLOW_THREADS
    k->running = 0;
    Py_DECREF(self);
    Py_RETURN_NONE;
}

static PyObject *Core_stop(CoreObject *self, PyObject *unused)
{
    core_stop(&self->k);
    Py_RETURN_NONE;
}

static PyObject *Core_deadline(CoreObject *self, PyObject *unused)
{
    double a, b;
    __atomic_load(&self->k.deadline[0], &a, __ATOMIC_RELAXED);
    __atomic_load(&self->k.deadline[1], &b, __ATOMIC_RELAXED);
    return Py_BuildValue("(dd)", a, b);
}

/* Add n to codes[key] (a dict of code string to count); -1 on error. */
static int add_code(PyObject *codes, unsigned code, uint64_t n)
{
    PyObject *key = PyUnicode_FromFormat("%u", code);
    if (!key)
        return -1;
    PyObject *was = PyDict_GetItemWithError(codes, key);
    uint64_t before = was ? PyLong_AsUnsignedLongLong(was) : 0;
    PyObject *val = PyErr_Occurred() ? NULL : PyLong_FromUnsignedLongLong(before + n);
    int rc = val ? PyDict_SetItem(codes, key, val) : -1;
    Py_DECREF(key);
    Py_XDECREF(val);
    return rc;
}

static PyObject *Core_counts(CoreObject *self, PyObject *unused)
{
    PyObject *codes = PyDict_New();
    if (!codes)
        return NULL;
    uint64_t c[COUNTERS] = {0};
    for (int l = 0; l < self->k.nloops; l++) {
        sink_t *s = &self->k.loops[l].measured;
        int n = __atomic_load_n(&s->ncodes, __ATOMIC_ACQUIRE);
        for (int i = 0; i < n; i++)
            if (add_code(codes, s->codes[i], __atomic_load_n(&s->code_counts[i], __ATOMIC_RELAXED))) {
                Py_DECREF(codes);
                return NULL;
            }
        for (int i = 0; i < COUNTERS; i++)
            c[i] += __atomic_load_n(&s->counts[i], __ATOMIC_RELAXED);
    }
    return Py_BuildValue("(KKKKKKKN)", c[C_TRX], c[C_READ], c[C_WRITE], c[C_OTHER], c[C_ERRORS], c[C_IGNORED],
                         c[C_RECONNECTS], codes);
}

/* One histogram: the loops' histograms `which` (-1: transaction latency; else that kind) added. */
static PyObject *merged_hist(core_t *k, int which)
{
    hist_t *sum = calloc(1, sizeof *sum);
    if (!sum)
        return PyErr_NoMemory();
    for (int l = 0; l < k->nloops; l++) {
        hist_t *h = which < 0 ? &k->loops[l].latency : k->loops[l].kinds ? &k->loops[l].kinds[which] : NULL;
        if (!h)
            continue;
        for (int i = 0; i < HIST_BUCKETS; i++)
            sum->counts[i] += __atomic_load_n(&h->counts[i], __ATOMIC_RELAXED);
        double max_us;
        __atomic_load(&h->max_us, &max_us, __ATOMIC_RELAXED);
        if (max_us > sum->max_us)
            sum->max_us = max_us;
    }
    PyObject *out = hist_to_py(sum);
    free(sum);
    return out;
}

static PyObject *Core_latency(CoreObject *self, PyObject *unused) { return merged_hist(&self->k, -1); }

static PyObject *Core_kinds(CoreObject *self, PyObject *unused)
{
    PyObject *out = PyDict_New();
    for (int i = 0; out && i < KINDS; i++) {
        PyObject *h = merged_hist(&self->k, i);
        if (!h || PyDict_SetItemString(out, KIND_NAMES[i], h)) {
            Py_XDECREF(h);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(h);
    }
    return out;
}

static PyObject *Core_queue(CoreObject *self, PyObject *arg)
{
    double now = PyFloat_AsDouble(arg);
    if (now == -1.0 && PyErr_Occurred())
        return NULL;
    if (!self->k.schedule)
        Py_RETURN_NONE;
    long due;
    Py_BEGIN_ALLOW_THREADS
    due = schedule_queue(self->k.schedule, now);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(due);
}

/* Open loop: the backlog that passed the bound (the run must end), or None. */
static PyObject *Core_backlog(CoreObject *self, PyObject *unused)
{
    schedule_t *s = self->k.schedule;
    if (!s)
        Py_RETURN_NONE;
    pthread_mutex_lock(&s->lock);
    size_t exceeded = s->exceeded;
    pthread_mutex_unlock(&s->lock);
    if (!exceeded)
        Py_RETURN_NONE;
    return PyLong_FromSize_t(exceeded);
}

static PyObject *Core_fatal(CoreObject *self, PyObject *unused)
{
    core_t *k = &self->k;
    if (!__atomic_load_n(&k->fatal, __ATOMIC_ACQUIRE))
        Py_RETURN_NONE;
    return Py_BuildValue("(Iss)", k->fatal_code, k->fatal_msg, k->fatal_sql);
}

static PyObject *Core_failure(CoreObject *self, PyObject *unused)
{
    if (!self->k.failure[0])
        Py_RETURN_NONE;
    return PyUnicode_FromString(self->k.failure);
}

/* Per connection: (completed, in_flight_from, t_start, busy, done, last_end) */
static PyObject *Core_connections(CoreObject *self, PyObject *unused)
{
    core_t *k = &self->k;
    PyObject *out = PyList_New(k->nconns);
    for (int i = 0; out && i < k->nconns; i++) {
        conn_t *c = &k->conns[i];
        PyObject *t = Py_BuildValue("(Lddiid)", (long long)c->completed, c->in_flight_from, c->t_start,
                                    c->stage != ST_IDLE, c->done, c->last_end);
        if (!t) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, t);
    }
    return out;
}

static PyObject *Core_loops(CoreObject *self, PyObject *unused) { return PyLong_FromLong(self->k.nloops); }

static PyObject *Core_close(CoreObject *self, PyObject *unused)
{
    if (self->k.running) {
        PyErr_SetString(PyExc_RuntimeError, "load core: still running");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    for (int i = 0; i < self->k.nconns; i++)
        conn_close(&self->k.conns[i]);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef Core_methods[] = {
    {"loops", (PyCFunction)Core_loops, METH_NOARGS, "How many event loops (threads) drive the connections."},
    {"open", (PyCFunction)Core_open, METH_O, "Open connection i and prepare its statements (GIL released)."},
    {"go", (PyCFunction)Core_go, METH_VARARGS, "Set the start, the measurement's start and the end."},
    {"run", (PyCFunction)Core_run, METH_O, "Wait for t0, then drive every connection until the run ends (GIL released)."},
    {"stop", (PyCFunction)Core_stop, METH_NOARGS, "End the window now."},
    {"deadline", (PyCFunction)Core_deadline, METH_NOARGS, "(measure from, end)."},
    {"counts", (PyCFunction)Core_counts, METH_NOARGS, "Measured counters and errors by code so far."},
    {"latency", (PyCFunction)Core_latency, METH_NOARGS, "Transaction latency so far: (buckets, max_us)."},
    {"kinds", (PyCFunction)Core_kinds, METH_NOARGS, "Statement latency per kind: {kind: (buckets, max_us)}."},
    {"queue", (PyCFunction)Core_queue, METH_O, "Open loop: arrivals due by now not started; None when closed."},
    {"backlog", (PyCFunction)Core_backlog, METH_NOARGS,
     "Open loop: the backlog that passed its bound (the run must end), or None."},
    {"fatal", (PyCFunction)Core_fatal, METH_NOARGS, "(code, message, sql) of the error that ended the run, or None."},
    {"failure", (PyCFunction)Core_failure, METH_NOARGS, "A failure of the core itself, or None."},
    {"connections", (PyCFunction)Core_connections, METH_NOARGS,
     "Per connection: (completed, in_flight_from, t_start, busy, done, last_end)."},
    {"close", (PyCFunction)Core_close, METH_NOARGS, "Close every connection."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "services.worker.driver.native._core.Core",
    .tp_basicsize = sizeof(CoreObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One load process's connections, driven in C.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Core_init,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_methods = Core_methods,
};

static PyMethodDef module_methods[] = {
    {"draw", core_draw, METH_VARARGS, "draw(program, random_state, events): the transactions a program draws."},
    {"arrivals", core_arrivals, METH_VARARGS, "arrivals(rate, start, random_state, n, before): intended starts."},
    {"bucket_of", core_bucket_of, METH_O, "The histogram bucket of a latency in microseconds."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_core", "The compiled load core (csrc/).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__core(void)
{
    /* mysql_init would do this on first use, but not thread-safely, and connections are opened
     * from a thread pool. */
    if (mysql_library_init(0, NULL, NULL)) {
        PyErr_SetString(PyExc_ImportError, "cannot initialise MariaDB Connector/C");
        return NULL;
    }
    if (PyType_Ready(&CoreType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    CoreError = PyErr_NewException("services.worker.driver.native._core.Error", NULL, NULL);
    if (!CoreError || PyModule_AddObjectRef(m, "Error", CoreError) < 0 ||
        PyModule_AddObjectRef(m, "Core", (PyObject *)&CoreType) < 0 ||
        PyModule_AddStringConstant(m, "client_version", mysql_get_client_info()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
