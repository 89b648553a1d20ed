"""Text from outside shown on a terminal: a server's error text, a spec's key, a name from an imported
file or a run's stored error is printed with its control characters escaped, never obeyed."""

from __future__ import annotations

import io

import pytest

from services.common import cli
from services.common.terminal import escape_controls, first_control
from services.scheduler.progress import Progress, ProgressLine, render

#: What a hostile server or file may hold: a colour change, a cursor move and a screen clear, a
#: carriage return that overwrites the line, a C1 control, and the bidi/format controls that
#: reorder or hide text (right-to-left override, isolate, zero-width space, Arabic letter mark, BOM).
HOSTILE = "a\x1b[31mred\x1b[2J\rover\x9bX\u202edcba\u2066i\u2069z\u200bw\u061cm\ufeffb\u2028l"


def test_every_control_is_shown_escaped_and_printable_text_is_kept():
    """Each control becomes its Python escape; letters of any script, emoji, a tab and a newline stay."""
    out = escape_controls(HOSTILE)
    assert out == ("a\\x1b[31mred\\x1b[2J\\x0dover\\x9bX\\u202edcba\\u2066i\\u2069z\\u200bw\\u061cm\\ufeffb"
                   "\\u2028l")
    assert all(ch.isprintable() for ch in out)
    kept = "Größe 中文 עברית 😀 — ok\ttab\nline"
    assert escape_controls(kept) == kept
    assert escape_controls("x\ny", keep="") == "x\\x0ay"


@pytest.mark.parametrize("ch", ["\x00", "\x1b", "\x7f", "\x85", "\u200e", "\u202e", "\u2066", "\u061c",
                                "\u200b", "\ufeff", "\u2028", "\u2029", "\U000e0001", "\u206e"])
def test_first_control_finds_each_kind(ch):
    """C0, DEL, C1, bidi marks, overrides and isolates, zero-width and format characters, line
    separators and tag characters are all controls."""
    assert first_control(f"ab{ch}c") == ch


def test_cli_errors_escape_a_servers_text(capsys):
    """An error message holding a server's text (a MySQL error, a broker's reason) prints as one
    `error:` line per line of the message, every escape sequence shown as text."""
    cli.error("cannot reach the results DB: (1045) " + HOSTILE + "\nsecond line \x1b]0;title\x07")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\u202e" not in err and "\r" not in err
    assert err.splitlines()[0].startswith("error: cannot reach the results DB: (1045) a\\x1b[31mred")
    assert err.splitlines()[1] == "error: second line \\x1b]0;title\\x07"


def test_rendered_output_is_written_escaped_to_stdout_and_files(capsys, tmp_path):
    """A rendered report (text, Markdown, CSV) holding a run's error text is escaped both on stdout
    and in the file it goes to, so a later `cat` is as safe; bytes (ODS) pass untouched."""
    cli.write_output(None, "run failed: " + HOSTILE + "\n")
    assert capsys.readouterr().out == "run failed: " + escape_controls(HOSTILE) + "\n"
    path = tmp_path / "r.txt"
    cli.write_output(str(path), HOSTILE)
    assert path.read_text() == escape_controls(HOSTILE)
    cli.write_output(str(path), b"\x1b\x00")
    assert path.read_bytes() == b"\x1b\x00"


def test_progress_notes_and_the_current_cell_are_escaped():
    """`submit --wait`'s progress: a note quoting the results DB's error, and the current cell, show
    their controls as text; only the line's own redraw sequence reaches the terminal."""
    stream = io.StringIO()
    line = ProgressLine(stream, tty=False)
    line.note("results DB away (" + HOSTILE + "); still waiting")
    assert "\x1b" not in stream.getvalue() and "\u202e" not in stream.getvalue()
    p = Progress(total=4, done=1, failed=0, cancelled=0, running=1, current="A\x1b[2Joltp", elapsed_s=1.0,
                 planned_run_s=1.0)
    assert "\x1b" not in render(p, 200) and "A\\x1b[2Joltp" in render(p, 200)
