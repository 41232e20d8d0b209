"""Realistic samples of every secret shape guardrails redact, shared by the guardrails tests."""

from __future__ import annotations

PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

# kind -> (the secret value that must never leak, the text it appears in)
SECRETS: dict[str, tuple[str, str]] = {
    "openai_api_key": (k := "sk-proj-4fGh7Jk2Lm9Np3Qr5St8Uv1Wx6Yz0Ab2Cd", f"OPENAI_API_KEY={k}"),
    "openrouter_api_key": (k := "sk-or-v1-" + "0a1b2c3d4e5f6071" * 4, f"use {k} for openrouter"),
    "anthropic_api_key": (k := "sk-ant-api03-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2" * 2, f"key: {k}"),
    "aws_access_key": (k := "AKIAIOSFODNN7EXAMPLE", f"aws_access_key_id = {k}"),
    "aws_secret_key": (k := "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", f"aws_secret_access_key={k}"),
    "github_token": (k := "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", f"git clone https://{k}@github.com/acme/app"),
    "bearer_token": (k := "tok3nAbCdEfGhIjKlMnOpQrStUv", f"Authorization: Bearer {k}"),
    "private_key": (PRIVATE_KEY, f"the deploy key is\n{PRIVATE_KEY}\nkeep it safe"),
    "jwt": (JWT, f"session={JWT}"),
    "slack_token": (k := "xoxb-2048-4096-AbCdEfGhIjKl", f"slack {k}"),
    "google_api_key": (k := "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", f"maps key {k}"),
    "stripe_key": (k := "sk_live_51H8abcdefGHIJKLmnop", f"stripe {k}"),
}
