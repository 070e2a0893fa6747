"""The one escaping rule (`memtui.text.shown`): what a terminal could act on is written as
its escape, everything else stays as it is, long values are cut."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from memtui.text import LIMIT, shown


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("gpu01", "gpu01"),
        ("évaluer 日本語 ünïcode", "évaluer 日本語 ünïcode"),  # letters of any script stay
        ("a\u00a0b\u3000c", "a\u00a0b\u3000c"),  # other spaces are harmless
        ("evil\x1b[2Jhost\r\n\x9b", "evil\\x1b[2Jhost\\r\\n\\x9b"),
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
        ("admin\u202etxt.exe", "admin\\u202etxt.exe"),  # a right-to-left override
        ("\u2066a\u2069\u200b\u200d\ufeff\u2060", "\\u2066a\\u2069\\u200b\\u200d\\ufeff\\u2060"),
        ("line\u2028break", "line\\u2028break"),
        ("bad\udcffbyte", "bad\\udcffbyte"),  # surrogateescape: print() would raise
    ],
)
def test_what_a_terminal_could_act_on_is_escaped(raw: str, expected: str) -> None:
    assert shown(raw) == expected


def test_every_control_format_and_separator_character_is_escaped() -> None:
    kept = [
        f"U+{cp:04X}"
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)) in ("Cc", "Cf", "Cs", "Zl", "Zp")
        and shown(chr(cp)) == chr(cp)
    ]
    assert kept == []


def test_long_values_are_cut_and_other_values_become_text() -> None:
    assert shown("x" * LIMIT) == "x" * LIMIT
    cut = shown("x" * 5000)
    assert len(cut) == LIMIT and cut.endswith("…")
    assert len(shown("\x1b" * 5000)) == LIMIT  # escapes count in the cut
    assert shown("a long host name", 6) == "a lon…"
    assert shown(42) == "42" and shown(None) == "None"
