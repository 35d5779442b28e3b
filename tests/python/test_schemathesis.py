"""schemathesis drives a real ``envcraft serve`` from the OpenAPI document it serves
(``GET /openapi.json``): requests generated for every operation, valid and invalid, and for
each answer: no 5xx, a status code the document lists for that operation, a body that conforms
to the documented schema, the documented content type.

Bounded: ``SCHEMATHESIS_EXAMPLES`` examples per operation (default 25), no shrinking deadline,
so the run takes a minute or so. Sessions it manages to create are closed at the end (the
server is stopped and its state directory removed by the fixture)."""

from __future__ import annotations

import collections
import os

import pytest
import requests

from conftest import require

try:
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_schema_conformance,
        status_code_conformance,
    )
except ImportError as missing:
    schemathesis = None
    MISSING = str(missing)

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "25"))

if schemathesis is not None:
    # An upload's body is a tar: sent as the raw bytes generated for its binary schema (the
    # server refuses most of them as not a tar, with the documented 400).
    schemathesis.serializer.alias("application/x-tar", "application/octet-stream")


CHECKS = None if schemathesis is None else [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
]


ANSWERED = collections.Counter()


def call_and_check(case, url):
    """Send `case`, close any session its answer made (none piles up), check the answer."""
    response = case.call(base_url=url, timeout=60)
    ANSWERED[(case.operation.label, response.status_code // 100)] += 1
    made = case.method.upper() == "POST" and (case.path == "/v1/sessions" or case.path.endswith("/fork"))
    if made and response.status_code == 201:
        session = response.json().get("session_id")
        assert requests.delete(f"{url}/v1/sessions/{session}", timeout=30).status_code == 200
    case.validate_response(response, checks=CHECKS)
    return response


def exercise(operation, mode, url, path_parameters=None):
    """Run `EXAMPLES` generated cases of `operation` in `mode`; raises on the first failure
    (not shrunk: the failing case is reported as generated, to keep the run bounded)."""

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
    def run(case):
        call_and_check(case, url)

    run()


def test_every_answer_is_documented_and_none_is_a_server_error(real_server):
    require(schemathesis is not None, f"schemathesis is not installed ({'' if schemathesis else MISSING}): `make test` installs it")
    url = real_server.url
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
    operations = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        operations[operation.label] = operation
    assert len(operations) >= 10, f"the served document lists only {len(operations)} operations"
    # A live session, so that the session routes answer for real and not only 404.
    tasks = requests.get(f"{url}/v1/tasks", timeout=30).json()["tasks"]
    task = next(t["task"] for t in tasks if t["task"] == "example/archive-read-mail")
    created = call_and_check(operations["POST /v1/sessions"].Case(body={"task": task}), url)
    assert created.status_code == 201, created.text
    live = requests.post(f"{url}/v1/sessions", json={"task": task}, timeout=60).json()["session_id"]
    failures = []
    for label, operation in operations.items():
        targets = [None]
        if "{id}" in operation.path and operation.method.upper() != "DELETE":
            targets.append({"id": live})
        for path_parameters in targets:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                try:
                    exercise(operation, mode, url, path_parameters)
                except Unsatisfiable:
                    # Nothing to make invalid (no parameters, no body): no negative case exists.
                    assert mode == GenerationMode.NEGATIVE, f"{label}: no valid request can be generated"
                except Exception as e:  # noqa: BLE001: every failure is collected, then reported
                    on = " on a live session" if path_parameters else ""
                    failures.append(f"{label}{on} ({mode.value}): {type(e).__name__}: {str(e)[:1500]}")
    closed = call_and_check(operations["DELETE /v1/sessions/{id}"].Case(path_parameters={"id": live}), url)
    assert closed.status_code == 200, closed.text
    assert not failures, "\n\n".join(failures)
    # The generated requests reached the handlers, not only the router's 404.
    for label in ("POST /v1/sessions/{id}/call", "POST /v1/sessions/{id}/verify", "GET /v1/sessions/{id}/diff"):
        assert ANSWERED[(label, 2)] > 0, f"no generated request of {label} was answered 2xx: {dict(ANSWERED)}"
