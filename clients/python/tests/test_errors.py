"""One exception class per API.md 2 error code, with its fields, from an HTTP
answer or a failed job's error object; Retry-After in both its forms."""

import email.utils
import json
import pickle
import time

import pytest

import tensord


# ---------------------------------------------------------------- errors

class FakeResponse:
    def __init__(self, status, body, headers=None):
        self.status_code = status
        self.headers = headers or {}
        self.content = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.text = self.content.decode()
        self.reason = "Reason"

    def json(self):
        return json.loads(self.content)


ALL_CODES = {
    "bad_request": (tensord.BadRequest, 400), "invalid_program": (tensord.InvalidProgram, 400),
    "unauthenticated": (tensord.Unauthenticated, 401), "forbidden": (tensord.Forbidden, 403),
    "not_found": (tensord.NotFound, 404), "unknown_op": (tensord.UnknownOp, 404),
    "conflict": (tensord.Conflict, 409), "payload_too_large": (tensord.PayloadTooLarge, 413),
    "shape_mismatch": (tensord.ShapeMismatch, 422), "dtype_mismatch": (tensord.DtypeMismatch, 422),
    "invalid_argument": (tensord.InvalidArgument, 422), "numerical_error": (tensord.NumericalError, 422),
    "quota_exceeded": (tensord.QuotaExceeded, 429), "queue_full": (tensord.QueueFull, 429),
    "cancelled": (tensord.Cancelled, 499), "internal": (tensord.Internal, 500),
    "unavailable": (tensord.Unavailable, 503), "deadline_exceeded": (tensord.DeadlineExceeded, 504),
}


@pytest.mark.parametrize("code", sorted(ALL_CODES))
def test_every_error_code_has_its_class(code):
    cls, status = ALL_CODES[code]
    assert issubclass(cls, tensord.TensordError) and cls.__name__ in tensord.__all__
    resp = FakeResponse(status, {"error": {"code": code, "message": "m", "node": "n3", "request_id": "r1"}},
                        {"X-Request-Id": "r0", "Retry-After": "7"} if status == 429 else {"X-Request-Id": "r0"})
    e = tensord.TensordError.from_response(resp)
    assert type(e) is cls
    assert (e.status, e.code, e.message, e.node, e.request_id) == (status, code, "m", "n3", "r1")
    assert e.retry_after == (7.0 if status == 429 else None)
    # a failed job's error object has no HTTP status: the code's own is used
    j = tensord.errors.error_from_body(None, {"code": code, "message": "m"})
    assert type(j) is cls and j.status == status
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is cls and again.retry_after == e.retry_after and again.node == "n3"


def test_error_without_a_code_and_retry_after_forms():
    e = tensord.TensordError.from_response(FakeResponse(502, b"<html>bad gateway</html>"))
    assert type(e) is tensord.TensordError and e.code == "http_502" and "bad gateway" in e.message
    e = tensord.TensordError.from_response(FakeResponse(404, {"error": "model 'm' not found"}))
    assert type(e) is tensord.NotFound and e.message == "model 'm' not found"  # KServe v2 form
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= tensord.errors.parse_retry_after(when) <= 31
    assert tensord.errors.parse_retry_after("soon") is None
    assert tensord.errors.parse_retry_after(None) is None
