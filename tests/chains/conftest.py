from __future__ import annotations

from _handbook import handbook, local_embeddings

__all__ = ["handbook", "local_embeddings"]  # fixtures, registered by being named here
