"""Errors raised by the tensord client."""


class TensordError(Exception):
    """An error answered by the server (API.md section 2), or a transport error.

    Attributes:
        status:     HTTP status (0 when no response was received).
        code:       the stable machine-readable code, e.g. ``"shape_mismatch"``.
        message:    the human-readable message.
        node:       the program node id the error refers to, or None.
        request_id: the request id (``X-Request-Id``), or None.
        body:       the decoded ``error`` object (dict), for extra fields.
    """

    def __init__(self, status, code, message, node=None, request_id=None, body=None):
        self.status = status
        self.code = code
        self.message = message
        self.node = node
        self.request_id = request_id
        self.body = body or {}
        text = "%s %s: %s" % (status, code, message)
        if node:
            text += " (node %s)" % node
        if request_id:
            text += " [request %s]" % request_id
        super().__init__(text)

    @classmethod
    def from_response(cls, resp):
        """Build an error from a ``requests.Response`` with status >= 400."""
        rid = resp.headers.get("X-Request-Id")
        err = None
        try:
            doc = resp.json()
            if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
                err = doc["error"]
        except ValueError:
            pass
        if err is None:
            text = resp.text[:500] if resp.content else resp.reason
            return cls(resp.status_code, "http_%d" % resp.status_code, text or "", None, rid, {})
        return cls(
            resp.status_code,
            err.get("code", "http_%d" % resp.status_code),
            err.get("message", ""),
            err.get("node"),
            err.get("request_id", rid),
            err,
        )
