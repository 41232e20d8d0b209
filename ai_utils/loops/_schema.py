"""An agent step's JSON-schema ``output`` as a pydantic model, so its answers are validated like a pydantic ``output``.

LangChain's structured output hands a JSON-schema dict's answer back unchecked; a loop loaded from JSON (whose
``output`` is the stored schema) would then accept any object — a refund capped at 100 would run for 1,000,000.
Here the schema becomes a pydantic model (`pydantic.create_model`) that `create_agent` validates exactly as it
validates a pydantic ``output``: an invalid answer goes back to the model as an error, and the model tries again.

The schema vocabulary is what pydantic writes (`BaseModel.model_json_schema`): types, ``properties``/``required``,
``additionalProperties``, ``items``/``prefixItems``, ``enum``/``const``, ``anyOf``/``oneOf``/``allOf``, ``$ref`` into
``$defs``, numeric and length bounds, ``pattern`` (pydantic's linear-time regex engine) and the common string
formats. A keyword outside it is refused with `LoopDefinitionError` — an unknown constraint is never silently
dropped. The model's ``model_json_schema()`` is the stored schema itself, so the model sees what was declared.
"""

from __future__ import annotations

import datetime
import re
import uuid
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NoReturn, Union

from pydantic import AfterValidator, AnyUrl, BaseModel, ConfigDict, Field, PydanticUserError, create_model
from pydantic_core import SchemaError

from ai_utils.exceptions import LoopDefinitionError

__all__ = ["model_from_schema"]

_ANNOTATIONS = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment", "$schema"}
)
_KEYWORDS = _ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "$defs",
    "definitions",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "discriminator",
    "minProperties",
    "maxProperties",
}
_FORMATS: dict[str, Any] = {
    "date-time": datetime.datetime,
    "date": datetime.date,
    "time": datetime.time,
    "duration": datetime.timedelta,
    "uuid": uuid.UUID,
    "uuid1": uuid.UUID,
    "uuid3": uuid.UUID,
    "uuid4": uuid.UUID,
    "uuid5": uuid.UUID,
    "uri": AnyUrl,
}
_SCALARS = (str, int, float, bool, type(None))
_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


