"""Errors raised by the tensord client (API.md section 2).

Every error the server answers is a :class:`TensordError`; its class is
picked by the error's stable ``code`` (``queue_full`` -> :class:`QueueFull`,
``shape_mismatch`` -> :class:`ShapeMismatch`, ...), so callers can catch
exactly what they handle and let the rest propagate::

    try:
        c.run(program, inputs=...)
    except tensord.QueueFull as e:       # 429 after the client's retries
        time.sleep(e.retry_after or 1)
    except tensord.ShapeMismatch as e:   # 422, e.node names the node
        print(e.node, e.message)

Failures below HTTP (refused connection, reset, client-side timeout) are
:class:`TransportError` (``status`` 0).
"""

from __future__ import annotations

import email.utils
import time
from typing import Any, Dict, Mapping, Optional, Tuple, Type


class TensordError(Exception):
    """An error answered by the server (API.md section 2), or a transport error.

    Attributes:
        status:      HTTP status (0 when no response was received).
        code:        the stable machine-readable code, e.g. ``"shape_mismatch"``.
        message:     the human-readable message.
        node:        the program node id the error refers to, or None.
        request_id:  the request id (``X-Request-Id``), or None.
        retry_after: seconds the server asked to wait (``Retry-After``), or None.
        body:        the decoded ``error`` object (dict), for extra fields.
    """

    #: the code a subclass stands for (None on the base class)
    error_code: Optional[str] = None

    def __init__(self, status: int, code: str, message: str, node: Optional[str] = None,
                 request_id: Optional[str] = None, body: Optional[Dict[str, Any]] = None,
                 retry_after: Optional[float] = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.node = node
        self.request_id = request_id
        self.body = body or {}
        self.retry_after = retry_after
        text = "%s %s: %s" % (status, code, message)
        if node:
            text += " (node %s)" % node
        if request_id:
            text += " [request %s]" % request_id
        super().__init__(text)

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:  # picklable (multiprocessing, concurrent.futures)
        return (_rebuild, (type(self), self.status, self.code, self.message, self.node, self.request_id,
                           self.body, self.retry_after))

    @classmethod
    def from_response(cls, resp: Any) -> "TensordError":
        """Build the typed error for a ``requests.Response`` with status >= 400."""
        rid = resp.headers.get("X-Request-Id")
        retry_after = parse_retry_after(resp.headers.get("Retry-After"))
        err = None
        try:
            doc = resp.json()
            if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
                err = doc["error"]
            elif isinstance(doc, dict) and isinstance(doc.get("error"), str):  # KServe v2 routes
                err = {"message": doc["error"]}
        except ValueError:
            pass
        if err is None:
            text = resp.text[:500] if resp.content else resp.reason
            err = {"message": text or ""}
        return error_from_body(resp.status_code, err, rid, retry_after)


def _rebuild(cls: Type["TensordError"], status: int, code: str, message: str, node: Optional[str],
             request_id: Optional[str], body: Optional[Dict[str, Any]], retry_after: Optional[float]
             ) -> "TensordError":
    return cls(status, code, message, node, request_id, body, retry_after)


class TransportError(TensordError):
    """No HTTP answer: the connection was refused or broke (``status`` 0)."""
    error_code = "connection_error"


class ClientTimeout(TransportError):
    """The client's ``timeout`` passed while connecting or waiting for the answer."""
    error_code = "client_timeout"


# -- one class per code of API.md section 2 (the HTTP status each code has)

class BadRequest(TensordError):
    """400 ``bad_request``: unparsable JSON, wrong field types, malformed safetensors."""
    error_code = "bad_request"


class InvalidProgram(TensordError):
    """400 ``invalid_program``: unknown node reference, cycle, duplicate name, bad body."""
    error_code = "invalid_program"


class Unauthenticated(TensordError):
    """401 ``unauthenticated``: missing or unknown bearer token."""
    error_code = "unauthenticated"


class Forbidden(TensordError):
    """403 ``forbidden``: another tenant's tensor, or an admin route."""
    error_code = "forbidden"


class NotFound(TensordError):
    """404 ``not_found``: unknown tensor, job, graph or route."""
    error_code = "not_found"


class UnknownOp(TensordError):
    """404 ``unknown_op``: the op is not in the registry (the message lists close names)."""
    error_code = "unknown_op"


class Conflict(TensordError):
    """409 ``conflict``: replay inputs of another shape/dtype than captured, duplicate name."""
    error_code = "conflict"


class PayloadTooLarge(TensordError):
    """413 ``payload_too_large``: body over the server's ``--max-body-bytes``."""
    error_code = "payload_too_large"


class ShapeMismatch(TensordError):
    """422 ``shape_mismatch`` (``node`` names the program node)."""
    error_code = "shape_mismatch"


class DtypeMismatch(TensordError):
    """422 ``dtype_mismatch`` (``node`` names the program node)."""
    error_code = "dtype_mismatch"


class InvalidArgument(TensordError):
    """422 ``invalid_argument`` (``node`` names the program node)."""
    error_code = "invalid_argument"


class NumericalError(TensordError):
    """422 ``numerical_error``: e.g. eigh did not converge."""
    error_code = "numerical_error"


class QuotaExceeded(TensordError):
    """429 ``quota_exceeded``: the tenant's memory quota (``retry_after`` set)."""
    error_code = "quota_exceeded"


class QueueFull(TensordError):
    """429 ``queue_full``: the tenant's queue limit (``retry_after`` set)."""
    error_code = "queue_full"


class Cancelled(TensordError):
    """499 ``cancelled``: the job was cancelled."""
    error_code = "cancelled"


class Internal(TensordError):
    """500 ``internal``: a server bug (logged there with the request id)."""
    error_code = "internal"


class Unavailable(TensordError):
    """503 ``unavailable``: draining for shutdown, or the backend is not ready."""
    error_code = "unavailable"


class DeadlineExceeded(TensordError):
    """504 ``deadline_exceeded``: the job ran past its ``deadline_ms`` (or ``max_iters``)."""
    error_code = "deadline_exceeded"


#: code -> (class, HTTP status), as the server's api/error_reply.cpp maps them
ERRORS: Dict[str, "tuple[Type[TensordError], int]"] = {
    "bad_request": (BadRequest, 400),
    "invalid_program": (InvalidProgram, 400),
    "unauthenticated": (Unauthenticated, 401),
    "forbidden": (Forbidden, 403),
    "not_found": (NotFound, 404),
    "unknown_op": (UnknownOp, 404),
    "conflict": (Conflict, 409),
    "payload_too_large": (PayloadTooLarge, 413),
    "shape_mismatch": (ShapeMismatch, 422),
    "dtype_mismatch": (DtypeMismatch, 422),
    "invalid_argument": (InvalidArgument, 422),
    "numerical_error": (NumericalError, 422),
    "quota_exceeded": (QuotaExceeded, 429),
    "queue_full": (QueueFull, 429),
    "cancelled": (Cancelled, 499),
    "internal": (Internal, 500),
    "unavailable": (Unavailable, 503),
    "deadline_exceeded": (DeadlineExceeded, 504),
}

# A reply without a known code (a proxy's 502, a KServe route's string error)
# still gets the class its status stands for.
_BY_STATUS: Dict[int, Type[TensordError]] = {
    400: BadRequest, 401: Unauthenticated, 403: Forbidden, 404: NotFound, 409: Conflict,
    413: PayloadTooLarge, 422: InvalidArgument, 499: Cancelled, 500: Internal, 503: Unavailable,
    504: DeadlineExceeded,
}


def error_class(code: Optional[str], status: int = 0) -> Type[TensordError]:
    """The exception class for an error code (or, for an unknown code, its HTTP status)."""
    if code in ERRORS:
        return ERRORS[code][0]
    return _BY_STATUS.get(status, TensordError)


def error_from_body(status: Optional[int], err: Mapping[str, Any], request_id: Optional[str] = None,
                    retry_after: Optional[float] = None) -> TensordError:
    """The typed error for an API.md ``error`` object.

    ``status`` None (a failed job's ``error`` in ``GET /v1/jobs/{id}``, which
    has no HTTP status of its own) takes the status the code has on the wire.
    """
    code = err.get("code")
    if status is None:
        status = ERRORS[code][1] if code in ERRORS else 500
    if not isinstance(code, str) or not code:
        code = "http_%d" % status
    cls = error_class(code, status)
    return cls(status, code, str(err.get("message", "")), err.get("node"),
               err.get("request_id") or request_id, dict(err), retry_after)


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """``Retry-After`` in seconds: delta-seconds or an HTTP date; None if absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(int(value)))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


__all__ = ["TensordError", "TransportError", "ClientTimeout", "ERRORS", "error_class", "error_from_body",
           "parse_retry_after"] + [cls.__name__ for cls, _ in ERRORS.values()]
