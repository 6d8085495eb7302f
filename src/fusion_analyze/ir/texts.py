"""The report's sentences in both languages: one source per sentence and language, `templates/labels.yaml` `texts`.

Code that writes a sentence a report shows (a status note, an evidence line, why a callee is unknown) calls
`say(key, **args)`: the result is the English text, a `str` the JSON report keeps as it always did, that also
knows its key and arguments (`Said.spec`). A pattern's own words (`fused_in_model`, an inactive form's `when`)
are `literal({zh, en})`. `render/json.py` collects every such text of the report into its `texts` table
(English text -> spec), and the Markdown renderer says each one again in the report's language through
`Texts`. A text that is no `Said` (code, a condition, a file) is shown as it is.

An argument is a plain string (code, a name, a number: never translated), another `Said` (said in the same
language), or a list of either. In a sentence, `{name}` is the argument as it is and `{name:c}` marks it as
code: the Markdown shows it in backticks, the JSON's English text as it is. A list is joined with ", " when
it is code, with the sentence `_and` for `{name:and}`, else with "; ".
"""

from __future__ import annotations

import string
from functools import lru_cache
from typing import Any

LANGS = ("zh", "en")


class Said(str):
    """English text that knows its sentence (`spec`: {key, args}, {zh, en} or {join, items})."""

    __slots__ = ("spec",)
    spec: dict

    def __new__(cls, text: str, spec: dict) -> "Said":
        self = super().__new__(cls, text)
        self.spec = spec
        return self

    def __reduce__(self):  # pickled as itself (the passes are read in a child process)
        return (Said, (str(self), self.spec))


@lru_cache(maxsize=1)
def sentences() -> dict[str, dict[str, str]]:
    """labels.yaml `texts`: key -> {zh, en}."""
    from ..resources import data_dir, load_yaml

    data = load_yaml((data_dir("templates") / "labels.yaml").read_text(encoding="utf-8"))
    return data.get("texts") or {}


def _arg(value: Any) -> Any:
    if isinstance(value, Said):
        return value.spec
    if isinstance(value, (list, tuple)):
        return [_arg(v) for v in value]
    return value if isinstance(value, str) else str(value)


def say(key: str, /, **args: Any) -> Said:
    """The sentence `key` of labels.yaml `texts` with `args`, as its English text."""
    if key not in sentences():
        raise KeyError(f"templates/labels.yaml texts has no sentence `{key}`")
    spec = {"key": key, "args": {k: _arg(v) for k, v in args.items()}}
    return Said(render(spec, "en"), spec)


def literal(texts: dict) -> Said:
    """A text written in both languages ({zh, en}, a pattern file's words)."""
    return Said(texts["en"], {lang: texts[lang] for lang in LANGS})


def joined(items: list, sep: str) -> str:
    """`sep.join(items)`, keeping what each item says when one of them is a `Said`."""
    text = sep.join(items)
    if not any(isinstance(i, Said) for i in items):
        return text
    return Said(text, {"join": sep, "items": [_arg(i) for i in items]})


class _Formatter(string.Formatter):
    def __init__(self, lang: str, md: bool) -> None:
        self.lang, self.md = lang, md

    def format_field(self, value: Any, format_spec: str) -> str:
        code = format_spec == "c"
        if isinstance(value, list):
            if format_spec == "and":
                sep = sentences()["_and"][self.lang]
            else:
                sep = ", " if code else "; "
            return sep.join(self.format_field(v, format_spec) for v in value)
        if isinstance(value, dict):
            return render(value, self.lang, self.md)
        text = str(value)
        return code_span(text) if code and self.md else text


def code_span(text: str) -> str:
    """`text` as a Markdown code span (longer fences around a backtick inside)."""
    if not text:
        return text
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render(spec: dict, lang: str, md: bool = False) -> str:
    """The text of a spec in `lang`; `md`: code arguments in backticks."""
    if "key" in spec:
        sentence = sentences()[spec["key"]]
        return _Formatter(lang, md).vformat(sentence.get(lang) or sentence["en"], (), spec.get("args") or {})
    if "join" in spec:
        return spec["join"].join(render(i, lang, md) if isinstance(i, dict) else i for i in spec["items"])
    return spec.get(lang) or spec.get("en") or ""


def table(data: Any) -> dict[str, dict]:
    """Every `Said` in the report data (dicts, lists): English text -> spec (render/json.py's `texts`)."""
    out: dict[str, dict] = {}
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, Said):
            out.setdefault(str(x), x.spec)
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return out


class Texts:
    """Says a report's texts in one language: a `Said`, or a string the report's `texts` table holds, again in
    `lang`; any other string as it is."""

    def __init__(self, known: dict | None, lang: str, md: bool = True) -> None:
        self.known, self.lang, self.md = known or {}, lang, md

    def __call__(self, text: Any) -> Any:
        if isinstance(text, Said):
            return render(text.spec, self.lang, self.md)
        if isinstance(text, str):
            spec = self.known.get(text)
            if spec is not None:
                return render(spec, self.lang, self.md)
        return text
