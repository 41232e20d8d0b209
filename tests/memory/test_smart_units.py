"""The cut and the counters behind `SmartCheckpointSaver`, on hand-built message lists."""

from __future__ import annotations

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.types import Overwrite

from ai_utils.memory._summary import plan_compaction, summary_text
from ai_utils.memory._tool_units import (
    Tally,
    dangling_calls,
    estimate_tokens,
    is_summary,
    safe_cut,
    tally_write,
)


def _ai(calls: list[str], text: str = "") -> AIMessage:
    return AIMessage(text, tool_calls=[{"name": "lookup", "args": {"q": c}, "id": c} for c in calls])


def _orphans(tail: list[BaseMessage]) -> list[str]:
    calls = {c["id"] for m in tail if isinstance(m, AIMessage) for c in m.tool_calls}
    return [m.tool_call_id for m in tail if isinstance(m, ToolMessage) and m.tool_call_id not in calls]


INTERLEAVED: list[BaseMessage] = [
    HumanMessage("q1"),
    _ai(["a", "b"]),
    _ai(["c"]),
    ToolMessage("ra", tool_call_id="a"),
    ToolMessage("rc", tool_call_id="c"),
    _ai(["d"]),
    ToolMessage("rb", tool_call_id="b"),
    ToolMessage("rd", tool_call_id="d"),
    AIMessage("answer"),
    HumanMessage("q2"),
    AIMessage("answer 2"),
]


def test_no_keep_count_ever_leaves_an_orphaned_tool_message_in_interleaved_units() -> None:
    for keep in range(1, 12):
        cut = safe_cut(INTERLEAVED, keep)
        tail = INTERLEAVED[cut:]
        assert _orphans(tail) == [], keep
        assert sum(m.type in ("human", "ai") for m in tail) >= min(keep, 7)


def test_the_cut_moves_back_to_the_ai_message_that_owns_the_earliest_result() -> None:
    assert safe_cut(INTERLEAVED, 3) == 8  # answer, q2, answer 2
    assert safe_cut(INTERLEAVED, 4) == 1  # _ai(["d"]) pulls in b's owner, the first AI message


def test_call_ids_reused_in_every_turn_tie_each_result_to_its_own_turn() -> None:
    # Some providers and local models number calls per reply (call_0, call_0, ...).
    messages: list[BaseMessage] = []
    for turn in range(5):
        messages += [HumanMessage(f"q{turn}"), _ai(["call_0"]), ToolMessage(f"r{turn}", tool_call_id="call_0")]
        messages.append(AIMessage(f"answer {turn}"))
    cut = safe_cut(messages, 2)  # the last turn's call, its result and the answer; not the whole thread
    assert cut == 17 and messages[cut + 1].text == "r4"
    assert dangling_calls(messages) == set()
    assert dangling_calls([*messages, HumanMessage("q5"), _ai(["call_0"])]) == {"call_0"}


def test_a_tool_message_with_an_unknown_call_stays_with_the_message_before_it() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("q"),
        AIMessage("x"),
        ToolMessage("stray", tool_call_id="zz"),
        HumanMessage("q2"),
    ]
    assert safe_cut(messages, 1) == 3
    assert safe_cut(messages, 2) == 1
    assert safe_cut([ToolMessage("stray", tool_call_id="zz"), HumanMessage("q")], 2) == 0


def test_unanswered_tool_calls_are_reported() -> None:
    assert dangling_calls([_ai(["a", "b"]), ToolMessage("ra", tool_call_id="a")]) == {"b"}
    assert dangling_calls(INTERLEAVED) == set()


def test_tokens_count_text_blocks_and_tool_call_arguments() -> None:
    assert estimate_tokens(HumanMessage("x" * 40)) == 13
    assert estimate_tokens(HumanMessage([{"type": "text", "text": "x" * 40}, "y" * 4, {"type": "image"}])) > 14
    assert estimate_tokens(_ai(["call"])) > estimate_tokens(AIMessage(""))


def test_the_tally_counts_writes_and_gives_up_on_removals_and_unknown_values() -> None:
    tally = Tally()
    tally_write(tally, [HumanMessage("hello"), ("assistant", "hi there")])
    tally_write(tally, ToolMessage("r", tool_call_id="a"))
    assert tally.exact
    assert tally.since_summary == 2
    assert (
        tally.tokens
        == Tally.of([HumanMessage("hello"), AIMessage("hi there"), ToolMessage("r", tool_call_id="a")]).tokens
    )

    tally_write(tally, RemoveMessage(id="x"))
    assert not tally.exact
    unreadable = Tally()
    tally_write(unreadable, Overwrite([]))
    assert not unreadable.exact


def test_messages_kept_beside_a_summary_do_not_count_as_new() -> None:
    summary = SystemMessage(
        "Summary of the earlier conversation:\nMax likes tea.", id="ai_utils_summary_1", response_metadata={"kept": 2}
    )
    assert is_summary(summary)
    assert not is_summary(SystemMessage("You are helpful."))
    assert Tally.of([summary, HumanMessage("a"), AIMessage("b"), HumanMessage("c")]).since_summary == 1
    assert summary_text(summary) == "Max likes tea."
    assert summary_text(SystemMessage("plain")) == "plain"


def test_a_plan_folds_the_previous_summary_and_keeps_the_tail() -> None:
    summary = SystemMessage("Summary of the earlier conversation:\nold", id="ai_utils_summary_1")
    plan = plan_compaction([summary, *INTERLEAVED], keep_last=3)
    assert plan is not None
    assert plan.previous_summary == "old"
    assert plan.to_summarize == INTERLEAVED[:8]
    assert plan.tail == INTERLEAVED[8:]
    assert plan_compaction(INTERLEAVED[-2:], keep_last=3) is None
