"""Every public error survives pickling (worker processes, task queues) with its message and attributes."""

from __future__ import annotations

import pickle

import pytest

import ai_utils
from ai_utils.gateway import PolicyDecision
from ai_utils.memory.supabase import SupabaseCheckpointError

ERRORS = [
    ai_utils.UserError("Bad value 'x'. Use 'y'."),
    ai_utils.ModelProfileError("Unknown profile 'p'.", profile="p"),
    ai_utils.ModelOutputError("Invalid reply.", errors="field required", attempts=3, output="{}"),
    ai_utils.ProviderError("claude-cli failed.", provider="claude-cli"),
    ai_utils.SessionFencedError("Lease lost.", session_id="s-1"),
    ai_utils.MessageIdInUseError("Id in use.", message_id="m-1"),
    ai_utils.SessionBusyError("Busy.", session_id="s-1"),
    ai_utils.LoopDefinitionError("Unknown step 'b'.", step_key="a"),
    ai_utils.LoopError("Missing ctx.x.", step_key="a", path="ctx.x"),
    ai_utils.LoopPermissionDeniedError("Denied.", step_key="a", rule_id="r1", tool="rm"),
    ai_utils.JevAPIError("Jev answered 429.", status=429, body={"error": "slow down"}, request_id="req-1"),
    ai_utils.JevResponseError("Not JSON.", status=200, body="<html>"),
    ai_utils.JevTimeoutError("No answer in 2.5 s.", timeout=2.5),
    ai_utils.JevConnectionError("Refused."),
    ai_utils.MCPConnectionError("Server 'files' died.", server="files"),
    ai_utils.GatewayError("Denied.", [PolicyDecision("require_actor", False, "needs an actor")]),
    ai_utils.AuditWriteError("Sink failed."),
    ai_utils.SupabaseVectorStoreError("Insert failed.", code="23505", written_ids=["a", "b"]),
    SupabaseCheckpointError("Write failed.", code=None),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
def test_an_error_pickles_with_its_message_and_attributes(error: ai_utils.AiUtilsError) -> None:
    copy = pickle.loads(pickle.dumps(error))

    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.args == error.args
    assert vars(copy) == vars(error)
    assert repr(copy) == repr(error)


def test_a_jev_timeout_is_still_a_timeout_error_after_pickling() -> None:
    copy = pickle.loads(pickle.dumps(ai_utils.JevTimeoutError("No answer in 2.5 s.", timeout=2.5)))

    assert isinstance(copy, TimeoutError)
    assert isinstance(copy, ai_utils.JevError)
    with pytest.raises(TimeoutError, match=r"No answer in 2\.5 s\."):
        raise copy
