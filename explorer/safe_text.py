"""Text from input (names, ids, values, file content, error messages) made safe to display.

Streamlit renders the text of `st.error`, `st.caption`, `st.markdown`... as Markdown with its
own extensions: `[x](url)` links, `![x](url)` images that the browser fetches, bare URLs,
`www.` and e-mail addresses turned into links, `:material/icon:` and `:red[...]` directives,
`$...$` math. `plain()` escapes every Markdown punctuation mark and puts an invisible word
joiner (U+2060) where the link and directive detectors look (after a `:` that a letter or `/`
follows, before an `@` after a word character, inside `www`), so input shows as the characters
it is; it also folds whitespace to one line and cuts it to a bounded length. Ordinary messages
("file.csv: row 2") keep their characters.
"""

from __future__ import annotations

import re

MAX_CHARS = 200
WORD_JOINER = "\u2060"
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&=^\"'])")
_WWW = re.compile(r"(?i)(w)(ww)")
_DIRECTIVE_COLON = re.compile(r":(?=[A-Za-z/\\])")      # :material/x:, :smile:, https://, mailto:x
_EMAIL_AT = re.compile(r"(?<=\w)@")


def shorten(text: object, limit: int = MAX_CHARS) -> str:
    """`text` on one line, at most `limit` characters (an ellipsis marks a cut)."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def plain(text: object, limit: int = MAX_CHARS) -> str:
    """Markdown that renders as the literal (shortened) text: no links, images, icons or styling."""
    escaped = _MARKDOWN_PUNCTUATION.sub(r"\\\1", shorten(text, limit))
    escaped = _DIRECTIVE_COLON.sub(":" + WORD_JOINER, escaped)
    escaped = _EMAIL_AT.sub(WORD_JOINER + "@", escaped)
    return _WWW.sub(r"\1" + WORD_JOINER + r"\2", escaped)

