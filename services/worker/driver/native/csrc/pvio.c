/* How a connection waits for a reply. libmariadb's socket read first tries a recv that does not
 * wait, and only when it finds nothing (the reply to a statement just sent is never there yet)
 * polls and receives again: three system calls per reply where one would do. A connection's
 * methods are swapped for a copy that waits in the recv itself (blocking calls) or, in the epoll
 * loop, skips the first try after a statement is sent (the loop's epoll_wait, which runs anyway,
 * waits instead). The server sees the same bytes; only the client's system calls change. */
#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include "core.h"
#include <ma_pvio.h> /* after mysql.h, whose types it uses */

static PVIO_METHODS library, fast;
static const PVIO_METHODS *library_at;
/* Connections open on several threads at once (core.py's open). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The connection whose next non-blocking read is skipped. Only the loop's thread starts
 * statements and reads without blocking (connections open with blocking reads), so a plain
 * static does; a thread-local one costs a __tls_get_addr call per read in a shared object. */
static MARIADB_PVIO *skip_next;

static ssize_t sleeping_read(MARIADB_PVIO *pvio, uchar *buf, size_t len)
{
    my_socket fd;
    /* A read timeout needs libmariadb's poll; the core sets none, so this is for safety. */
    if (pvio->timeout[PVIO_READ_TIMEOUT] > 0 || library.get_handle(pvio, &fd))
        return library.read(pvio, buf, len);
    ssize_t r;
    do
        r = recv(fd, buf, len, 0);
    while (r < 0 && errno == EINTR);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return library.read(pvio, buf, len); /* the socket does not block after all */
    return r;
}

static ssize_t skipping_async_read(MARIADB_PVIO *pvio, uchar *buf, size_t len)
{
    if (pvio == skip_next) {
        /* "Nothing yet": libmariadb returns MYSQL_WAIT_READ and the loop waits for EPOLLIN
         * (level-triggered, so a reply already there is reported at once). */
        skip_next = NULL;
        errno = EAGAIN;
        return -1;
    }
    return library.async_read(pvio, buf, len);
}

static void copy_methods(void)
{
    fast = library;
    if (library.read && library.get_handle)
        fast.read = sleeping_read;
    if (library.async_read)
        fast.async_read = skipping_async_read;
}

void pvio_speed_up(MYSQL *m)
{
    MARIADB_PVIO *pvio = m->net.pvio;
    if (!pvio || !pvio->methods || pvio->ctls)
        return; /* TLS reads through OpenSSL, which keeps libmariadb's own methods */
    pthread_mutex_lock(&lock);
    if (!library_at) {
        /* Every plain TCP or unix-socket connection shares the socket plugin's one table. */
        library = *pvio->methods;
        library_at = pvio->methods;
        copy_methods();
    }
    int ours = pvio->methods == library_at;
    pthread_mutex_unlock(&lock);
    if (ours)
        pvio->methods = &fast;
}

void pvio_skip_first_read(MYSQL *m)
{
    MARIADB_PVIO *pvio = m->net.pvio;
    if (pvio && pvio->methods == &fast)
        skip_next = pvio;
}
