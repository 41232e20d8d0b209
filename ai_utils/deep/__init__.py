"""Deep agents: `DeepAgent` (planning, files, subagents, approval), its backends and permissions.

Importing this package imports nothing optional; `DeepAgent` loads ``deepagents`` on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ai_utils._lazy import lazy_exports

if TYPE_CHECKING:
    from ai_utils.deep.agent import DeepAgent
    from ai_utils.deep.backends import (
        BwrapSandboxBackend,
        create_filesystem_backend,
        create_local_shell_backend,
        create_sandbox_backend,
        create_state_backend,
        create_workspace_backend,
        sandbox_shell_prompt,
    )
    from ai_utils.deep.permissions import (
        CommandPolicy,
        allow_read,
        allow_write,
        deny_read,
        deny_write,
        workspace_permissions,
    )

_LAZY = {
    "BwrapSandboxBackend": "ai_utils.deep.backends",
    "CommandPolicy": "ai_utils.deep.permissions",
    "DeepAgent": "ai_utils.deep.agent",
    "allow_read": "ai_utils.deep.permissions",
    "allow_write": "ai_utils.deep.permissions",
    "create_filesystem_backend": "ai_utils.deep.backends",
    "create_local_shell_backend": "ai_utils.deep.backends",
    "create_sandbox_backend": "ai_utils.deep.backends",
    "create_state_backend": "ai_utils.deep.backends",
    "create_workspace_backend": "ai_utils.deep.backends",
    "deny_read": "ai_utils.deep.permissions",
    "deny_write": "ai_utils.deep.permissions",
    "sandbox_shell_prompt": "ai_utils.deep.backends",
    "workspace_permissions": "ai_utils.deep.permissions",
}

__all__ = [
    "BwrapSandboxBackend",
    "CommandPolicy",
    "DeepAgent",
    "allow_read",
    "allow_write",
    "create_filesystem_backend",
    "create_local_shell_backend",
    "create_sandbox_backend",
    "create_state_backend",
    "create_workspace_backend",
    "deny_read",
    "deny_write",
    "sandbox_shell_prompt",
    "workspace_permissions",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
