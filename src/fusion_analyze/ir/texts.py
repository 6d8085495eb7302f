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

    def in_language(self, lang: str) -> str:
        """The sentence in `lang` (plain text: code as it is), as stderr says it (errors.warn, errors.note)."""
        return render(self.spec, lang)


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
    plain = all(type(v) is str for v in args.values())
    if plain:  # most sentences are said again and again with the same plain arguments: their text is kept
        memo = (key, tuple(args.items()))
        text = _SAID.get(memo)
        if text is not None:
            return Said(text, {"key": key, "args": args})
    sentence = sentences().get(key)
    if sentence is None:
        raise KeyError(f"templates/labels.yaml texts has no sentence `{key}`")
    spec = {"key": key, "args": args if plain else {k: _arg(v) for k, v in args.items()}}
    text = _say(sentence.get("en") or sentence["en"], spec["args"], "en", False)
    if plain:
        if len(_SAID) >= 50_000:
            _SAID.clear()
        _SAID[memo] = text
    return Said(text, spec)


_SAID: dict[tuple, str] = {}  # (key, plain arguments) -> the English text


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


# A sentence as its parts, parsed once per text (a report says tens of thousands of sentences): (literal text,
# field name or None, format spec), as string.Formatter.parse gives them; None for a sentence with what _say does
# not do itself (a conversion, an attribute or index, a nested field, a positional field), said by _Formatter.
_PARTS: dict[str, tuple | None] = {}


def _parts(template: str) -> tuple | None:
    try:
        return _PARTS[template]
    except KeyError:
        pass
    parts: list | None = []
    for literal_text, name, spec, conversion in string.Formatter().parse(template):
        if name is not None and (conversion is not None or not name or name.isdigit() or "." in name or "[" in name
                                 or "{" in (spec or "")):
            parts = None
            break
        parts.append((literal_text, name, spec or ""))
    found = _PARTS[template] = tuple(parts) if parts is not None else None
    return found


def _say(template: str, args: dict, lang: str, md: bool) -> str:
    """`_Formatter(lang, md).vformat(template, (), args)`, the same text, without string.Formatter's per-field calls."""
    parts = _parts(template)
    if parts is None:
        return _Formatter(lang, md).vformat(template, (), args)
    out = []
    for literal_text, name, spec in parts:
        if literal_text:
            out.append(literal_text)
        if name is not None:
            out.append(_field(args[name], spec, lang, md))
    return "".join(out)


def _field(value: Any, format_spec: str, lang: str, md: bool) -> str:
    """_Formatter.format_field."""
    if isinstance(value, str):
        return code_span(value) if md and format_spec == "c" else value
    code = format_spec == "c"
    if isinstance(value, list):
        if format_spec == "and":
            sep = sentences()["_and"][lang]
        else:
            sep = ", " if code else "; "
        return sep.join(_field(v, format_spec, lang, md) for v in value)
    if isinstance(value, dict):
        return render(value, lang, md)
    text = str(value)
    return code_span(text) if code and md else text


def render(spec: dict, lang: str, md: bool = False) -> str:
    """The text of a spec in `lang`; `md`: code arguments in backticks."""
    if "key" in spec:
        sentence = sentences()[spec["key"]]
        return _say(sentence.get(lang) or sentence["en"], spec.get("args") or {}, lang, md)
    if "join" in spec:
        return spec["join"].join(render(i, lang, md) if isinstance(i, dict) else i for i in spec["items"])
    return spec.get(lang) or spec.get("en") or ""


def table(data: Any) -> dict[str, dict]:
    """Every `Said` in the report data (dicts, lists): English text -> spec (render/json.py's `texts`)."""
    out: dict[str, dict] = {}
    stack = [data]
    pop, extend = stack.pop, stack.extend
    while stack:
        x = pop()
        t = type(x)
        if t in _LEAVES:  # most of a report: plain strings and numbers (checked by exact type, the rest below)
            continue
        if t is dict:
            extend(x.values())
        elif t is list:
            extend(x)
        elif isinstance(x, Said):
            out.setdefault(str(x), x.spec)
        elif isinstance(x, dict):
            extend(x.values())
        elif isinstance(x, (list, tuple)):
            extend(x)
    return out


_LEAVES = frozenset({str, int, float, bool, type(None)})


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
