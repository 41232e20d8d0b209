"""Quiet failures become loud: natural mistakes raise a `UserError` naming the value and the fix, or warn once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from typing import Any

import pytest
from _services import free_port

from ai_utils import Agent, DeepAgent, ProviderError, UserError, get_llm
from ai_utils.testing import FakeChatModel


@pytest.mark.parametrize("cls", [Agent, DeepAgent])
@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"temprature": 0.2}, ["temprature=", "llm=get_llm(temperature"]),
        ({"promt": "hi"}, ["promt=", "did you mean prompt="]),
        ({"prompt": 123}, ["prompt", "123"]),
        ({"llm": get_llm}, ["llm", "get_llm()"]),
        ({"tools": None}, ["tools=None", "leave `tools` out"]),
    ],
)
def test_natural_mistakes_are_user_errors_naming_the_value(
    cls: type[Any], kwargs: dict[str, Any], names: list[str]
) -> None:
    base: dict[str, Any] = {} if "llm" in kwargs else {"llm": FakeChatModel(["x"])}
    with pytest.raises(UserError) as caught:
        cls(**base, **kwargs)
    for name in names:
        assert name in str(caught.value)


def test_get_llm_refuses_a_misspelled_model_option() -> None:
    with pytest.raises(UserError, match="temprature=.*Did you mean temperature="):
        get_llm("local", temprature=0.2)


def test_a_local_model_without_a_server_names_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    agent = Agent(llm=get_llm("local", base_url=url, max_retries=0))
    with pytest.raises(ProviderError, match=url.replace(".", r"\.")):
        agent.invoke("hi")
    with pytest.raises(ProviderError, match="LOCAL_LLM_BASE_URL"):
        list(agent.stream("hi"))


def test_thread_id_without_a_checkpointer_warns_once() -> None:
    agent = Agent(llm=FakeChatModel(["one", "two"]))
    with pytest.warns(UserWarning, match="no checkpointer.*thread_id='t1'.*MemorySaver"):
        assert agent.invoke("hi", thread_id="t1") == "one"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert agent.invoke("again", thread_id="t1") == "two"  # once per agent, not every turn


def test_a_smart_saver_without_llm_or_key_says_so_once_at_construction_and_once_at_failure() -> None:
    script = textwrap.dedent(
        """
        from ai_utils import Agent, MemorySaver, SmartCheckpointSaver
        from ai_utils.testing import FunctionChatModel

        saver = SmartCheckpointSaver(MemorySaver(), messages_before_summary=3, keep_last_messages=1)
        agent = Agent(llm=FunctionChatModel(lambda m, t: "ok " * 50), checkpointer=saver)
        for turn in range(8):
            agent.invoke(f"turn {turn}", thread_id="t")
        print("turns done")
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "AI_UTILS_PROVIDER"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "turns done" in done.stdout
    assert done.stderr.count("never be summarized") == 1
    assert "OPENROUTER_API_KEY" in done.stderr
    assert done.stderr.count("summarizing failed") == 1
