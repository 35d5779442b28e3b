"""A session's tools as typed, docstringed Python functions, for trainers that read a tool's
schema off a function (TRL through ``transformers.utils.get_json_schema``).

Pure: ``tool_function(tool, call)`` turns one OpenAI function-calling tool, as
``envcraft tools`` prints it, into a function named after the tool whose signature, type
hints and Google-style docstring give back that tool's schema: its description, each
argument's type (``str``, ``int``, ``float``, ``bool``, ``Literal[...]`` for an ``enum``,
``List[...]`` for ``items``, ``Dict[str, ...]`` for ``additionalProperties``) and description,
and which arguments are required. Calling it calls ``call(receiver, tool_name, args)`` with
the arguments given (those left out are not sent, so the server applies its own defaults).

What ``get_json_schema`` cannot write is not in the function: ``UNEXPRESSED`` lists those
keywords (a bound such as ``minimum``, a ``default``); the server still checks them when the
call arrives. A schema this module cannot express at all raises ``ToolSchemaError``.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Callable, Dict, List, Literal, Mapping, Sequence, Tuple

# Keywords of envcraft's argument schemas that `get_json_schema` has no way to write.
UNEXPRESSED = ("default", "minimum", "maximum")
# The keywords this module turns into Python; any other in a tool's schema is refused.
EXPRESSED = ("type", "description", "enum", "items", "additionalProperties")

# How a tool method runs its tool: call(receiver, tool name, arguments given).
Call = Callable[[Any, str, Dict[str, Any]], Any]


class ToolSchemaError(ValueError):
    """A tool whose schema has no typed Python signature (names the tool and argument)."""


class _Unset:
    """The default of an optional argument: left out of the call, not sent as ``null``."""

    _instance = None

    def __new__(cls) -> "_Unset":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<server default>"


UNSET: Any = _Unset()


def openai_function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``{"name", "description", "parameters"}`` of a tool in OpenAI's
    ``{"type": "function", "function": {...}}`` shape or already bare."""
    inner = tool.get("function")
    return inner if isinstance(inner, Mapping) else tool


def python_type(schema: Mapping[str, Any], where: str) -> Any:
    """The type hint ``get_json_schema`` maps back to ``schema``."""
    unknown = sorted(set(schema) - set(EXPRESSED) - set(UNEXPRESSED))
    if unknown:
        raise ToolSchemaError(f"{where}: schema keywords {unknown} have no Python type hint")
    if "enum" in schema:
        values = tuple(schema["enum"])
        if not values or any(type(v) not in (str, int, float, bool) for v in values):
            raise ToolSchemaError(f"{where}: enum {list(values)!r} is not a list of JSON scalars")
        kinds = {type(v) for v in values}
        expected = {"string": {str}, "integer": {int}, "number": {float, int}, "boolean": {bool}}.get(schema.get("type", ""))
        if expected is None or not kinds <= expected:
            raise ToolSchemaError(f"{where}: enum of type {schema.get('type')!r} holds {sorted(k.__name__ for k in kinds)}")
        return Literal[values]  # type: ignore[valid-type]
    kind = schema.get("type")
    scalars = {"string": str, "integer": int, "number": float, "boolean": bool}
    if isinstance(kind, str) and kind in scalars:
        return scalars[kind]
    if kind == "array":
        items = schema.get("items")
        return List[python_type(items, where + "[]")] if items else list  # type: ignore[misc]
    if kind == "object":
        values = schema.get("additionalProperties")
        if isinstance(values, Mapping) and values:
            return Dict[str, python_type(values, where + "{}")]  # type: ignore[misc]
        return dict
    raise ToolSchemaError(f"{where}: JSON schema type {kind!r} has no Python type hint")


def _one_line(text: str, where: str) -> str:
    if "\n" in text:
        raise ToolSchemaError(f"{where}: a multi-line argument description cannot be kept in a docstring")
    return text


def docstring(description: str, args: Sequence[Tuple[str, str]]) -> str:
    """A Google-style docstring whose parse (``parse_google_format_docstring``) gives back
    ``description`` and each argument's description."""
    lines = [description.strip() or "(no description)"]
    if args:
        lines += ["", "Args:"] + [f"    {name}: {text}" for name, text in args]
    return "\n".join(lines) + "\n"


