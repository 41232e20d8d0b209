"""Shared core of the chat models that run a locally logged-in CLI (`claude`, `codex`) as a subprocess.

A subclass says how to build the command line, what goes to stdin and how to read the CLI's JSON
output (a `_Parser` fed line by line). This module runs the process for `invoke`/`ainvoke`/`stream`/
`astream` (cancelling an async call kills the process) and turns failures into `ProviderError`.

Tools (`bind_tools`) go through the prompt-level protocol of `ai_utils.llm._cli_tools`: the reply is read as one
JSON tool call or a plain answer, and a bad tool call is sent back once for repair before `ModelOutputError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import operator
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from operator import itemgetter
from typing import Any, ClassVar, Literal, Protocol

from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_json_schema, convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ai_utils.exceptions import ProviderError, UserError
from ai_utils.llm._chat_model import StreamingMessageChatModel
from ai_utils.llm._cli_prompt import excerpt, render_prompt, structured_instructions
from ai_utils.llm._cli_tools import ReplyGate, as_chunk, offered, settle, tool_instructions

__all__ = ["CLIChatModel", "Reasoning", "ToolsNotSupportedError"]

Reasoning = Literal["minimal", "low", "medium", "high"]

_STREAM_LIMIT = 1 << 24  # one JSON line of a long reply can exceed asyncio's 64 KiB default


class ToolsNotSupportedError(UserError, NotImplementedError):
    """Kept for code that catches it: the CLI chat models now bind tools through a prompt-level protocol.

    Also a `NotImplementedError`, so LangChain code that probes for tool support falls back cleanly.
    """


class _Parser(Protocol):
    def feed(self, line: str) -> list[AIMessageChunk]: ...

    def finish(self) -> list[AIMessageChunk]: ...


class CLIChatModel(StreamingMessageChatModel):
    """Base of `ChatClaudeCLI` and `ChatCodexCLI`: one CLI process per model call.

    Attributes:
        model_name: the model passed to the CLI (alias ``model``).
        executable: the CLI executable, a name on PATH or a path (default: the `env_var` variable if set,
            else the CLI's own name, e.g. ``claude``).
        reasoning: reasoning effort, translated to the CLI's own flag.
        timeout: seconds one call may take before the process is killed (None: no limit).
        cwd: working directory of the process (default: the current one).
        extra_args: more command-line arguments, appended before the prompt.
    """

    model_name: str = Field(alias="model")
    executable: str = ""
    reasoning: Reasoning | None = None
    timeout: float | None = None
    cwd: str | None = None
    extra_args: list[str] = Field(default_factory=list)

    model_config = ConfigDict(populate_by_name=True)

    report_tokens: ClassVar[bool] = True
    provider: ClassVar[str] = ""
    """The CLI's provider name, e.g. ``"claude-cli"``; without ``-cli`` it is the default executable."""
    env_var: ClassVar[str] = ""
    """The variable that names the executable: ``AI_UTILS_<PROVIDER>``, e.g. ``AI_UTILS_CLAUDE_CLI``."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Name a subclass's `env_var` after its `provider`."""
        super().__pydantic_init_subclass__(**kwargs)
        cls.env_var = "AI_UTILS_" + cls.provider.upper().replace("-", "_")

    @model_validator(mode="before")
    @classmethod
    def _default_executable(cls, data: Any) -> Any:
        if isinstance(data, dict) and "executable" not in data:
            return {**data, "executable": os.environ.get(cls.env_var, cls.provider.removesuffix("-cli"))}
        return data

    # -- subclass hooks -------------------------------------------------------------------------
    def _command(self, executable: str, model: str, system: str | None, *, streaming: bool) -> list[str]:
        raise NotImplementedError

    def _stdin(self, system: str | None, prompt: str) -> str:
        return prompt

    def _parser(self, *, streaming: bool) -> _Parser:
        raise NotImplementedError

    # -- LangChain plumbing ---------------------------------------------------------------------
    @classmethod
    def is_lc_serializable(cls) -> bool:
        """CLI chat models hold no secrets and can be serialized."""
        return True

    @classmethod
    def get_lc_namespace(cls) -> list[str]:
        """The import path used by `langchain_core.load`."""
        return ["ai_utils", "llm"]

    @property
    def _llm_type(self) -> str:
        return self.provider

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "reasoning": self.reasoning}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        return LangSmithParams(
            ls_provider=self.provider, ls_model_name=kwargs.get("model", self.model_name), ls_model_type="chat"
        )

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | dict[str, Any] | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Offer tools through the prompt: their JSON schemas go into the system prompt, the reply is read back.

        The CLIs give callers no function calling, so the model is asked to reply with exactly one JSON object
        ``{"tool": <name>, "arguments": {...}}`` to call a tool (or plain text to answer); that reply becomes an
        `AIMessage` with one tool call, checked against the tool's schema. A bad call is sent back with the
        problem once; a second bad one raises `ModelOutputError`. So `Agent` and `DeepAgent` run on the CLIs.

        Args:
            tools: tools, functions, pydantic classes or tool dicts (anything `convert_to_openai_tool` takes).
            tool_choice: ``"auto"``/``None``, ``"required"``/``"any"`` (a call is required), a tool name, or
                ``"none"`` (the tools are not offered).
            **kwargs: further bound call arguments.

        Returns:
            The model bound to the tools (the model itself when ``tools`` is empty).
        """
        if not tools:
            return self
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def with_structured_output(
        self, schema: dict[str, Any] | type, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """Ask for JSON matching ``schema`` in the prompt and parse the reply (any ``method`` acts the same).

        Args:
            schema: a pydantic model class, TypedDict, or JSON schema dict.
            include_raw: return ``{"raw", "parsed", "parsing_error"}`` instead of raising on bad JSON.
            **kwargs: ``method``/``strict`` are accepted for compatibility and ignored.

        Returns:
            A runnable producing the parsed object (a pydantic instance for a pydantic schema).
        """
        parser: JsonOutputParser
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            parser = PydanticOutputParser(pydantic_object=schema)
            json_schema = schema.model_json_schema()
        else:
            parser = JsonOutputParser()
            json_schema = convert_to_json_schema(schema)
        llm = self.bind(output_instructions=structured_instructions(json_schema))
        if not include_raw:
            return llm | parser
        parse = RunnablePassthrough.assign(parsed=itemgetter("raw") | parser, parsing_error=lambda _: None)
        no_parse = RunnablePassthrough.assign(parsed=lambda _: None)
        return RunnableMap(raw=llm) | parse.with_fallbacks([no_parse], exception_key="parsing_error")

    # -- running the CLI --------------------------------------------------------------------------
    def _resolve_executable(self) -> str:
        found = shutil.which(self.executable)
        if found is None:
            raise UserError(
                f"The {self.provider} executable {self.executable!r} was not found. Install the CLI and log in, "
                f"or set {self.env_var} to its path."
            )
        return found

    def _prepare(
        self, messages: list[BaseMessage], kwargs: dict[str, Any], *, streaming: bool
    ) -> tuple[list[str], str]:
        system, prompt = render_prompt(messages)
        tools, choice = offered(kwargs)
        for instructions in (kwargs.get("output_instructions"), tool_instructions(tools, choice) if tools else None):
            if isinstance(instructions, str):
                system = f"{system}\n\n{instructions}" if system else instructions
        model = kwargs.get("model") or self.model_name
        command = self._command(self._resolve_executable(), model, system, streaming=streaming)
        return command, self._stdin(system, prompt)

    def _check_exit(self, returncode: int | None, stderr: str, stdout: str = "") -> None:
        if returncode == 0:
            return
        detail = excerpt(stderr) or excerpt(stdout) or "no output"
        raise ProviderError(
            f"The {self.provider} process {self.executable!r} exited with code {returncode}: {detail}. "
            "Check that the CLI works and is logged in by running it in a terminal.",
            provider=self.provider,
        )

    def _timeout_error(self) -> ProviderError:
        return ProviderError(
            f"The {self.provider} process took longer than timeout={self.timeout}s and was killed. "
            "Raise timeout= or shorten the prompt.",
            provider=self.provider,
        )

    def _result(self, parser: _Parser, stdout: str) -> AIMessage:
        chunks = [chunk for line in stdout.splitlines() for chunk in parser.feed(line)]
        chunks.extend(parser.finish())
        merged = functools.reduce(operator.add, chunks, AIMessageChunk(content=""))
        return AIMessage(
            content=merged.content,
            additional_kwargs=merged.additional_kwargs,
            response_metadata=merged.response_metadata,
            usage_metadata=merged.usage_metadata,
        )

    def _message(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]) -> AIMessage:
        step = settle(messages, self._reply(messages, kwargs), kwargs)
        return step if isinstance(step, AIMessage) else step.done(self._reply(step.messages, kwargs))

    async def _amessage(self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]) -> AIMessage:
        step = settle(messages, await self._areply(messages, kwargs), kwargs)
        return step if isinstance(step, AIMessage) else step.done(await self._areply(step.messages, kwargs))

    def _reply(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        command, stdin = self._prepare(messages, kwargs, streaming=False)
        try:
            done = subprocess.run(
                command,
                input=stdin,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=self.timeout,
                cwd=self.cwd,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise self._timeout_error() from exc
        self._check_exit(done.returncode, done.stderr, done.stdout)
        return self._result(self._parser(streaming=False), done.stdout)

    async def _areply(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        command, stdin = self._prepare(messages, kwargs, streaming=False)
        process = await self._spawn(command)
        try:
            out, err = await asyncio.wait_for(process.communicate(stdin.encode()), self.timeout)
        except TimeoutError as exc:
            raise self._timeout_error() from exc
        finally:
            await _kill(process)
        self._check_exit(process.returncode, err.decode(errors="replace"), out.decode(errors="replace"))
        return self._result(self._parser(streaming=False), out.decode(errors="replace"))

    def _message_chunks(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> Iterator[AIMessageChunk]:
        tools, choice = offered(kwargs)
        if not tools:
            yield from self._reply_chunks(messages, kwargs)
            return
        gate = ReplyGate(choice)
        for chunk in self._reply_chunks(messages, kwargs):
            yield from gate.feed(chunk)
        held = gate.held()
        if held is not None:
            step = settle(messages, held, kwargs)
            yield as_chunk(step if isinstance(step, AIMessage) else step.done(self._reply(step.messages, kwargs)))

    async def _amessage_chunks(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
    ) -> AsyncIterator[AIMessageChunk]:
        tools, choice = offered(kwargs)
        if not tools:
            async for chunk in self._areply_chunks(messages, kwargs):
                yield chunk
            return
        gate = ReplyGate(choice)
        async for chunk in self._areply_chunks(messages, kwargs):
            for passed in gate.feed(chunk):
                yield passed
        held = gate.held()
        if held is not None:
            step = settle(messages, held, kwargs)
            yield as_chunk(
                step if isinstance(step, AIMessage) else step.done(await self._areply(step.messages, kwargs))
            )

    def _reply_chunks(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> Iterator[AIMessageChunk]:
        command, stdin = self._prepare(messages, kwargs, streaming=True)
        parser = self._parser(streaming=True)
        with tempfile.TemporaryFile() as err:
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=self.cwd)
            timed_out = threading.Event()

            def on_timeout() -> None:
                timed_out.set()
                process.kill()

            timer = threading.Timer(self.timeout, on_timeout) if self.timeout is not None else None
            try:
                if timer is not None:
                    timer.start()
                assert process.stdin is not None and process.stdout is not None
                with contextlib.suppress(BrokenPipeError):
                    process.stdin.write(stdin.encode())
                    process.stdin.close()
                for raw in process.stdout:
                    for chunk in parser.feed(raw.decode(errors="replace")):
                        yield chunk
                returncode = process.wait()
            finally:
                if timer is not None:
                    timer.cancel()
                if process.poll() is None:
                    process.kill()
                    process.wait()
                process.stdout.close()  # type: ignore[union-attr]
            err.seek(0)
            stderr = err.read().decode(errors="replace")
        if timed_out.is_set():
            raise self._timeout_error()
        self._check_exit(returncode, stderr)
        for chunk in parser.finish():
            yield chunk

    async def _areply_chunks(
        self, messages: list[BaseMessage], kwargs: dict[str, Any]
    ) -> AsyncIterator[AIMessageChunk]:
        command, stdin = self._prepare(messages, kwargs, streaming=True)
        parser = self._parser(streaming=True)
        loop = asyncio.get_running_loop()
        deadline = None if self.timeout is None else loop.time() + self.timeout
        process = await self._spawn(command)
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        stderr_task = asyncio.ensure_future(process.stderr.read())
        try:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                process.stdin.write(stdin.encode())
                await process.stdin.drain()
                process.stdin.close()
            while True:
                remaining = None if deadline is None else max(deadline - loop.time(), 0)
                try:
                    raw = await asyncio.wait_for(process.stdout.readline(), remaining)
                except TimeoutError as exc:
                    raise self._timeout_error() from exc
                if not raw:
                    break
                for chunk in parser.feed(raw.decode(errors="replace")):
                    yield chunk
            await process.wait()
            stderr = (await stderr_task).decode(errors="replace")
        finally:
            stderr_task.cancel()
            await _kill(process)
        self._check_exit(process.returncode, stderr)
        for chunk in parser.finish():
            yield chunk

    async def _spawn(self, command: list[str]) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.cwd,
            limit=_STREAM_LIMIT,
        )


async def _kill(process: asyncio.subprocess.Process) -> None:
    """Kill a still-running process and reap it (runs also when the calling task is cancelled)."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await asyncio.shield(process.wait())
