"""Show untrusted text (model output, anything read from a trace) as plain text.

Control and escape characters are made visible, so text can never restyle a
terminal or move its cursor; callers wrap the result in `rich.text.Text` (or
print it without markup) so that brackets are never parsed as Rich markup.
"""

from __future__ import annotations

import unicodedata

_KEEP = {"\n", "\t"}


def visible(s: str, keep_newlines: bool = True) -> str:
    out = []
    for ch in s:
        if (ch in _KEEP and keep_newlines) or not _is_control(ch):
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{ord(ch):04x}")
    return "".join(out)


def _is_control(ch: str) -> bool:
    # Cc: C0/C1 controls incl. ESC and DEL; Cf: bidi overrides and other format chars
    return unicodedata.category(ch) in ("Cc", "Cf")
