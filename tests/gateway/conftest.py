"""Shared by the gateway tests: the fake provider servers (Anthropic, Gemini, OpenAI Responses, DeepSeek)."""

from __future__ import annotations

from _provider_servers.fixtures import anthropic_server as anthropic_server
from _provider_servers.fixtures import deepseek_server as deepseek_server
from _provider_servers.fixtures import gemini_server as gemini_server
from _provider_servers.fixtures import responses_server as responses_server
