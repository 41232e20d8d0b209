from __future__ import annotations

import pytest
from langchain_core.documents import Document

from ai_utils.exceptions import UserError
from ai_utils.rag.documents import non_empty_docs, turn_to_docs


def test_turn_to_docs_accepts_every_input_form_and_keeps_metadata_and_ids() -> None:
    doc = Document(page_content="b", metadata={"x": 1}, id="b")

    docs = turn_to_docs(["a", doc, {"page_content": "c", "metadata": {"y": 2}, "id": 7}, {"page_content": "d"}])

    assert docs == [
        Document(page_content="a"),
        doc,
        Document(page_content="c", metadata={"y": 2}, id="7"),
        Document(page_content="d"),
    ]
    assert turn_to_docs("single") == [Document(page_content="single")]
    assert turn_to_docs(doc) == [doc]
    assert turn_to_docs(x for x in ["gen"]) == [Document(page_content="gen")]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([42], "Cannot turn 42 into a document"),
        ([{"text": "x"}], "Cannot turn {'text': 'x'}"),
        ([{"page_content": "x", "metadata": ["a"]}], "metadata must be a mapping"),
        (42, "Cannot turn 42 into documents"),
    ],
)
def test_turn_to_docs_refuses_unsupported_items(data: object, message: str) -> None:
    with pytest.raises(UserError, match=message):
        turn_to_docs(data)


def test_empty_data_is_refused_naming_the_caller() -> None:
    with pytest.raises(UserError, match=r"create_faiss_store\(\) got no documents \(\[\]\)"):
        non_empty_docs([], caller="create_faiss_store")