def tool_function(tool: Mapping[str, Any], call: Call, first: str = "self") -> Callable[..., Any]:
    """A function named after ``tool``, with ``first`` (the receiver, untyped) and one typed
    keyword-only parameter per argument: required ones first, in the schema's ``required``
    order, then the optional ones defaulting to ``UNSET``."""
    fn = openai_function(tool)
    name = str(fn["name"])
    if not name.isidentifier():
        raise ToolSchemaError(f"tool {name!r}: not a Python identifier")
    params_schema = fn.get("parameters") or {}
    props: Mapping[str, Mapping[str, Any]] = params_schema.get("properties") or {}
    required: List[str] = list(params_schema.get("required") or [])
    missing = [r for r in required if r not in props]
    if missing:
        raise ToolSchemaError(f"tool {name}: required arguments {missing} have no schema")
    order = required + [p for p in props if p not in required]
    params = [inspect.Parameter(first, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: Dict[str, Any] = {}
    described: List[Tuple[str, str]] = []
    for arg in order:
        where = f"tool {name}: argument {arg}"
        if not arg.isidentifier() or arg == first:
            raise ToolSchemaError(f"{where}: not usable as a Python parameter name")
        hint = python_type(props[arg], where)
        annotations[arg] = hint
        default = inspect.Parameter.empty if arg in required else UNSET
        try:
            params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hint))
        except ValueError as e:  # a Python keyword
            raise ToolSchemaError(f"{where}: {e}") from None
        described.append((arg, _one_line(str(props[arg].get("description", "")), where)))

    def tool_method(receiver: Any, /, **kwargs: Any) -> Any:
        return call(receiver, name, {k: v for k, v in kwargs.items() if v is not UNSET})

    tool_method.__name__ = name
    tool_method.__qualname__ = name
    tool_method.__doc__ = docstring(str(fn.get("description") or ""), described)
    tool_method.__annotations__ = annotations
    tool_method.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return tool_method


def comparable(schema: Mapping[str, Any]) -> Dict[str, Any]:
    """``schema`` (one tool's ``parameters``) without what ``get_json_schema`` cannot write,
    with ``required`` as a list always: what the two schemas are compared on."""
    out: Dict[str, Any] = {"type": schema.get("type", "object"), "required": list(schema.get("required") or [])}
    out["properties"] = {
        arg: {k: v for k, v in prop.items() if k not in UNEXPRESSED} for arg, prop in (schema.get("properties") or {}).items()
    }
    return out


def _text_encoder() -> Callable[[Any], str]:
    """``json.dumps(obj, ensure_ascii=False)``, without building a ``JSONEncoder`` and its C
    encoder for every call (two thirds of the cost for a tool result): the C encoder that
    ``JSONEncoder.iterencode`` makes, made once, with no circular-reference check (a decoded
    answer is a tree). Where it is missing, or gives other text on a probe, the slow path."""
    plain = json.JSONEncoder(ensure_ascii=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return plain.encode
    try:
        encoder = make(None, plain.default, json.encoder.encode_basestring, None, plain.key_separator,
                       plain.item_separator, False, False, True)
        probe = {"ok": True, "n": [1, -2.5, 1e300, None, False], "s": "é\n\"\u2028😀", "o": {"b": {}, "a": []}}
        if "".join(encoder(probe, 0)) != plain.encode(probe):
            return plain.encode
    except Exception:  # another interpreter's C encoder
        return plain.encode

    def encode(obj: Any) -> str:
        if not isinstance(obj, (dict, list)):
            return plain.encode(obj)  # a bare string or number: JSONEncoder's own fast paths
        return "".join(encoder(obj, 0))

    return encode


_encode_text = _text_encoder()


def result_text(result: Any) -> str:
    """A tool's result as the text a trainer hands the model: its JSON (as
    ``json.dumps(result, ensure_ascii=False)``; the server already sends its keys sorted)."""
    return _encode_text(result)