class _Build:
    """One conversion: the ``$defs`` and the models made from them (a ``$ref`` cycle is refused)."""

    def __init__(self, root: Mapping[str, Any], where: str) -> None:
        self.where = where
        defs = root.get("$defs", root.get("definitions")) or {}
        if not isinstance(defs, Mapping):
            self.fail("$defs must be an object")
        self.defs: Mapping[str, Any] = defs
        self.models: dict[str, Any] = {}
        self.building: set[str] = set()

    def fail(self, problem: str) -> NoReturn:
        raise LoopDefinitionError(
            f"{self.where}: the output schema {problem}. Use the JSON schema vocabulary pydantic writes "
            "(Model.model_json_schema())."
        )

    def ref(self, ref: object) -> Any:
        prefix = "#/$defs/" if isinstance(ref, str) and ref.startswith("#/$defs/") else "#/definitions/"
        if not isinstance(ref, str) or not ref.startswith(prefix) or ref[len(prefix) :] not in self.defs:
            self.fail(f"has a $ref that names no entry of $defs: {repr(ref)[:80]}")
        name = ref[len(prefix) :]
        if name in self.models:
            return self.models[name]
        if name in self.building:
            self.fail(f"refers to itself through $ref {ref!r} (recursive schemas are not supported)")
        self.building.add(name)
        self.models[name] = self.annotation(self.defs[name], name)
        self.building.discard(name)
        return self.models[name]

    def annotation(self, node: object, name: str) -> Any:
        if node is True or node == {}:
            return Any
        if not isinstance(node, Mapping):
            self.fail(f"has {repr(node)[:80]} where a schema object belongs")
        unknown = sorted(set(node) - _KEYWORDS)
        if unknown:
            self.fail(f"uses keyword(s) {[str(k)[:40] for k in unknown][:5]!r}, which are not supported")
        if "$ref" in node:
            return self.ref(node["$ref"])
        combined = self._combined(node, name)
        if combined is not None:
            return combined
        kind = node.get("type")
        if isinstance(kind, list):
            if not kind:
                self.fail("has an empty type list")
            return Union[tuple(self.annotation({**node, "type": k}, name) for k in kind)]  # noqa: UP007
        if kind is None:
            if "properties" not in node:
                return Any
            kind = "object"
        return self._typed(kind, node, name)

    def _combined(self, node: Mapping[str, Any], name: str) -> Any:
        """``anyOf``/``oneOf``/``allOf``/``const``/``enum``, or ``None`` when the node has none of them."""
        for key in ("anyOf", "oneOf"):
            if key in node:
                options = node[key]
                if not isinstance(options, list) or not options:
                    self.fail(f"has an empty or non-list {key}")
                return Union[tuple(self.annotation(option, name) for option in options)]  # noqa: UP007
        if "allOf" in node:
            parts = node["allOf"]
            if not isinstance(parts, list) or len(parts) != 1:
                self.fail("uses allOf with other than one schema (only pydantic's allOf: [$ref] is supported)")
            return self.annotation(parts[0], name)
        if "const" in node:
            return self._literal([node["const"]])
        if "enum" in node:
            return self._literal(node["enum"])
        return None

    def _literal(self, values: object) -> Any:
        if not isinstance(values, list) or not values or not all(isinstance(v, _SCALARS) for v in values):
            self.fail(f"has an enum/const that is not a non-empty list of scalars: {repr(values)[:80]}")
        return Literal[tuple(values)]

    def _typed(self, kind: object, node: Mapping[str, Any], name: str) -> Any:
        if kind == "string":
            fmt = node.get("format")
            if fmt is not None:
                if fmt not in _FORMATS:
                    self.fail(f"uses format {fmt!r}; supported: {sorted(_FORMATS)!r}")
                return _FORMATS[fmt]
            return Annotated[
                str,
                Field(min_length=node.get("minLength"), max_length=node.get("maxLength"), pattern=node.get("pattern")),
            ]
        if kind in ("integer", "number"):
            bounds = Field(
                ge=node.get("minimum"),
                le=node.get("maximum"),
                gt=node.get("exclusiveMinimum"),
                lt=node.get("exclusiveMaximum"),
                multiple_of=node.get("multipleOf"),
            )
            number: type = int if kind == "integer" else float
            return Annotated[number, bounds]
        if kind == "boolean":
            return bool
        if kind == "null":
            return type(None)
        if kind == "array":
            return self._array(node, name)
        if kind == "object":
            return self._object(node, name)
        self.fail(f"has an unknown type {repr(kind)[:40]}")

    def _array(self, node: Mapping[str, Any], name: str) -> Any:
        bounds = Field(min_length=node.get("minItems"), max_length=node.get("maxItems"))
        if "prefixItems" in node:
            items = node["prefixItems"]
            if not isinstance(items, list) or not items:
                self.fail("has an empty or non-list prefixItems")
            return tuple[tuple(self.annotation(item, name) for item in items)]  # type: ignore[misc]
        item = self.annotation(node.get("items", True), name)
        if node.get("uniqueItems") is True:
            return Annotated[list[item], bounds, AfterValidator(_unique)]  # type: ignore[valid-type]
        return Annotated[list[item], bounds]  # type: ignore[valid-type]

    def _object(self, node: Mapping[str, Any], name: str) -> Any:
        properties = node.get("properties")
        extra = node.get("additionalProperties", True)
        if properties is None:
            value = Any if extra in (True, None) else self.annotation(extra, name)
            bounds = Field(min_length=node.get("minProperties"), max_length=node.get("maxProperties"))
            return Annotated[dict[str, value], bounds]  # type: ignore[valid-type]
        if not isinstance(properties, Mapping):
            self.fail("has properties that are not an object")
        required = node.get("required") or []
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            self.fail(f"has a required list that is not a list of names: {required!r}")
        fields: dict[str, Any] = {}
        for index, (prop, schema) in enumerate(properties.items()):
            annotation = self.annotation(schema, f"{name}_{prop}")
            description = schema.get("description") if isinstance(schema, Mapping) else None
            if prop in required:
                info = Field(alias=prop, description=description)
            else:
                default = schema.get("default") if isinstance(schema, Mapping) else None
                info = Field(default=default, alias=prop, description=description)
            # Positional field names: a property may be called `model_config`, `json` or `not an identifier`.
            fields[f"f{index}"] = (annotation, info)
        title = node["title"] if isinstance(node.get("title"), str) else name
        config = ConfigDict(
            extra="forbid" if extra is False else "ignore",
            serialize_by_alias=True,
            validate_by_alias=True,
            validate_by_name=False,
        )
        try:
            return create_model(_class_name(title), __config__=config, __doc__=node.get("description"), **fields)
        except (TypeError, ValueError, SchemaError, PydanticUserError) as error:  # e.g. a pattern with look-around
            self.fail(f"could not be built ({type(error).__name__}: {str(error)[:200]})")


def _unique(items: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for item in items:
        if item in seen:
            raise ValueError("items must be unique")
        seen.append(item)
    return items


def _class_name(title: str) -> str:
    name = _IDENTIFIER.sub("_", title) or "Output"
    return name if not name[0].isdigit() else f"_{name}"


def model_from_schema(schema: Mapping[str, Any], *, where: str) -> type[BaseModel]:
    """The pydantic model that validates answers against ``schema`` (an object schema).

    Args:
        schema: a JSON schema with ``"type": "object"`` (or ``properties``); its size and depth are checked before.
        where: names the step in errors, e.g. ``"Step 'triage'"``.

    Raises:
        LoopDefinitionError: the schema is not an object schema, or uses a keyword that is not supported.
    """
    build = _Build(schema, where)
    root = build.annotation(schema, str(schema.get("title") or "Output"))
    if not (isinstance(root, type) and issubclass(root, BaseModel)):
        build.fail('must describe an object ({"type": "object", "properties": {...}})')
    stored = dict(schema)

    def model_json_schema(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return dict(stored)

    # What the model is shown (LangChain reads `model_json_schema()`): the declared schema, unchanged.
    root.model_json_schema = model_json_schema  # type: ignore[method-assign]
    return root
