"""Loop hooks: functions and sandboxed commands run at ``loop:start``, ``loop:end``, ``step:start``, ``step:end``.

A hook's result (a dict; for a command ``{"stdout", "exit_code", "json"}``) is saved in the context under its
``save_as``, where later steps read it like a step's output. A hook that raises, returns something else, exits
non-zero or runs past its ``timeout`` fails the run with `LoopError` naming it.

Commands never see a shell string built from data: ``argv`` is a list, each item a literal or an exact
``ctx("path")`` binding (resolved to one argument, never interpolated), and runs confined like `DeepAgent`'s
sandbox backend (bubblewrap, `ai_utils.deep._sandbox`): a fresh empty workspace that is its working directory,
the host's system folders read-only, no other host file, no network, a time limit that kills the whole process
tree. The event (type, loop, thread, run, step; never the context) is its stdin as JSON.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import inspect
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, get_args

from ai_utils.exceptions import LoopDefinitionError, LoopError, UserError
from ai_utils.loops._context import jsonable, resolve, write_path
from ai_utils.loops._events import LoopEvent
from ai_utils.loops._limits import MAX_ARGV, MAX_CONTEXT_DEPTH, MAX_HOOKS, MAX_TEXT_CHARS, data_problem
from ai_utils.loops._steps import check_bindings, check_path, fields_of, is_binding

__all__ = [
    "HOOK_EVENTS",
    "CommandHook",
    "FunctionHook",
    "Hook",
    "HookEvent",
    "Hooks",
    "arun_hooks",
    "check_sandbox",
    "command_hook",
    "function_hook",
    "hooks_from",
    "hooks_from_json",
    "hooks_to_json",
    "run_hooks",
]

HookEvent = Literal["loop:start", "loop:end", "step:start", "step:end"]
HOOK_EVENTS: tuple[HookEvent, ...] = get_args(HookEvent)
_MAX_TIMEOUT = 3600.0
_MAX_STDOUT = 64 * 1024
_HOOK_LIMITS = {"max_file_size": 4 << 20, "max_processes": 64, "tmp_size": 64 << 20}
_pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="ai_utils-loop-hook")


def _timeout(value: object, *, what: str, optional: bool) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= _MAX_TIMEOUT:
        raise LoopDefinitionError(f"{what}: timeout must be seconds in (0, {_MAX_TIMEOUT:g}], got {value!r}.")
    return float(value)


@dataclass(frozen=True, slots=True)
class CommandHook:
    """A command run in the sandbox (see `command_hook`)."""

    argv: tuple[str | dict[str, str], ...]
    save_as: str | None = None
    timeout: float = 30.0

    @property
    def name(self) -> str:
        """How errors name the hook."""
        shown = [repr(a[:40]) if isinstance(a, str) else f"ctx({a['$context'][:40]!r})" for a in self.argv[:4]]
        more = ", ..." if len(self.argv) > 4 else ""
        return f"command_hook([{', '.join(shown)}{more}])"

    def to_json(self) -> dict[str, Any]:
        """The JSON form ``{"type": "command", "argv", "save_as", "timeout"}``."""
        return {"type": "command", "argv": list(self.argv), "save_as": self.save_as, "timeout": self.timeout}


@dataclass(frozen=True, slots=True)
class FunctionHook:
    """A Python function hook (see `function_hook`); it has no JSON form."""

    fn: Callable[[LoopEvent], Mapping[str, Any] | None]
    save_as: str | None = None
    timeout: float | None = None

    @property
    def name(self) -> str:
        """How errors name the hook: the function's qualified name."""
        return str(getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", None) or repr(self.fn))[:120]


Hook: TypeAlias = "CommandHook | FunctionHook"
Hooks: TypeAlias = "Mapping[HookEvent, tuple[Hook, ...]]"


def command_hook(
    argv: Sequence[str | Mapping[str, str]], *, save_as: str | None = None, timeout: float = 30
) -> CommandHook:
    """A hook that runs a command in the sandbox (confined like `DeepAgent`'s bubblewrap backend).

    The command runs without a shell: ``argv[0]`` is the program, every other item one argument, either a
    literal string or an exact ``ctx("path")`` binding (the context value as one argument, never interpolated).
    It starts in a fresh, empty workspace (its working directory, deleted afterwards) and sees the host's system
    folders read-only, no other host file and no network. Its stdin is the hook event as JSON (type, loop,
    thread_id, run_id, step_key; never the context). Its result, saved under ``save_as``, is
    ``{"stdout": <text, trailing newline cut>, "exit_code": 0, "json": <stdout parsed as JSON, or None>}``.

    Example:
        ```python
        hooks={"loop:start": [command_hook(["echo", "support loop started"], save_as="audit.start")]}
        # later: tool_step("log", input={"line": ctx("audit.start.stdout")}, next="end")
        ```

    Args:
        argv: the program and its arguments (at most 256; the program must be a literal).
        save_as: a dotted context path for the result, or ``None`` to keep nothing.
        timeout: seconds before the command's whole process tree is killed and the run fails.

    Raises:
        LoopDefinitionError: a malformed argument.
    """
    if isinstance(argv, str | bytes) or not isinstance(argv, Sequence) or not 1 <= len(argv) <= MAX_ARGV:
        raise LoopDefinitionError(
            f"command_hook(argv) must be a list of 1 to {MAX_ARGV} arguments (no shell string), "
            f"got {repr(argv)[:80]}. Pass e.g. ['echo', 'started']."
        )
    items: list[str | dict[str, str]] = []
    for index, item in enumerate(argv):
        if isinstance(item, str):
            if not item or "\x00" in item or len(item) > MAX_TEXT_CHARS:
                raise LoopDefinitionError(
                    f"command_hook argv[{index}] must be a non-empty string without NUL bytes of at most "
                    f"{MAX_TEXT_CHARS} characters."
                )
            items.append(item)
        elif index > 0 and is_binding(item):
            check_bindings(item, where=f"command_hook argv[{index}]", step_key=None)
            items.append(dict(item))
        else:
            raise LoopDefinitionError(
                f"command_hook argv[{index}] is {repr(item)[:80]}; use a string"
                + (" (the program is always a literal)." if index == 0 else " or ctx('path').")
            )
    if save_as is not None:
        check_path(save_as, where="command_hook(save_as=...)")
    seconds = _timeout(timeout, what="command_hook", optional=False)
    assert seconds is not None
    return CommandHook(tuple(items), save_as, seconds)


def function_hook(
    fn: Callable[[LoopEvent], Mapping[str, Any] | None], *, save_as: str | None = None, timeout: float | None = None
) -> FunctionHook:
    """A Python function as a hook, with a place for its result and an optional time limit.

    A plain function in ``hooks=`` is the same as ``function_hook(fn)`` (its result kept nowhere, unless the
    function has a ``save_as`` attribute).

    Args:
        fn: a sync function of the hook event (a `LoopEvent` with ``type``, ``loop``, ``thread_id``, ``run_id``,
            ``step_key`` for step hooks, ``status`` at ``loop:end``, and a copy of the ``context``) that returns a
            dict or ``None``.
        save_as: a dotted context path for the returned dict.
        timeout: seconds; past them the run fails (the function itself finishes in a worker thread, since Python
            cannot stop it: use `command_hook` for work that must be killed).

    Raises:
        LoopDefinitionError: ``fn`` is not a sync function, or a bad ``save_as``/``timeout``.
    """
    if not callable(fn) or inspect.iscoroutinefunction(fn) or isinstance(fn, CommandHook | FunctionHook):
        raise LoopDefinitionError(
            f"A hook must be a plain (sync) function of the event or command_hook(...), got {repr(fn)[:80]}."
        )
    if save_as is not None:
        check_path(save_as, where="function_hook(save_as=...)")
    return FunctionHook(fn, save_as, _timeout(timeout, what="function_hook", optional=True))


def _as_hook(value: object) -> Hook:
    if isinstance(value, CommandHook | FunctionHook):
        return value
    return function_hook(value, save_as=getattr(value, "save_as", None))  # type: ignore[arg-type]


def hooks_from(hooks: object, protected: frozenset[str]) -> dict[HookEvent, tuple[Hook, ...]]:
    """Check ``define_loop(hooks=...)``: known events, at most `MAX_HOOKS` each, ``save_as`` off protected roots."""
    if hooks is None:
        return {}
    if not isinstance(hooks, Mapping):
        raise LoopDefinitionError(f"hooks must be a mapping of hook event to a list of hooks, got {repr(hooks)[:80]}.")
    out: dict[HookEvent, tuple[Hook, ...]] = {}
    for event, items in hooks.items():
        if event not in HOOK_EVENTS:
            raise LoopDefinitionError(f"Unknown hook event {repr(event)[:80]}; use one of {list(HOOK_EVENTS)!r}.")
        if isinstance(items, str | bytes) or not isinstance(items, Sequence) or len(items) > MAX_HOOKS:
            raise LoopDefinitionError(
                f"hooks[{event!r}] must be a list of at most {MAX_HOOKS} hooks, got {repr(items)[:80]}."
            )
        checked = tuple(_as_hook(item) for item in items)
        for hook in checked:
            if hook.save_as is not None and hook.save_as.split(".", 1)[0] in protected:
                raise LoopDefinitionError(
                    f"Hook {hook.name} at {event!r}: save_as={hook.save_as!r} would overwrite the protected context "
                    f"root {hook.save_as.split('.', 1)[0]!r}. Save under another name."
                )
        if checked:
            out[event] = checked
    return out


_COMMAND_FIELDS = frozenset({"type", "argv", "save_as", "timeout"})


def hooks_from_json(data: object) -> dict[str, list[CommandHook]]:
    """The ``hooks`` of a JSON definition: only command hooks have a JSON form."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise LoopDefinitionError(f"hooks must be an object of hook event to a list of hooks, got {repr(data)[:80]}.")
    out: dict[str, list[CommandHook]] = {}
    for event, items in data.items():
        if not isinstance(items, list):
            raise LoopDefinitionError(f"hooks[{str(event)[:40]!r}] must be a list, got {repr(items)[:80]}.")
        hooks = []
        for index, item in enumerate(items):
            kind = item.get("type") if isinstance(item, Mapping) else None
            if kind != "command":
                raise LoopDefinitionError(
                    f"hooks[{str(event)[:40]!r}][{index}] has type {repr(kind)[:40]}; a JSON definition "
                    "can only declare command hooks ({'type': 'command', 'argv': [...]})."
                )
            fields = fields_of(item, where=f"hooks[{str(event)[:40]!r}][{index}]", allowed=_COMMAND_FIELDS)
            argv = fields.get("argv")
            if not isinstance(argv, list):
                raise LoopDefinitionError(f"hooks[{str(event)[:40]!r}][{index}].argv must be a list.")
            hooks.append(
                command_hook(
                    argv,
                    save_as=fields.get("save_as"),
                    timeout=30 if fields.get("timeout") is None else fields["timeout"],
                )
            )
        out[str(event)] = hooks
    return out


def hooks_to_json(hooks: Hooks) -> dict[str, list[dict[str, Any]]]:
    """The JSON form of ``hooks``; a function hook has none (`LoopDefinitionError`)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for event, items in hooks.items():
        for hook in items:
            if isinstance(hook, FunctionHook):
                raise LoopDefinitionError(
                    f"Hook {hook.name} at {event!r} is a Python function, which has no JSON form. Use "
                    "command_hook([...]) in loops stored as JSON, or keep this loop in code."
                )
        out[event] = [hook.to_json() for hook in items]  # type: ignore[union-attr]
    return out


# --- running ------------------------------------------------------------------------------------------------


def check_sandbox() -> None:
    """Fail now (`UserError` naming what to install) when command hooks could not run on this host."""
    try:
        from ai_utils.deep._confine import find_bwrap, probe_bwrap
    except ImportError as error:
        raise UserError(f"command_hook needs the sandbox of DeepAgent: {error}") from error
    probe_bwrap(find_bwrap(None), switch_uid=65534 if os.geteuid() == 0 else None)


def _where(hook: Hook, event: HookEvent, step_key: str | None) -> str:
    return f"Hook {hook.name} at {event!r}" + (f" of step {step_key!r}" if step_key else "")


def _argv(hook: CommandHook, context: Mapping[str, Any], where: str, step_key: str | None) -> list[str]:
    out: list[str] = []
    for item in hook.argv:
        if isinstance(item, str):
            out.append(item)
            continue
        value = resolve(item, context, step_key=step_key)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise LoopError(
                f"{where}: {item['$context']!r} is a {type(value).__name__}; a command argument must be a string "
                "or a number. Bind a scalar path.",
                step_key=step_key,
            )
        text = str(value)
        if "\x00" in text or len(text) > MAX_TEXT_CHARS:
            raise LoopError(f"{where}: the value of {item['$context']!r} cannot be an argument.", step_key=step_key)
        out.append(text)
    return out


def _run_command(hook: CommandHook, argv: list[str], stdin: bytes, where: str, step_key: str | None) -> dict[str, Any]:
    from ai_utils.deep._sandbox import _SANDBOX_PATH, BwrapSandboxBackend

    workspace = tempfile.mkdtemp(prefix="ai_utils-hook-")
    try:
        sandbox = BwrapSandboxBackend(workspace, timeout=hook.timeout, **_HOOK_LIMITS)  # type: ignore[arg-type]
        full = sandbox.command_argv(shlex.join(argv))
        env = {"PATH": _SANDBOX_PATH, "HOME": "/workspace", "LANG": "C.UTF-8"}
        # stdout goes to a file outside the workspace: bounded by the sandbox's file-size limit, never our memory.
        with tempfile.TemporaryFile() as out:
            process = subprocess.Popen(
                full,
                cwd=workspace,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                process.communicate(stdin, timeout=hook.timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                raise LoopError(
                    f"{where} ran past its timeout of {hook.timeout:g} s and was killed. Raise `timeout` or make "
                    "the command faster.",
                    step_key=step_key,
                ) from None
            if process.returncode != 0:
                raise LoopError(
                    f"{where} exited with code {process.returncode}. Fix the command (it runs confined: no network, "
                    "no host files outside its workspace).",
                    step_key=step_key,
                )
            out.seek(0)
            raw = out.read(_MAX_STDOUT + 1)
    except OSError as error:
        raise LoopError(f"{where} could not run ({type(error).__name__}).", step_key=step_key) from error
    except UserError as error:  # bubblewrap missing or unusable here
        raise LoopError(f"{where} could not run: {error}", step_key=step_key) from error
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    if len(raw) > _MAX_STDOUT:
        raise LoopError(f"{where} printed more than {_MAX_STDOUT} bytes; print less.", step_key=step_key)
    text = raw.decode("utf-8", errors="replace")
    text = text[:-1] if text.endswith("\n") else text
    try:
        parsed = json.loads(text) if text.strip() else None
    except ValueError:
        parsed = None
    if data_problem(parsed, max_depth=MAX_CONTEXT_DEPTH) is not None:
        parsed = None
    return {"stdout": text, "exit_code": 0, "json": parsed}


def _event(base: Mapping[str, Any], event: HookEvent, step_key: str | None, status: str | None) -> dict[str, Any]:
    fields: dict[str, Any] = {**base, "type": event}
    if step_key is not None:
        fields["step_key"] = step_key
    if status is not None:
        fields["status"] = status
    return fields


def _function_result(hook: FunctionHook, value: object, where: str, step_key: str | None) -> Any:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise LoopError(f"{where} returned a {type(value).__name__}; a hook returns a dict or None.", step_key=step_key)
    problem = data_problem(value, max_depth=MAX_CONTEXT_DEPTH, max_nodes=1_000_000, max_text=1 << 24)
    if problem is not None:
        raise LoopError(f"{where} returned data that is not JSON ({problem}).", step_key=step_key)
    return jsonable(value)


def _fail(hook: Hook, error: BaseException, where: str, step_key: str | None) -> LoopError:
    if isinstance(error, LoopError):
        return error
    if isinstance(error, TimeoutError | concurrent.futures.TimeoutError):
        return LoopError(f"{where} ran past its timeout of {hook.timeout:g} s.", step_key=step_key)
    # The type only: an exception's text may quote context values.
    return LoopError(f"{where} raised {type(error).__name__}. Fix the hook; the run failed.", step_key=step_key)


def _call(hook: FunctionHook, event: dict[str, Any], context: Mapping[str, Any]) -> Any:
    payload = LoopEvent(event, context=copy.deepcopy(dict(context)))
    if hook.timeout is None:
        return hook.fn(payload)
    return _pool.submit(hook.fn, payload).result(timeout=hook.timeout)


def run_hooks(
    hooks: Hooks,
    event: HookEvent,
    context: dict[str, Any],
    base: Mapping[str, Any],
    *,
    step_key: str | None = None,
    status: str | None = None,
) -> dict[str, Any]:
    """Run the hooks of ``event`` in order; the context with their saved results.

    Raises:
        LoopError: a hook failed (named in the message).
    """
    for hook in hooks.get(event, ()):
        where = _where(hook, event, step_key)
        fields = _event(base, event, step_key, status)
        try:
            if isinstance(hook, CommandHook):
                stdin = json.dumps(fields).encode()
                value = _run_command(hook, _argv(hook, context, where, step_key), stdin, where, step_key)
            else:
                value = _function_result(hook, _call(hook, fields, context), where, step_key)
        except Exception as error:
            raise _fail(hook, error, where, step_key) from error
        if hook.save_as is not None and value is not None:
            context = write_path(context, hook.save_as, value)
    return context


async def arun_hooks(
    hooks: Hooks,
    event: HookEvent,
    context: dict[str, Any],
    base: Mapping[str, Any],
    *,
    step_key: str | None = None,
    status: str | None = None,
) -> dict[str, Any]:
    """Async twin of `run_hooks` (commands and timed functions wait in a worker thread)."""
    for hook in hooks.get(event, ()):
        where = _where(hook, event, step_key)
        fields = _event(base, event, step_key, status)
        try:
            if isinstance(hook, CommandHook):
                stdin = json.dumps(fields).encode()
                argv = _argv(hook, context, where, step_key)
                value = await asyncio.to_thread(_run_command, hook, argv, stdin, where, step_key)
            elif hook.timeout is None:
                value = _function_result(hook, _call(hook, fields, context), where, step_key)
            else:
                payload = LoopEvent(fields, context=copy.deepcopy(dict(context)))
                raw = await asyncio.wait_for(asyncio.to_thread(hook.fn, payload), hook.timeout)
                value = _function_result(hook, raw, where, step_key)
        except Exception as error:
            raise _fail(hook, error, where, step_key) from error
        if hook.save_as is not None and value is not None:
            context = write_path(context, hook.save_as, value)
    return context
