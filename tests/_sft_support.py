"""Checks shared by the teachers' SFT-row tests (ads and services): every call a valid call of
the row's exported tool schemas, no pasted helper library, the row ending in a submit."""

from __future__ import annotations

import json


def _calls(row):
    for message in row["messages"]:
        for call in message.get("tool_calls") or []:
            name, args = call["function"]["name"], call["function"]["arguments"]
            yield name, json.loads(args) if isinstance(args, str) else args


def assert_valid_calls(rows) -> None:
    """Each call's arguments are the schema's (required present, strings, enums respected)
    and each row ends with a submit."""
    for row in rows:
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in row["tools"]}
        for name, args in _calls(row):
            schema = schemas[name]
            assert set(args) <= set(schema["properties"]), (name, args)
            assert set(schema.get("required", [])) <= set(args), (name, args)
            for key, value in args.items():
                assert isinstance(value, str), (name, key)
                enum = schema["properties"][key].get("enum")
                assert enum is None or value in enum, (name, key, value)
        assert row["messages"][-1]["tool_calls"][-1]["function"]["name"] == "submit"


def assert_no_pasted_library(rows) -> None:
    """Queries, not a helper library defined in a tool argument."""
    for row in rows:
        for _, args in _calls(row):
            assert "def " not in json.dumps(args)
