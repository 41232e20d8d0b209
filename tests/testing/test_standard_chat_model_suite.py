"""LangChain's own unit-test suite for chat models, run against FakeChatModel."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_tests.unit_tests import ChatModelUnitTests
from syrupy.assertion import SnapshotAssertion

from ai_utils.testing import FakeChatModel


class TestFakeChatModelStandard(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[BaseChatModel]:
        return FakeChatModel

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"responses": ["Hello!", {"content": "Bye.", "reasoning": "The user leaves."}]}

    @property
    def has_tool_calling(self) -> bool:
        return True

    @property
    def has_tool_choice(self) -> bool:
        return True

    @property
    def has_structured_output(self) -> bool:
        return True

    @property
    def supports_json_mode(self) -> bool:
        return True

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    @property
    def init_from_env_params(self) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        # The fake reads no environment: a provider key in the env changes nothing.
        return (
            {"OPENAI_API_KEY": "sk-unused"},
            {"responses": ["hi"]},
            {"responses": ["hi"], "model_name": "fake-chat-model"},
        )

    @pytest.mark.xfail(
        reason="langchain_core.load only revives classes on LangChain's own allowlist, even with "
        "allowed_objects='all'; the dumpd snapshot part passes (our own load round trip: test_fake_chat_model.py)",
        raises=ValueError,
        strict=True,
    )
    @pytest.mark.filterwarnings(
        "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning",
        "ignore::langchain_core._api.beta_decorator.LangChainBetaWarning",
    )
    def test_serdes(self, model: BaseChatModel, snapshot: SnapshotAssertion) -> None:
        super().test_serdes(model, snapshot)
