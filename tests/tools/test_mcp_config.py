from __future__ import annotations

import pickle
import subprocess
import sys

import httpx
import pytest

from ai_utils.exceptions import UserError
from ai_utils.tools._mcp_config import (
    MCPConnectionError,
    MCPServer,
    describe_mcp_servers,
    normalize_mcp_servers,
)


def test_url_server_keeps_its_settings_as_data() -> None:
    params = {"take_action": {"permission": ["read", "write"]}}
    server = MCPServer("crm", "https://crm.example.com/mcp", headers={"X-Tenant": "t1"}, params=params)
    assert (server.name, server.url, server.command) == ("crm", "https://crm.example.com/mcp", None)
    assert dict(server.headers or {}) == {"X-Tenant": "t1"}
    assert server.params is not None and server.params["take_action"] == {"permission": ["read", "write"]}
    assert server.target == "https://crm.example.com/mcp"


def test_stdio_server_turns_args_into_a_tuple_and_shows_its_command_line() -> None:
    server = MCPServer("files", command="npx", args=["-y", "server-filesystem", "."], cwd="/tmp", env={"A": "1"})
    assert server.args == ("-y", "server-filesystem", ".")
    assert server.target == "npx -y server-filesystem ."


def test_server_is_frozen() -> None:
    server = MCPServer("crm", "https://crm.example.com/mcp")
    with pytest.raises(AttributeError):
        server.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize("name", ["", "  ", None])
def test_empty_name_is_a_user_error(name: object) -> None:
    with pytest.raises(UserError, match="non-empty"):
        MCPServer(name, "https://x/mcp")  # type: ignore[arg-type]


def test_double_underscore_in_name_is_a_user_error_explaining_tool_names() -> None:
    with pytest.raises(UserError, match=r"`<server>__<tool>`"):
        MCPServer("my__crm", "https://x/mcp")


def test_url_and_command_together_or_neither_are_user_errors() -> None:
    with pytest.raises(UserError, match="exactly one of `url`"):
        MCPServer("crm", "https://x/mcp", command="node")
    with pytest.raises(UserError, match="exactly one of `url`"):
        MCPServer("crm")


def test_url_without_http_scheme_is_a_user_error_pointing_to_command() -> None:
    with pytest.raises(UserError, match="`command=`"):
        MCPServer("crm", "crm.example.com/mcp")


def test_args_given_as_one_string_is_a_user_error() -> None:
    with pytest.raises(UserError, match="list of strings"):
        MCPServer("files", command="node", args="server.js")


def test_empty_command_is_a_user_error() -> None:
    with pytest.raises(UserError, match="non-empty string"):
        MCPServer("files", command="")


def test_headers_that_are_no_mapping_are_a_user_error() -> None:
    with pytest.raises(UserError, match="`headers` must be a mapping"):
        MCPServer("crm", "https://x/mcp", headers=["Authorization: Bearer x"])  # type: ignore[arg-type]


def test_repr_hides_header_values_auth_env_values_and_url_secrets() -> None:
    server = MCPServer(
        "crm",
        "https://user:pw@crm.example.com:8443/mcp?token=q1",
        headers={"Authorization": "Bearer s3cret"},
        auth=httpx.BasicAuth("u", "basic-pw"),
        description="CRM",
        params={"get_contact": {"id": [1]}},
    )
    text = repr(server)
    for secret in ("s3cret", "basic-pw", "q1", "pw@", "user"):
        assert secret not in text
    assert "'Authorization': '***'" in text
    assert "https://crm.example.com:8443/mcp?***" in text
    assert "auth=<BasicAuth>" in text
    stdio = repr(MCPServer("files", command="node", args=["s.js"], env={"API_KEY": "k3y"}, cwd="/srv"))
    assert "k3y" not in stdio
    assert stdio == "MCPServer('files', command='node', args=['s.js'], env={'API_KEY': '***'}, cwd='/srv')"
    assert repr(MCPServer("files", command="node")) == "MCPServer('files', command='node')"


def test_unparsable_url_is_masked_whole_in_repr() -> None:
    assert "secret" not in repr(MCPServer("crm", "http://secret@host:99999999/mcp"))


def test_normalize_accepts_one_server_a_mapping_a_sequence_and_none() -> None:
    crm = MCPServer("crm", "https://crm/mcp")
    assert normalize_mcp_servers(None) == ()
    assert normalize_mcp_servers(crm) == (crm,)
    assert normalize_mcp_servers({"name": "crm", "url": "https://crm/mcp"}) == (crm,)
    files = MCPServer("files", command="node")
    assert normalize_mcp_servers([crm, files]) == (crm, files)


def test_normalize_rejects_duplicate_names_and_foreign_items() -> None:
    with pytest.raises(UserError, match="Two MCP servers are named 'crm'"):
        normalize_mcp_servers([MCPServer("crm", "https://a/mcp"), MCPServer("crm", "https://b/mcp")])
    with pytest.raises(UserError, match="is not an `MCPServer`"):
        normalize_mcp_servers(["https://a/mcp"])  # type: ignore[list-item]
    with pytest.raises(UserError, match=r"\['token'\] are unknown"):
        normalize_mcp_servers({"name": "crm", "url": "https://a/mcp", "token": "x"})


def test_describe_lists_only_servers_with_a_description() -> None:
    servers = [
        MCPServer("crm", "https://crm/mcp", description="CRM-Daten für Kontakte, Firmen und Deals."),
        MCPServer("files", command="node"),
        MCPServer("blank", command="node", description="  "),
    ]
    assert describe_mcp_servers(servers) == (
        "MCP server `crm` (tools `crm__*`): CRM-Daten für Kontakte, Firmen und Deals."
    )
    assert describe_mcp_servers([]) == ""


def test_connection_error_pickles_with_its_server() -> None:
    error = pickle.loads(pickle.dumps(MCPConnectionError("down", server="crm")))
    assert (str(error), error.server) == ("down", "crm")


def test_config_imports_without_the_mcp_extra_and_the_mcp_module_names_the_extra() -> None:
    script = """
import sys
for name in ("mcp", "langchain_mcp_adapters"):
    sys.modules[name] = None  # as if the `mcp` extra were not installed
from ai_utils.tools._mcp_config import MCPServer
MCPServer("crm", "https://crm.example.com/mcp")
try:
    import ai_utils.tools.mcp
except ImportError as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == (
        'Please install `langchain-mcp-adapters` to use MCP servers: `pip install "ai-utils[mcp]"`'
    )
