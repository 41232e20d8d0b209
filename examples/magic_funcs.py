"""Magic funcs: extract, structure, rewrite and summarize — one call each, typed where it matters.

Offline each call gets a scripted model; with OPENROUTER_API_KEY set they all use the real default model.
Run: `.venv/bin/python examples/magic_funcs.py`
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel

from ai_utils import extract, get_llm, rewrite, structure, summarize
from ai_utils.testing import FakeChatModel

REAL = bool(os.environ.get("OPENROUTER_API_KEY"))


def llm(offline_reply: str) -> Any:
    return get_llm() if REAL else FakeChatModel([offline_reply])


class Person(BaseModel):
    name: str
    age: int


class Order(BaseModel):
    item: str
    quantity: int


def main() -> None:
    print("(real provider via get_llm())" if REAL else "(offline: scripted models; set OPENROUTER_API_KEY)")
    person = extract("Max ist 30 und wohnt in Köln.", Person, llm=llm('{"name": "Max", "age": 30}'))
    print(f"extract   -> {person!r}")

    order = structure({"artikel": "Kaffee", "menge": "3 Stück"}, Order, llm=llm('{"item": "Kaffee", "quantity": 3}'))
    print(f"structure -> {order!r}")

    mail = rewrite(
        "schick mal die rechnung",
        "Als kurze, höfliche E-Mail.",
        llm=llm("Guten Tag, könnten Sie mir bitte die Rechnung zusenden? Vielen Dank!"),
    )
    print(f"rewrite   -> {mail}")

    notes = "Meeting: Budget um 10 % erhöht. Launch auf Mai verschoben. Neues Teammitglied ab Juni."
    short = summarize(notes, focus="Termine", max_words=20, llm=llm("Launch im Mai, Verstärkung ab Juni."))
    print(f"summarize -> {short}")


if __name__ == "__main__":
    main()
