from __future__ import annotations

from _openai_server import openai_server as openai_server
