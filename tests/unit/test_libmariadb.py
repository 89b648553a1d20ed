"""The ctypes view of libmariadb must match the C library's layout, or every bound value is garbage."""

import ctypes

import pytest

from services.worker.driver.native import libmariadb as mc


def test_bind_matches_connector_c_3_layout():
    # Offsets from MariaDB Connector/C 3.x's mariadb_stmt.h on 64-bit Linux (checked with
    # offsetof against libmariadb-dev 10.11): a shifted field binds the wrong buffer.
    assert ctypes.sizeof(mc.Bind) == 112
    assert mc.Bind.length.offset == 0
    assert mc.Bind.is_null.offset == 8
    assert mc.Bind.buffer.offset == 16
    assert mc.Bind.buffer_length.offset == 64
    assert mc.Bind.buffer_type.offset == 96
    assert mc.Bind.is_unsigned.offset == 101


def test_the_library_loads_and_says_how_to_install_it_when_it_does_not(monkeypatch):
    assert mc.library().mysql_stmt_execute_start is not None
    monkeypatch.setattr(mc, "_libs", None)
    monkeypatch.setattr(mc.ctypes.util, "find_library", lambda name: "libmariadb-missing.so.9")
    with pytest.raises(mc.ClientLibraryError, match="libmariadb3"):
        mc.library()


def test_statement_rebinds_only_when_a_value_outgrows_its_buffer(monkeypatch):
    binds = []
    st = mc.Statement(handle=0, nparams=2, has_result=False)
    monkeypatch.setattr(mc.Statement, "_bind_one", lambda self, i, v, real=mc.Statement._bind_one: (binds.append(i), real(self, i, v)))
    monkeypatch.setattr(mc, "_load", lambda: (type("L", (), {"mysql_stmt_bind_param": staticmethod(lambda h, a: 0)})(), None))
    st.set((7, "abc"))
    assert binds == [0, 1]
    st.set((8, "x" * 200))  # fits the first buffer (256 bytes)
    assert binds == [0, 1]
    st.set((9, "y" * 300))
    assert binds == [0, 1, 1]
    buf, length, _ = st._cells[1]
    assert buf.raw[:length.value] == b"y" * 300 and st._cells[0].value == 9
