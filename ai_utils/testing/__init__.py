"""Public test doubles: fake chat models that stream, call tools and return structured output.

```python
from ai_utils.testing import FakeChatModel

model = FakeChatModel(["Hello!", {"content": "Bye.", "reasoning": "The user is leaving."}])
assert model.invoke("hi").content == "Hello!"
```
"""

from __future__ import annotations

from ai_utils.testing.models import FakeChatModel, FunctionChatModel, sequence_model, static_model

__all__ = ["FakeChatModel", "FunctionChatModel", "sequence_model", "static_model"]
