"""The served ``/openapi.json`` against the client's calls: every request the client can send
(each builder of ``envcraft._wire``) is a path and method the document describes, and every
described operation is one the client sends, so the client and the server's route table cannot
drift apart."""

import inspect
import json
import re
import urllib.request

from envcraft import _wire


def _requests():
    """One request from each of the client's request builders."""
    out = {}
    for name, fn in inspect.getmembers(_wire, inspect.isfunction):
        sig = inspect.signature(fn)
        if sig.return_annotation not in ("Request", _wire.Request):
            continue
        args = []
        for p in sig.parameters.values():
            if p.default is not inspect.Parameter.empty:
                break
            args.append({"session_id": "SID", "tool": "read", "args": {}, "task": "example/hello"}.get(p.name, "x"))
        out[name] = fn(*args)
    return out


def _template_of(path, described):
    for template in described:
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, path):
            return template
    return None


def test_every_client_call_is_a_described_route_and_every_route_is_called(real_server):
    with urllib.request.urlopen(real_server.url + "/openapi.json", timeout=10) as answer:
        doc = json.load(answer)
    described = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    requests = _requests()
    assert len(requests) >= 10, sorted(requests)
    called = set()
    for name, req in requests.items():
        path = req.path.split("?")[0]  # a query (a transfer's ?path=) is not part of the route
        template = _template_of(path, [p for _, p in described])
        assert template is not None, f"{name}: {req.method} {path} is not in /openapi.json"
        assert (req.method, template) in described, f"{name}: {req.method} {template} is not described"
        called.add((req.method, template))
    # The server's own pages the client does not call.
    not_client = {("GET", "/metrics"), ("GET", "/openapi.json")}
    # OpenEnv's and MCP's routes: spoken by those projects' own clients (test_openenv.py,
    # test_mcp.py), not by envcraft's.
    not_client |= {
        ("GET", "/ws"), ("POST", "/reset"), ("POST", "/step"), ("GET", "/state"),
        ("GET", "/health"), ("GET", "/metadata"), ("GET", "/schema"), ("POST", "/mcp"),
        ("POST", "/v1/sessions/{id}/mcp"), ("POST", "/v1/mcp"), ("DELETE", "/v1/mcp"),
    }
    assert described - not_client == called, f"described but never sent: {sorted(described - not_client - called)}"
