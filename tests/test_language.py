"""The language layer (``agentkit.language``): numbers in digits, words and numerals, tokens
and spans of scripts without spaces, detection, the question templates — and that no word
list, stop list or script range lives anywhere else in agentkit."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest
from agentkit import language
from agentkit.planning.answers import value_of

ROOT = Path(__file__).resolve().parents[1] / "agentkit"


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("sixty", 60),
        ("twenty", 20),
        ("seventy five", 75),
        ("sixty-five", 65),
        ("two hundred", 200),
        ("two hundred and five", 205),
        ("three thousand", 3000),
        ("three thousand five hundred", 3500),
        ("four million", 4_000_000),
        ("a dozen", 12),
        ("1,250", 1250),
        ("六十", 60),
        ("两百", 200),
        ("十二", 12),
        ("三千五百", 3500),
        ("一万", 10_000),
        ("五万三千", 53_000),
        ("二零二六", 2026),
    ],
)
def test_a_number_written_any_way_is_that_number(text: str, number: float) -> None:
    assert language.parse_number(text) == number
    assert number in language.numbers_in(f"set it to {text} please")


def test_numbers_with_units_percents_scales_and_lists() -> None:
    assert {6.0} <= language.numbers_in("a shelf 6cm high")
    assert {5.0, 0.05} <= language.numbers_in("a 5% discount")
    assert {50.0, 50_000_000.0} <= language.numbers_in("50 million people")
    assert {5.0, 50_000.0} <= language.numbers_in("预算5万")
    assert {200.0, 300.0, 400.0} <= language.numbers_in("[200,300,400]")
    assert language.numbers_in("1,000,000") == {1_000_000.0}
    assert 3.0 not in language.numbers_in("an mp3 file")


def test_a_phrase_with_other_words_is_no_number() -> None:
    assert language.parse_number("sixty cats") is None
    assert language.parse_number("todo") is None


def test_language_is_detected_from_the_latest_text_with_letters() -> None:
    assert language.detect(["删掉第 2 条", "hello"]) == "zh"
    assert language.detect(["2", "delete it"]) == "en"
    assert language.detect(["メモを追加して"]) == "zh"  # written without spaces


def test_unspaced_runs_give_spans_and_quotes_keep_a_value_whole() -> None:
    spans = language.spans("记一条笔记 'Acme Ltd.' since", 6, language.merged("function_words"))
    assert "笔记" in spans and "Acme Ltd" in spans
    assert not any("since" in s and "Acme" in s for s in spans)
    assert "メモ" in language.spans("メモを追加", 6, ())


@pytest.mark.parametrize(
    ("answer", "value"),
    [
        ("todo", "todo"),
        ("it's todo", "todo"),
        ("call it weekly review.", "weekly review"),
        ("It is called Groceries", "Groceries"),
        ('"TBD: launch plan"', "TBD: launch plan"),
        ("叫周报", "周报"),
        ("标题是 2046", "2046"),
        ("itself", "itself"),
    ],
)
def test_an_answer_s_value_is_the_answer_without_its_filler(answer: str, value: str) -> None:
    assert value_of(answer) == value


def test_questions_are_templates_per_language() -> None:
    en = language.ask_arguments("add_note", "Save a note.", ["title", "body_text"], "en")
    assert en.startswith("Before I run add_note (Save a note)") and "title and body text" in en
    zh = language.ask_arguments("add_note", "", ["title", "body"], "zh")
    assert "title、body" in zh and "请告诉我" in zh
    assert "Shall I go ahead?" in language.consent("add_note", "{}", "Saves.", "en")
    assert "要继续吗" in language.consent("add_note", "{}", "", "zh")


def test_every_language_is_one_file() -> None:
    codes = {lang.code for lang in language.LANGUAGES}
    assert codes == {"en", "zh"}
    files = {p.stem for p in (ROOT / "language").glob("*.py") if not p.stem.startswith("_")}
    assert files == codes
    for lang in language.LANGUAGES:  # each has its question and consent templates
        for kind in ("ask_arguments", "consent", "which_tool"):
            assert (ROOT / "language" / "prompts" / f"{kind}.{lang.code}.md").is_file()


# -- no word list, stop list or script range outside the language layer ----------------------

_HAN = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_RANGE = re.compile(r"\\u4e00|\\u3400|\\u9fff|\\u3040|\\U00020000|0x4E00|0x3400", re.IGNORECASE)
_LIST_NAMES = re.compile(
    r"^\s*_?(?:STOP_WORDS|STOP_CHARS|FUNCTION_WORDS|PLACEHOLDER_WORDS|NUMBER_WORDS|"
    r"SMALL_TALK_EN|SMALL_TALK_ZH|CONSTRAINT_EN|CONSTRAINT_ZH|MONTHS|COMMON_FIRST)\b[^=\n]*="
    r"\s*(?:frozenset\(\s*)?(?:[({\[]\s*)?(?:r|f|rf)?[\"']",
    re.MULTILINE,
)
#: files allowed a Han character in code, and why
_ALLOWED = {
    # the keyword list of the agent ``agentkit init`` writes: data of that agent's config
    "scaffold.py",
}


def _code_strings(source: str) -> list[tuple[int, str]]:
    """The string literals of *source* that are not docstrings."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    found = []
    for index, token in enumerate(tokens):
        if token.type != tokenize.STRING:
            continue
        before = index - 1
        while before >= 0 and tokens[before].type in (tokenize.NL, tokenize.COMMENT):
            before -= 1
        docstring = before < 0 or tokens[before].type in (
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENCODING,
        )
        if not docstring:
            found.append((token.start[0], token.string))
    return found


def test_no_word_list_or_script_range_lives_outside_the_language_layer() -> None:
    problems = []
    for path in sorted(ROOT.rglob("*.py")):
        if "language" in path.relative_to(ROOT).parts[:1]:
            continue
        source = path.read_text(encoding="utf-8")
        for line, text in _code_strings(source):
            if (_HAN.search(text) and path.name not in _ALLOWED) or _RANGE.search(text):
                problems.append(f"{path.relative_to(ROOT)}:{line}: {text[:60]}")
        problems += [
            f"{path.relative_to(ROOT)}: {m.group(0)[:60]}" for m in _LIST_NAMES.finditer(source)
        ]
    assert not problems, "\n".join(problems)


def test_the_check_finds_what_it_looks_for() -> None:
    assert _code_strings('x = "的了是"\n') and _HAN.search(_code_strings('x = "的了是"\n')[0][1])
    assert _LIST_NAMES.search('_STOP_WORDS = frozenset(\n    """a an the""".split())')
    assert _LIST_NAMES.search('_MONTHS = (\n    "january|february"\n)')
    assert not _LIST_NAMES.search("_STOP_WORDS = frozenset(\n    w for lang in LANGUAGES)")
    assert not _code_strings('"""的 docstring"""\n')
