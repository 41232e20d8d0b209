"""classify: fast, typed decisions (Jev) — triage a support message into team, refund flag and urgency.

Offline it talks the real Jev wire protocol to `FakeJevServer` on 127.0.0.1; with OPENROUTER_API_KEY set
it asks the real Jev model on OpenRouter. Run: `.venv/bin/python examples/classify_triage.py`
"""

from __future__ import annotations

import os
from typing import Literal

from ai_utils import ChoiceAnswer, NoulAnswer, Questions, ScoreAnswer, choice, classify, noul, score
from ai_utils.testing import FakeJevServer


class Triage(Questions):
    category: ChoiceAnswer[Literal["billing", "technical", "other"]] = choice(
        "Which team should handle `message`?",
        {"billing": "Payments, invoices and refunds", "technical": "Bugs and outages", "other": None},
    )
    refund_requested: NoulAnswer = noul("Does `message` explicitly request a refund?")
    urgency: ScoreAnswer = score("How urgent is `message`?", ["Can wait", "Time-sensitive", "Blocking"])


MESSAGES = ["I was charged twice this month, please refund one payment!", "The app crashes on login since today."]

SCRIPTED = [("billing", 0.95, 1.2), ("technical", 0.02, 2.0)]  # what the fake server answers, per message


def main() -> None:
    if os.environ.get("OPENROUTER_API_KEY"):
        print("(real Jev model on OpenRouter)")
        results = [classify({"message": m}, Triage) for m in MESSAGES]
    else:
        print("(offline: FakeJevServer on 127.0.0.1; set OPENROUTER_API_KEY for the real model)")
        with FakeJevServer() as jev:
            results = []
            for message, (team, refund, urgency) in zip(MESSAGES, SCRIPTED, strict=True):
                jev.answer("category", choice=team)
                jev.answer("refund_requested", noul=refund)
                jev.answer("urgency", score=urgency)
                results.append(classify({"message": message}, Triage, base_url=jev.url, api_key=jev.api_key))
    for message, result in zip(MESSAGES, results, strict=True):
        a = result.answers
        print(f"\n{message}")
        print(f"  category={a.category.choice}  P(refund)={a.refund_requested.noul:.2f}  urgency={a.urgency.score:.2f}")
        print(f"  (model {result.model})")


if __name__ == "__main__":
    main()
