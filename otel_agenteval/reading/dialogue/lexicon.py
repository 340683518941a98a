"""What a turn says: the agent asks for agreement, the user affirms or refuses.

Built-in words in English, French, German, Spanish, Portuguese and Italian; a policy adds its own
(``confirmation.lexicon``). An affirmation counts wherever it stands in the reply ("Everything
looks correct. Yes, …"); a negation just before it turns it into a refusal ("don't proceed"), and
only then: "Yes, please cancel it" is a yes. A reply that opens with a refusal ("No, …") is a no; "no extra bags" further on is not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ...policy.sections import Lexicon

AFFIRM = (
    # en
    "yes", "yeah", "yep", "yup", "sure", "ok", "okay", "confirm", "confirmed", "confirming", "correct",
    "go ahead", "proceed", "please do", "do it", "sounds good", "sounds great", "looks good", "looks great",
    "looks perfect", "looks correct", "looks fine", "all good", "perfect", "agreed", "i agree", "absolutely",
    "of course", "that's right", "that is right", "fine with", "that works", "approved", "approve",
    "go for it", "let's do it", "let's do that", "let's go ahead", "let's proceed", "please do so", "that's fine",
    "works for me", "book it", "sounds perfect", "looks right", "good to go", "happy to proceed",
    # fr
    "oui", "d'accord", "allez-y", "vas-y", "c'est bon", "je confirme", "confirmé", "bien sûr", "volontiers",
    # de
    "ja", "jawohl", "genau", "einverstanden", "bestätige", "bestätigt", "in ordnung", "gerne", "machen sie",
    # es
    "sí", "claro", "de acuerdo", "adelante", "confirmo", "vale", "por supuesto", "hágalo", "proceda",
    # pt
    "sim", "pode seguir", "pode prosseguir", "prossiga", "com certeza", "de acordo", "confirmado",
    # it
    "sì", "certo", "va bene", "d'accordo", "procedi", "confermo", "confermato", "volentieri",
)
OPENS_REFUSAL = (  # a no when it opens the reply: "No, don't do that."
    "no", "nope", "nah", "don't", "do not", "stop", "wait", "non", "nein", "não", "nunca", "mai",
)
REFUSE = (  # a no wherever it stands
    "hold on", "never mind", "not now", "not yet", "rather not", "changed my mind", "pas maintenant",
    "attendez", "warten sie", "espere", "aspetta",
)
NOT_REFUSAL = ("no problem", "no worries", "no rush", "non-refundable", "no later than")
NEGATE = (
    "not", "don't", "do not", "dont", "never", "no", "n't", "ne", "pas", "nicht", "kein", "keine", "não",
    "non", "nunca", "mai",
)
ASK = (
    # en
    "confirm", "proceed", "go ahead", "shall i", "should i", "would you like me to", "do you want me to",
    "would you like to", "do you want to", "is this correct", "is that correct", "is everything correct",
    "are you sure", "do you agree", "authorize", "authorise", "approve",
    # fr
    "confirmez", "confirmer", "voulez-vous", "souhaitez-vous", "dois-je", "puis-je",
    # de
    "bestätigen", "soll ich", "möchten sie", "wollen sie",
    # es
    "confirma", "confirmar", "desea", "quiere que", "procedo",
    # pt
    "deseja", "quer que", "posso prosseguir",
    # it
    "conferma", "confermare", "desidera", "vuole che",
)


_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")


INFORM = (  # the agent asks for something: the user's next turn answers it, it is no new request
    "please provide", "let me know", "please specify", "please tell", "please share", "please choose",
    "please select", "indiquez", "précisez", "veuillez fournir", "teilen sie", "geben sie", "nennen sie",
    "indique", "proporcione", "informe", "indichi", "mi dica", "fornisca",
)


def _alternation(words: Iterable[str]) -> str:
    ordered = sorted({w.casefold().strip() for w in words if w.strip()}, key=len, reverse=True)
    return "|".join(re.escape(w).replace("\\ ", r"\s+").replace("'", "['’]") for w in ordered)


def _pattern(words: Iterable[str]) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w'’])(?:{_alternation(words)})(?![\w'’])")


class Words:
    """The compiled lexicon: built-in words plus a policy's own."""

    __slots__ = ("affirm", "ask", "inform", "negated", "not_refusal", "opens_refusal", "refuse")

    def __init__(self, extra: Lexicon | None = None) -> None:
        extra = extra or Lexicon()
        self.affirm = _pattern((*AFFIRM, *extra.affirm))
        self.ask = _pattern((*ASK, *extra.ask))
        self.inform = _pattern(INFORM)
        self.refuse = _pattern((*REFUSE, *extra.refuse))
        negators = _alternation((*NEGATE, *extra.negate))
        # a negation up to three words before an affirmation: "don't proceed", "I do not want to go ahead"
        self.negated = re.compile(rf"(?<![\w'’])(?:{negators})(?:\W+\w+){{0,2}}?\W+(?:{_alternation((*AFFIRM, *extra.affirm))})"
                                  r"(?![\w'’])|\w+n['’]t\s+(?:\w+\s+){0,2}?(?:" + _alternation((*AFFIRM, *extra.affirm)) + r")(?![\w'’])")
        self.opens_refusal = re.compile(rf"^\W*(?:{_alternation((*OPENS_REFUSAL, *extra.refuse))})(?![\w'’])")
        self.not_refusal = _pattern(NOT_REFUSAL)

    def asks(self, text: str) -> bool:
        """The agent asks for agreement: a question, or words asking for a confirmation."""
        low = text.casefold()
        return "?" in low or "¿" in low or self.ask.search(low) is not None

    def requests(self, text: str) -> bool:
        """The agent asks for agreement or for information: the user's next turn answers it."""
        return self.asks(text) or self.inform.search(text.casefold()) is not None

    def answer(self, text: str) -> str | None:
        """``"yes"``, ``"no"``, or ``None`` (neither) for a user's reply; its questions are not
        answers ("Could you confirm the amount?")."""
        low = self.not_refusal.sub(" ", " ".join(s for s in _SENTENCE.findall(text.casefold())
                                                if not s.rstrip().endswith("?")))
        if self.opens_refusal.search(low):
            return "no"
        negated = [m.span() for m in self.negated.finditer(low)]
        plain = [m for m in self.affirm.finditer(low)
                 if not any(a <= m.start() and m.end() <= b for a, b in negated)]
        if plain:
            return "yes"
        if negated or self.refuse.search(low):
            return "no"
        return None
