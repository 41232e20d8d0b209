"""Modalities: ask a chat model about images (`vision`) and generate images (`generate_images`), with async twins."""

from __future__ import annotations

from ai_utils._images import Detail, ImageInput
from ai_utils.modalities.generate import DEFAULT_IMAGE_MODEL, GeneratedImage, agenerate_images, generate_images
from ai_utils.modalities.vision import avision, vision

__all__ = [
    "DEFAULT_IMAGE_MODEL",
    "Detail",
    "GeneratedImage",
    "ImageInput",
    "agenerate_images",
    "avision",
    "generate_images",
    "vision",
]
