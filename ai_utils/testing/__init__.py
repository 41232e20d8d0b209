"""Public test doubles: fake chat models and a fake Jev server.

The chat models stream, call tools and return structured output; the Jev server speaks the real decisions
protocol and `FakeOpenAIServer` the OpenAI Chat Completions protocol (logprobs, images) over HTTP on 127.0.0.1.

```python
from ai_utils.testing import FakeChatModel

model = FakeChatModel(["Hello!", {"content": "Bye.", "reasoning": "The user is leaving."}])
assert model.invoke("hi").content == "Hello!"
```
"""

from __future__ import annotations

from ai_utils.testing.audit import MemoryAuditSink
from ai_utils.testing.jev_server import FakeJevServer, JevAnswerFunction, RecordedJevRequest
from ai_utils.testing.models import FakeChatModel, FunctionChatModel, sequence_model, static_model
from ai_utils.testing.openai_server import FakeOpenAIServer, OpenAIReplyFunction, RecordedRequest

__all__ = [
    "FakeChatModel",
    "FakeJevServer",
    "FakeOpenAIServer",
    "FunctionChatModel",
    "JevAnswerFunction",
    "MemoryAuditSink",
    "OpenAIReplyFunction",
    "RecordedJevRequest",
    "RecordedRequest",
    "sequence_model",
    "static_model",
]
