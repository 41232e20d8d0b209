"""Adapters: the only modules that touch a dependency's private (underscore) API, one module per dependency.

Each module names what it relies on; ``tests/test_compat.py`` checks every name still exists with the
shape we use, so an upgrade that moves one fails there, naming the dependency and its version. Nothing
is imported here: each adapter loads only its own dependency, when its caller loads it.
Subclass hooks we override (``PostgresSaver._cursor``, ``FilesystemBackend._resolve_path``,
``BaseChatOpenAI._get_request_payload`` / ``_create_chat_result`` / ``_convert_chunk_to_generation_chunk``)
stay in the one subclass that overrides them; the same test checks them.
"""
