"""schemathesis drives a real ``envcraft serve`` from the OpenAPI document it serves
(``GET /openapi.json``): requests generated for every operation, valid and invalid, and for
each answer: no 5xx, a status code the document lists for that operation, a body that conforms
to the documented schema, the documented content type.

Bounded: ``SCHEMATHESIS_EXAMPLES`` examples per operation (default 25), no shrinking deadline,
so the run takes a minute or so. Sessions it manages to create are closed at the end (the
server is stopped and its state directory removed by the fixture)."""

from __future__ import annotations

import os

import pytest
import requests

from conftest import require

try:
    import schemathesis
    from hypothesis import HealthCheck, settings
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

if schemathesis is None:

    def test_every_answer_is_documented_and_none_is_a_server_error():
        require(False, f"schemathesis is not installed ({MISSING}): `make test` installs it")

else:
    CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance, content_type_conformance]

    @pytest.fixture(scope="module")
    def served_schema(real_server):
        return schemathesis.openapi.from_url(f"{real_server.url}/openapi.json")

    schema = schemathesis.pytest.from_fixture("served_schema")

    @schema.parametrize()
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    def test_every_answer_is_documented_and_none_is_a_server_error(case, real_server):
        response = case.call(base_url=real_server.url, timeout=30)
        # A session the generated calls managed to create is closed at once: they must not pile up.
        if case.method.upper() == "POST" and case.path == "/v1/sessions" and response.status_code == 201:
            session = response.json().get("session_id")
            assert requests.delete(f"{real_server.url}/v1/sessions/{session}", timeout=30).status_code == 200
        case.validate_response(response, checks=CHECKS)
