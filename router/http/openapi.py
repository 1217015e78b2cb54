"""The OpenAPI document, completed: the `Problem` schema, each configured task's own input
schema (from its contract), and parameters that are simply absent rather than `null`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI

from jobrouter.http.problems import Problem
from jobrouter.models import JobEvent
from jobrouter.tasks import TaskRuntime

Schema = dict[str, Any]

# One server-sent event, as OpenAPI before 3.2 describes the items of an event stream.
SSE_EVENT: Schema = {
    "type": "object",
    "required": ["id", "event", "data"],
    "properties": {
        "id": {"type": "string", "description": "the event's seq: send it as Last-Event-ID"},
        "event": {"type": "string", "description": "the event's kind, e.g. job.succeeded"},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {"$ref": "#/components/schemas/JobEvent"},
        },
    },
}


def install(app: FastAPI, tasks: Mapping[str, TaskRuntime]) -> None:
    build = app.openapi

    def openapi() -> Schema:
        if app.openapi_schema is None:
            document = build()
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            schemas["Problem"] = Problem.model_json_schema(
                ref_template="#/components/schemas/{model}"
            )
            _event_schema(schemas)
            _absent_not_null(document)
            _problems_for_validation(document, schemas)
            if tasks and "SubmitJob" in schemas:
                schemas["SubmitJob"] = _submit_variants(schemas["SubmitJob"], tasks)
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _event_schema(schemas: Schema) -> None:
    """`JobEvent`, the JSON in each server-sent event's `data` (see `SSE_EVENT`)."""
    event = JobEvent.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in event.pop("$defs", {}).items():
        schemas.setdefault(name, definition)
    schemas["JobEvent"] = event


def _operations(document: Schema) -> list[Schema]:
    return [
        operation
        for path in document.get("paths", {}).values()
        for operation in path.values()
        if isinstance(operation, dict)
    ]


def _absent_not_null(document: Schema) -> None:
    """An optional header or query parameter is absent or has a value; HTTP has no `null`."""
    for operation in _operations(document):
        for parameter in operation.get("parameters", []):
            schema = parameter.get("schema", {})
            variants = schema.get("anyOf")
            if not parameter.get("required") and isinstance(variants, list):
                kept = [variant for variant in variants if variant.get("type") != "null"]
                if len(kept) == 1:
                    schema.pop("anyOf")
                    schema.update(kept[0])


def _problems_for_validation(document: Schema, schemas: Schema) -> None:
    """Request validation answers with problem+json (see problems.py), not FastAPI's body."""
    for operation in _operations(document):
        answer = operation.get("responses", {}).get("422")
        if answer is not None:
            answer["content"] = {
                "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
            }
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)


def _submit_variants(base: Schema, tasks: Mapping[str, TaskRuntime]) -> Schema:
    """`SubmitJob` as one variant per configured task, with that task's contract input schema."""
    generic = base["properties"]["input"]
    variants = []
    for name, runtime in sorted(tasks.items()):
        contract = runtime.contract
        given = contract.input_schema if contract is not None else None
        usable = given is not None and "$ref" not in repr(given)  # refs would point elsewhere
        input_schema = (
            {key: value for key, value in (given or {}).items() if key not in ("$schema", "$id")}
            if usable
            else generic
        )
        variants.append(
            {
                **{key: value for key, value in base.items() if key != "title"},
                "title": f"SubmitJob[{name}]",
                "properties": {
                    **base["properties"],
                    "task": {"type": "string", "const": name},
                    "input": input_schema,
                },
            }
        )
    return {"title": "SubmitJob", "description": base.get("description", ""), "oneOf": variants}
