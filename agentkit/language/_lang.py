"""What one language contributes: its word lists and the texts agentkit says in it.

Why a record: every rule that reads words (which tool a request names, whether a value was
said, whether a reply confirms) reads them from one :class:`Language` per file
(:mod:`agentkit.language.en`, :mod:`agentkit.language.zh`), so adding a language is adding
one file and no word list lives anywhere else in agentkit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Language"]


@dataclass(frozen=True, slots=True)
class Language:
    """One language's word knowledge. Lists hold case-folded words (or, for a language
    written without spaces, substrings)."""

    #: the language's code (``en``, ``zh``): the suffix of its question templates
    code: str
    #: its name, as a prompt tells a model to write in it
    name: str = ""
    #: whether its words are written without spaces between them (matched as substrings)
    unspaced: bool = False
    #: words that say nothing about which tool is meant (the tool ranking's stop list);
    #: for an unspaced language, characters too common to tell tools apart
    stop_words: frozenset[str] = frozenset()
    #: words a value neither starts nor ends with (articles, prepositions, pronouns …)
    function_words: frozenset[str] = frozenset()
    #: words too common to ground a summarised fact (memory's fact check)
    fact_stop_words: frozenset[str] = frozenset()
    #: number words and their values (``sixty`` → 60; ``六`` → 6)
    digits: Mapping[str, int] = field(default_factory=dict)
    #: words that multiply what comes before them (``hundred`` → 100, ``万`` → 10000)
    multipliers: Mapping[str, int] = field(default_factory=dict)
    #: a word that counts as a number on its own (``dozen`` → 12)
    counts: Mapping[str, int] = field(default_factory=dict)
    #: the whole of a short reply that says yes / no
    confirmations: frozenset[str] = frozenset()
    refusals: frozenset[str] = frozenset()
    #: phrases anywhere in a message: start again / change the subject
    retry_words: tuple[str, ...] = ()
    switch_phrases: tuple[str, ...] = ()
    #: the reply that approves / refuses a consent request (a simulated user's)
    approve_reply: str = "yes"
    reject_reply: str = "no"
    #: regular expressions for a reply that claims something succeeded / failed
    success_claims: str = ""
    failure_claims: str = ""
    #: a regular expression for an answer that says nothing was found (*no notes*, 没有)
    none_claims: str = ""
    #: a regular expression for a template placeholder left in a text (*[Your Name]*)
    placeholders: str = ""
    #: words that link a label to its value in an answer (``key is …``, ``名字是…``)
    links: frozenset[str] = frozenset()
    #: regular-expression pieces small talk is made of (greetings, thanks, who are you)
    small_talk: tuple[str, ...] = ()
    #: generic actions (``~list``, ``~add`` …) and the words that say them
    actions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: set phrases whose words say something else one by one (``get rid of`` → remove)
    phrases: Mapping[str, str] = field(default_factory=dict)
    #: a regular expression that makes a message a question (``which …``, ``…吗``)
    question: str = ""
    #: a regular expression for how a sentence that asks something ends (``…吗``)
    question_end: str = ""
    #: a regular expression for a request that is not a question (``can you …``)
    request: str = ""
    #: words that stand for a value rather than being one, when nobody typed them
    placeholder_words: frozenset[str] = frozenset()
    #: what an answer may start with before its value (``it's``, ``call it``, ``叫``)
    answer_fillers: tuple[str, ...] = ()
    #: a regular expression for a constraint or a preference the user states
    constraint: str = ""
    #: a regular expression for a goal the user states (``I need``, ``帮我``)
    goal: str = ""
    #: a regular expression for the small words a message opens with (``ok``, ``好的``)
    leading_filler: str = ""
    #: capitalised first words that are not names
    common_first_words: frozenset[str] = frozenset()
    #: how a list of names is written: ``a, b and c`` / ``a、b、c``
    list_separator: str = ", "
    list_last: str = " and "
    #: a regular expression for a date written in the language's words (*March 14*, 3月14日)
    date: str = ""
