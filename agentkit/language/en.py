# ruff: noqa: SIM905 - word lists read best as text
"""English: the words agentkit reads and the number words it counts."""

from __future__ import annotations

from agentkit.language._lang import Language

__all__ = ["LANGUAGE"]

_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()

LANGUAGE = Language(
    code="en",
    name="English",
    stop_words=frozenset(
        """a an the and or but of to for from in on at by with about as into than then
        i me my mine we our us you your it its this that these those there here
        is are was were be been being am do does did done have has had having
        can could would should will shall may might must please pls kindly just also
        what which who whom whose when where why how all any some each every no not
        so if very really too now up out get got let lets make s t re ve ll d
        e g eg id ids new one returns return optional""".split()
    ),
    function_words=frozenset(
        """a an the to of on in at by for from with about into onto over under within without
        and against between per via as or but nor so if then than that this these those is
        are was were be been being do does did have has had will would can could should may
        might must i me my we us our you your he him his she her it its they them their what
        which who whom whose when where why how please also""".split()
    ),
    fact_stop_words=frozenset(
        """the and for with that this from have has had are was were will would should could can
        not but any all our your their his her its they them you she him who whom which what
        when where why how into onto over under about after before than then there here been
        being also just only very more most some such each other both same own too out off
        per via use used using user users assistant wants want wanted said says likes like
        prefers prefer""".split()
    ),
    digits={word: value for value, word in enumerate(_UNITS)}
    | {word: 20 + 10 * index for index, word in enumerate(_TENS)},
    multipliers={"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 10**9},
    counts={"dozen": 12},
    confirmations=frozenset(
        {"yes", "y", "ok", "okay", "sure", "go ahead", "confirm", "yes please", "do it"}
    ),
    refusals=frozenset({"no", "n", "nope", "cancel", "stop", "don't", "dont", "no thanks"}),
    success_claims=(
        r"\b(?:done|success(?:ful(?:ly)?)?|succeeded|created|saved|added|deleted|removed|"
        r"updated|completed|stored|set up|all set)\b"
    ),
    failure_claims=(
        r"\b(?:fail(?:ed|s|ure)?|error|could ?n[o']t|cannot|can't|unable|not (?:been )?"
        r"(?:created|saved|added|deleted|removed|updated|done)|did ?n[o']t|problem|sorry)\b"
    ),
    links=frozenset({"is", "are", "=", "to", "as"}),
    none_claims=(
        r"\b(?:no \w+ (?:found|yet|saved|available)|(?:there are|there is|you have|i have) "
        r"(?:no|none)|nothing (?:found|saved|yet|here)|none found|not any)\b"
    ),
    placeholders=r"\[(?:your|user|insert|name|tool|the user)[^\]\n]{0,40}\]",
    retry_words=("retry", "try again", "start over", "from scratch"),
    switch_phrases=(
        "never mind",
        "nevermind",
        "forget it",
        "new task",
        "something else",
        "instead",
    ),
    small_talk=(
        r"good (?:morning|afternoon|evening|night|day)",
        r"morning",
        r"evening",
        r"hi+",
        r"hello+",
        r"hey+",
        r"hiya",
        r"howdy",
        r"yo",
        r"greetings",
        r"what'?s up",
        r"sup",
        r"thanks?(?: you)?(?: (?:so|very) much| a lot| a bunch| again)?",
        r"thx",
        r"ty",
        r"cheers",
        r"(?:i )?appreciate (?:it|that|your help)",
        r"much appreciated",
        r"(?:good)?bye(?: bye)?",
        r"see (?:you|ya)(?: later| soon| around| tomorrow)?",
        r"later",
        r"take care",
        r"have a (?:nice|good|great) (?:day|evening|night|one|weekend)",
        r"nice to (?:meet|see) you",
        r"how (?:are|r) (?:you|u)(?: doing)?(?: today)?",
        r"how'?s it going",
        r"how is it going",
        r"how have you been",
        r"who (?:are|made|built|created) you",
        r"what (?:are|is) your (?:name|purpose|job)",
        r"what'?s your (?:name|purpose|job)",
        r"what are you",
        r"what kind of (?:assistant|bot|agent) are you",
        r"what (?:can|do) you do(?: for me)?",
        r"what are you (?:able to do|for|good at)",
        r"what can you help(?: me)? with",
        r"how can you help(?: me)?",
        r"what do you do",
        r"are you (?:a |an )?(?:bot|robot|human|ai|person|real)",
        r"ok(?:ay)?",
        r"cool",
        r"great",
        r"awesome",
        r"perfect",
        r"nice",
        r"alright",
        r"all right",
        r"that'?s (?:all|it|great|fine|good)",
        r"for now",
        r"no(?:thing)? (?:else|more)",
        r"you",
        r"there",
        r"again",
        r"too",
        r"friend",
        r"buddy",
        r"everyone",
        r"all",
        r"and",
        r"oh",
        r"ah",
        r"well",
        r"so",
        r"really",
        r"very much",
        r"today",
    ),
    actions={
        "~list": ("list", "show", "display", "view", "see", "read", "get", "check"),
        "~add": ("add", "create", "new", "make", "register"),
        "~delete": ("delete", "remove", "erase", "drop"),
        "~update": ("update", "change", "edit", "modify", "rename", "switch", "replace"),
        # a request about something in particular looks for it: "notes about the gym"
        "~search": ("search", "find", "look", "lookup", "query", "about", "mention", "contain"),
        "~save": ("save", "store", "remember", "memorize"),
    },
    phrases={"get rid of": "remove", "got rid of": "remove"},
    question=r"^\s*(?:what|which|how many|how much|do i have|is there|are there|does|do)\b|\?\s*$",
    request=r"^\s*(?:can|could|would|will) you\b",
    placeholder_words=frozenset(
        {
            "placeholder",
            "example",
            "sample",
            "tbd",
            "todo",
            "tbc",
            "unknown",
            "undefined",
            "n/a",
            "na",
            "xxx",
            "xxxx",
            "foo",
            "bar",
            "baz",
            "lorem ipsum",
            "something",
            "somewhere",
            "someone",
            "anything",
            "whatever",
            "insert here",
        }
    ),
    answer_fillers=(
        "it's called",
        "it is called",
        "call it",
        "name it",
        "title it",
        "it's",
        "it is",
        "that's",
        "that is",
        "the answer is",
        "make it",
        "let's say",
    ),
    constraint=(
        r"\b(?:no|not|never|must|mustn't|only|always|avoid|without|don't|do not|cannot|can't|"
        r"won't|shouldn't|at most|at least|prefer|prefers|preferred|i like|i love|i hate|"
        r"i dislike|i'd rather|i would rather|required?|requires)\b"
    ),
    goal=(
        r"\b(?:i need|i want|i'd like|i would like|help me|please|can you|could you|let's|"
        r"we need|i'm trying to|i am trying to|my goal|i plan to|set up|draft|plan)\b"
    ),
    leading_filler=(
        r"(?:hi|hello|hey|ok|okay|yes|yeah|sure|nice|great|thanks|thank you|so|well)\b[\s,.!]*"
    ),
    common_first_words=frozenset(
        """a an the i i'm i'll i've i'd we we're we'll our my me you your it it's its this that
        these those there here he she they them his her their one two also and but or so then
        yes no not ok okay nice great good fine thanks thank sure please hi hello hey well now
        just maybe what when where which who why how can could would should will shall do does
        did is are was were be been let let's keep make use draft send tell show give add put
        set get go after before since because if as at by for from in into of on to with
        without about all any each every some many much more most only never always our
        again still another first next last new old""".split()
    ),
    date=(
        rf"\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
        rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\b"
    ),
)
