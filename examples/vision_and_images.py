"""Modalities: generate a product image, ask a vision model about it, and classify the answer with your own model.

Offline it starts `FakeOpenAIServer` (OpenAI/OpenRouter Chat Completions on 127.0.0.1, with images and
logprobs) and every call goes there over real HTTP; with OPENROUTER_API_KEY set it uses OpenRouter
(`generate_images` with Gemini's image model; `vision` and `classify(llm=...)` with openai/gpt-4.1-mini, a
vision model that returns logprobs -- reasoning models do not).
Run: `.venv/bin/python examples/vision_and_images.py`
"""

from __future__ import annotations

import base64
import os
import struct
import tempfile
import zlib
from contextlib import ExitStack
from pathlib import Path

from ai_utils import classify, generate_images, get_llm, vision
from ai_utils.testing import FakeOpenAIServer

QUESTIONS = {
    "style": {
        "type": "choice",
        "instructions": "Which style does the image `description` describe?",
        "criteria": {"minimal": "Plain background, one object", "busy": "Many objects", "photo": "A real-life scene"},
    },
    "shop_ready": {"type": "noul", "instructions": "Is the image in `description` suitable for an online shop?"},
}


def tiny_png(width: int = 8, height: int = 8) -> bytes:
    """A real PNG (white square), built with zlib so the example needs no imaging library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\xff" * (width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def script(server: FakeOpenAIServer) -> None:
    server.reply("Here is your hero image.", images=[tiny_png()], when="Generate")
    server.reply("A white kettle on a plain white background.", when="Describe the product")
    server.reply("A", logprobs={"A": -0.05, "B": -3.4, "C": -4.1}, when="Which style")
    server.reply("Yes", logprobs={"Yes": -0.04, "No": -3.3}, when="online shop")


def main() -> None:
    online = bool(os.environ.get("OPENROUTER_API_KEY"))
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if online:
            print("(OpenRouter: Gemini image model, openai/gpt-4.1-mini)")
            wiring: dict[str, str] = {}
            llm = get_llm("openrouter", "openai/gpt-4.1-mini")
        else:
            print("(offline: FakeOpenAIServer on 127.0.0.1; set OPENROUTER_API_KEY for the real models)")
            server = stack.enter_context(FakeOpenAIServer())
            script(server)
            wiring = {"base_url": server.url, "api_key": server.api_key or ""}
            llm = get_llm("local", "fake-vision", **wiring)

        [hero] = generate_images(
            "Generate a clean product hero image of a white kettle",
            image_config={"aspect_ratio": "16:9", "image_size": "2K"},
            **wiring,
        )
        print(f"generate_images -> {hero.mime_type}, {len(hero.data)} bytes")

        mislabelled = hero.save(workdir / "hero.jpg")  # PNG bytes under a .jpg name: sent as image/png anyway
        description = vision("Describe the product in this picture in one sentence.", [mislabelled], llm=llm)
        print(f"vision          -> {description}")
        if not online:
            sent = server.requests[-1].body["messages"][0]["content"][1]["image_url"]["url"]
            mime, payload = sent.split(";", 1)[0].removeprefix("data:"), sent.split(",", 1)[1]
            print(f"                   (sent as {mime}, {len(base64.b64decode(payload))} bytes)")

        result = classify({"description": description}, QUESTIONS, llm=llm)
        style, shop_ready = result.choices["style"], result.nouls["shop_ready"]
        print(f"classify(llm=)  -> style={style.choice} (confidence {style.confidence:.2f})", end="  ")
        print(f"P(shop ready)={shop_ready.noul:.2f}")


if __name__ == "__main__":
    main()
