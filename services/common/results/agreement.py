"""Agreement with the server: whether the client's count of a measured window's transactions
matches the server's own count (SHOW GLOBAL STATUS, read on a connection that does not queue
behind the load), so a run whose client miscounts is marked rather than believed.

Rule: the counts may differ by max(``TOLERANCE``, in-flight / server count) of the server's
count. In-flight transactions (begun, not finished at the window's end) are counted by one side
and not yet by the other; the native driver reports them (``window.in_flight_at_end``), sysbench
does not (0). Pure.
"""

from __future__ import annotations

from services.common.messages.results import ServerAgreement

#: The share by which the counts may differ whatever is in flight: interpolating the server's
#: counters at the window's edges between samples half a second apart costs a fraction of this.
TOLERANCE = 0.02


def assess(client_transactions: int, server_transactions: int | None, *, in_flight: int = 0) -> ServerAgreement | None:
    """The agreement of the client's and the server's counts; None when the server's count is n/a,
    or when neither side counted anything."""
    if server_transactions is None or (server_transactions == 0 and client_transactions == 0):
        return None
    if min(client_transactions, server_transactions, in_flight) < 0:
        raise ValueError(f"counts must be >= 0, got client {client_transactions}, server {server_transactions} "
                         f"and in-flight {in_flight}")
    # A server that counted nothing while the client counted some disagrees by the client's count.
    base = max(server_transactions, 1)
    off = abs(client_transactions - server_transactions) / base
    tolerance = max(TOLERANCE, in_flight / base)
    return ServerAgreement(client_transactions=client_transactions, server_transactions=server_transactions,
                           in_flight=in_flight, off=round(off, 6), tolerance=round(tolerance, 6),
                           agrees=off <= tolerance)
