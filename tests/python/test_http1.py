"""The pure HTTP/1.1 parts: request bytes, the answer reader, the resend decision, the idle set."""

import pytest

import envcraft
from envcraft import _http1
from envcraft._http1 import Endpoint, Exactly, FailedAt, IdleConnections, Line, UntilEof, read_response, resend_decision


def parse(raw: bytes, method: str = "GET"):
    """Feeds ``raw`` to the answer reader as a connection would; returns (response, unread)."""
    buf = bytearray(raw)
    reader = read_response(method)
    need = next(reader)
    while True:
        if isinstance(need, Line):
            end = buf.find(b"\n")
            if end < 0:
                raise EOFError("no line")
            chunk = bytes(buf[: end + 1])
        elif isinstance(need, Exactly):
            if len(buf) < need.n:
                raise EOFError(f"{need.n} bytes wanted, {len(buf)} there")
            chunk = bytes(buf[: need.n])
        else:
            assert isinstance(need, UntilEof)
            chunk = bytes(buf)
        del buf[: len(chunk)]
        try:
            need = reader.send(chunk)
        except StopIteration as done:
            return done.value, bytes(buf)


def test_request_bytes_keep_the_connection_open_and_frame_the_body():
    ep = Endpoint.parse("http://127.0.0.1:8080/base/")
    raw = _http1.request_bytes(ep, "POST", "/v1/sessions", {"Accept": "application/json"}, b'{"a":1}')
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /base/v1/sessions HTTP/1.1"
    assert "Host: 127.0.0.1:8080" in lines and "Content-Length: 7" in lines
    assert not any(line.lower().startswith("connection:") for line in lines)
    assert body == b'{"a":1}'
    get = _http1.request_bytes(ep, "GET", "/healthz", {}, None)
    assert get.endswith(b"\r\n\r\n") and b"Content-Length" not in get
    assert b"Content-Length: 0" in _http1.request_bytes(ep, "POST", "/x", {}, None)


def test_endpoint_refuses_what_is_not_http():
    with pytest.raises(ValueError):
        Endpoint.parse("ftp://x")
    assert Endpoint.parse("https://h").port == 443


def test_answers_framed_by_length_leave_the_next_answer_unread():
    two = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n"
    first, rest = parse(two)
    assert (first.status, first.body, first.reusable) == (200, b"{}", True)
    second, rest = parse(rest)
    assert (second.status, second.body, second.reusable, rest) == (201, b"", True, b"")


def test_connection_close_and_http10_make_the_connection_spent():
    closing, _ = parse(b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 2\r\n\r\n{}")
    assert closing.body == b"{}" and closing.reusable is False
    old, _ = parse(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    assert old.reusable is False
    kept, _ = parse(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}")
    assert kept.reusable is True
    until_eof, _ = parse(b"HTTP/1.1 200 OK\r\n\r\n{\"x\": 1}")
    assert until_eof.body == b'{"x": 1}' and until_eof.reusable is False


def test_chunked_interim_and_bodiless_answers():
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3;x=y\r\n:1}\r\n0\r\nT: v\r\n\r\nNEXT"
    response, rest = parse(chunked)
    assert (response.body, response.reusable, rest) == (b'{"a":1}', True, b"NEXT")
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\nRetry-After: 3\r\n\r\n{}"
    response, _ = parse(interim)
    assert (response.status, response.headers["retry-after"], response.body) == (201, "3", b"{}")
    no_content, rest = parse(b"HTTP/1.1 204 No Content\r\n\r\nNEXT")
    assert no_content.body == b"" and rest == b"NEXT"
    head, rest = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nNEXT", method="HEAD")
    assert head.body == b"" and rest == b"NEXT"


@pytest.mark.parametrize(
    "raw",
    [
        b"garbage\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",
    ],
)
def test_malformed_answers_are_protocol_errors(raw):
    with pytest.raises(envcraft.ProtocolError):
        parse(raw)


def test_a_short_body_is_not_an_answer():
    with pytest.raises(EOFError):
        parse(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}")


@pytest.mark.parametrize(
    "method,reused,failed_at,again",
    [
        # The stale keep-alive: the server closed the idle connection before our request.
        ("POST", True, FailedAt.WRITING, True),
        ("GET", True, FailedAt.WRITING, True),
        # A POST that was sent and got nothing back may have run: never resent.
        ("POST", True, FailedAt.NO_ANSWER, False),
        ("POST", False, FailedAt.NO_ANSWER, False),
        ("POST", False, FailedAt.WRITING, False),
        # Idempotent requests without an answer go again.
        ("GET", True, FailedAt.NO_ANSWER, True),
        ("GET", False, FailedAt.NO_ANSWER, True),
        ("DELETE", True, FailedAt.NO_ANSWER, True),
        # Part of an answer came: the request ran, whatever it was.
        ("GET", True, FailedAt.ANSWERING, False),
        ("POST", True, FailedAt.ANSWERING, False),
    ],
)
def test_resend_decision(method, reused, failed_at, again):
    decided, why = resend_decision(method, reused, failed_at)
    assert decided is again and why
    if method == "POST" and not again and failed_at is not FailedAt.ANSWERING:
        assert "may have run" in why


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_idle_set_is_bounded_lifo_expires_and_refuses_after_close():
    clock = Clock()
    idle = IdleConnections(max_idle=2, idle_timeout=10.0, clock=clock)
    assert idle.take("me") == (None, [], [])
    gen = idle.generation
    assert idle.give_back("a", "me", gen) and idle.give_back("b", "me", gen)
    assert not idle.give_back("c", "me", gen), "a third idle connection is over the bound"
    assert idle.take("me") == ("b", [], []), "the most recently used goes first"
    clock.now = 5.0
    assert idle.give_back("b", "me", gen)
    clock.now = 12.0
    assert idle.take("me") == ("b", ["a"], []), "a is idle since 0 s: expired; b since 5 s"
    assert idle.give_back("b", "me", gen)
    assert idle.close() == ["b"] and len(idle) == 0
    assert not idle.give_back("x", "me", gen), "taken before close: closed when given back"
    assert idle.give_back("y", "me", idle.generation)


def test_idle_connections_of_another_owner_are_never_handed_out():
    idle = IdleConnections(max_idle=4, idle_timeout=10.0)
    idle.take("parent")
    assert idle.give_back("p1", "parent", idle.generation)
    conn, expired, foreign = idle.take("child")
    assert conn is None and foreign == ["p1"]
    assert not idle.give_back("p2", "parent", idle.generation)


def test_readable_now_sees_a_peer_close_and_nothing_else():
    import socket

    a, b = socket.socketpair()
    with a, b:
        assert not _http1.readable_now(a.fileno())
        b.sendall(b"x")
        assert _http1.readable_now(a.fileno())
        a.recv(1)
        assert not _http1.readable_now(a.fileno())
        b.close()
        assert _http1.readable_now(a.fileno()), "end of stream is readable"
