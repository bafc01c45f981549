"""Asynchronous jobs (``POST /v1/jobs``, API.md 4.1): :class:`Job`.

    job = c.submit(program, inputs={"x": x}, deadline_ms=60_000)
    job.wait(progress=True)        # a tqdm bar (or a plain progress line)
    out = job.result()             # what c.run would have returned

``wait`` follows the job on the live stream (``/v1/stream``, when
websocket-client is installed) and falls back to polling
``GET /v1/jobs/{id}``; either way it reads the final state once from
``GET /v1/jobs/{id}``, which also carries the outputs.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
import warnings
from typing import Any, Dict, Optional, Protocol, Sequence

import requests

from ._wire import _decode_output, _json_doc
from .errors import TensordError, TransportError, error_from_body

#: the states a job ends in
TERMINAL = ("succeeded", "failed", "cancelled")
_STAGE = {"queued": 0, "running": 1}
_POLL_FIRST_S = 0.01
_POLL_MAX_S = 0.5
_STREAM_POLL_S = 2.0  # with the stream, still poll this often (a missed event cannot hang a wait)


class JobClient(Protocol):
    """What a :class:`Job` needs of its client (:class:`tensord.Client` is
    one): this module does not import ``tensord.client``, which imports it."""

    last_job: Optional[Dict[str, Any]]

    def _request(self, method: str, path_or_url: str, *, deadline_ms: Optional[float] = None,
                 retries: Optional[int] = None, **kw: Any) -> requests.Response: ...

    def _stream_connect(self, streams: Sequence[str], interval_ms: int, timeout: Optional[float]) -> Any: ...

    def _wrap(self, value: Any, mode: Any) -> Any: ...


class Job:
    """A job submitted with :meth:`Client.submit`.

    ``id``: the server's job id. ``state`` is the last state seen (no
    request); :meth:`status` asks the server. A Job may be shared by threads.
    """

    def __init__(self, client: JobClient, job_id: str, mode: Any = (False, None), doc: Optional[Dict[str, Any]] = None
                 ) -> None:
        self.client = client
        self.id = job_id
        self._mode = mode
        self._lock = threading.Lock()
        self._doc: Dict[str, Any] = dict(doc or {"id": job_id, "state": "queued"})

    def __repr__(self) -> str:
        return "Job(%r, state=%r)" % (self.id, self.state)

    # -- state
    @property
    def state(self) -> str:
        return str(self._doc.get("state", "queued"))

    def done(self) -> bool:
        """True once the job has ended (as last seen; :meth:`status` refreshes)."""
        return self.state in TERMINAL

    def _refresh(self) -> Dict[str, Any]:
        # b64: outputs come back bit-exact and a third the size of JSON numbers
        doc = _json_doc(self.client._request("GET", "/v1/jobs/%s?encoding=b64" % self.id, stream=True))
        with self._lock:
            if self._doc.get("state") not in TERMINAL:
                self._doc = doc
            return self._doc

    def _note(self, state: str, queue_ms: Any = None, run_ms: Any = None) -> None:
        """A state seen on the stream (the final document still comes from GET)."""
        with self._lock:
            if self._doc.get("state") in TERMINAL:
                return
            self._doc = dict(self._doc, state=state)
            if queue_ms is not None:
                self._doc["queue_ms"] = queue_ms
            if run_ms is not None:
                self._doc["run_ms"] = run_ms

    def status(self) -> str:
        """The job's state: ``queued``, ``running``, ``succeeded``, ``failed`` or ``cancelled``."""
        if self.done():
            return self.state
        return str(self._refresh()["state"])

    def info(self) -> Dict[str, Any]:
        """The whole ``GET /v1/jobs/{id}`` document (state, queue_ms, run_ms, error, job)."""
        if not self.done():
            self._refresh()
        return {k: v for k, v in self._doc.items() if k != "outputs"}

    def cancel(self) -> str:
        """Cancel the job (``DELETE /v1/jobs/{id}``): a queued job ends at once, a
        running one at its next node boundary. Returns the state after the call."""
        self.client._request("DELETE", "/v1/jobs/" + self.id)
        return self.status()

    # -- waiting
    def wait(self, timeout: Optional[float] = None, progress: bool = False, stream: Optional[bool] = None) -> str:
        """Wait until the job has ended or ``timeout`` seconds have passed; return its state.

        ``progress=True`` shows the job's stage (queued, running, ended) with
        its queue and run times: a tqdm bar when tqdm is installed (a widget in
        notebooks that have ipywidgets), else one line rewritten in place on
        stderr. ``stream``: follow the job on ``/v1/stream`` (None: when
        websocket-client is installed) rather than by polling alone.
        """
        end = None if timeout is None else time.monotonic() + timeout
        bar = _Progress(self) if progress else None
        try:
            if not self.done():
                self._refresh()
            if bar:
                bar.show()
            if not self.done():
                use_stream = _have_websocket() if stream is None else stream
                followed = use_stream and self._wait_stream(end, bar)
                if not followed:
                    self._wait_poll(end, bar)
            if bar:
                bar.show()
        finally:
            if bar:
                bar.close()
        return self.state

    def _remaining(self, end: Optional[float]) -> Optional[float]:
        return None if end is None else end - time.monotonic()

    def _wait_poll(self, end: Optional[float], bar: Optional["_Progress"]) -> None:
        delay = _POLL_FIRST_S
        while not self.done():
            left = self._remaining(end)
            if left is not None and left <= 0:
                return
            time.sleep(delay if left is None else min(delay, left))
            self._refresh()
            if bar:
                bar.show()
            delay = min(delay * 1.5, _POLL_MAX_S)

    def _wait_stream(self, end: Optional[float], bar: Optional["_Progress"]) -> bool:
        """Follow the job's events; False when the stream could not be used (then poll)."""
        try:
            import websocket
            ws = self.client._stream_connect(["jobs"], 60000, self._clip(self._remaining(end), 10.0))
        except (ImportError, TransportError, TensordError):
            return False
        try:
            self._refresh()  # an event from before the subscription is not replayed
            last_poll = time.monotonic()
            while not self.done():
                left = self._remaining(end)
                if left is not None and left <= 0:
                    return True
                ws.settimeout(self._clip(left, 0.5))
                try:
                    text = ws.recv()
                except websocket.WebSocketTimeoutException:
                    text = None
                if text == "":
                    return False  # the server closed the stream: poll from here
                if text is not None:
                    ev = json.loads(text)
                    if ev.get("type") == "job" and ev.get("id") == self.id:
                        if ev.get("state") in TERMINAL:
                            self._refresh()
                        else:
                            self._note(str(ev.get("state")), ev.get("queue_ms"), ev.get("run_ms"))
                if bar:
                    bar.show()
                if not self.done() and time.monotonic() - last_poll >= _STREAM_POLL_S:
                    self._refresh()
                    last_poll = time.monotonic()
            return True
        except (OSError, websocket.WebSocketException):
            return False
        finally:
            ws.close()

    @staticmethod
    def _clip(left: Optional[float], most: float) -> float:
        return most if left is None else max(0.001, min(left, most))

    # -- the outcome
    def result(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The job's outputs, as :meth:`Client.run` returns them.

        Waits for the job (at most ``timeout`` seconds: TimeoutError after
        that); a failed or cancelled job raises its typed error
        (``tensord.Cancelled``, ``tensord.ShapeMismatch``, ...).
        """
        state = self.wait(timeout)
        if state not in TERMINAL:
            raise TimeoutError("job %s is still %s after %s s" % (self.id, state, timeout))
        doc = self._doc
        if state != "succeeded":
            err = doc.get("error") or {"code": state, "message": "job %s %s" % (self.id, state)}
            raise error_from_body(None, err)
        outputs = {k: _decode_output(v) for k, v in (doc.get("outputs") or {}).items()}
        job = doc.get("job")
        if isinstance(job, dict):
            # GET /v1/jobs/{id} gives the job's times at the top level; its "job"
            # object has them as 0 (api/program_json.cpp job_status_to_json)
            job = dict(job)
            for key in ("queue_ms", "run_ms"):
                if not job.get(key) and doc.get(key) is not None:
                    job[key] = doc[key]
        self.client.last_job = job
        return {k: self.client._wrap(v, self._mode) for k, v in outputs.items()}


# ---------------------------------------------------------------- progress

def _have_websocket() -> bool:
    try:
        import websocket  # noqa: F401
    except ImportError:
        return False
    return True


def _tqdm() -> Any:
    """tqdm's class (the notebook widget where tqdm.auto finds one), or None.

    tqdm is the ``tensord[progress]`` extra, imported only here and by name
    (it has no type stubs; the bar is used untyped)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tqdm.auto warns when ipywidgets is missing
            return importlib.import_module("tqdm.auto").tqdm
    except ImportError:
        return None


class _Progress:
    """A job's stage as a bar: 0 queued, 1 running, 2 ended, with times as postfix."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.t0 = time.monotonic()
        cls = _tqdm()
        self.bar = None
        if cls is not None:
            self.bar = cls(total=2, desc="job %s" % job.id, unit="stage",
                           bar_format="{desc}: {bar} {elapsed}{postfix}")
        self._last = ""

    def _text(self) -> str:
        doc = self.job._doc
        parts = [self.job.state]
        if doc.get("queue_ms") is not None:
            parts.append("queue %.0f ms" % float(doc["queue_ms"]))
        if doc.get("run_ms") is not None and self.job.state != "queued":
            parts.append("run %.0f ms" % float(doc["run_ms"]))
        return ", ".join(parts)

    def show(self) -> None:
        text = self._text()
        stage = 2 if self.job.done() else _STAGE.get(self.job.state, 0)
        if self.bar is not None:
            if stage != self.bar.n:
                self.bar.n = stage
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.refresh()
            return
        line = "job %s: %s [%.1f s]" % (self.job.id, text, time.monotonic() - self.t0)
        if line != self._last:
            pad = max(0, len(self._last) - len(line))
            sys.stderr.write("\r" + line + " " * pad)
            sys.stderr.flush()
            self._last = line

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self._last:
            sys.stderr.write("\n")
            sys.stderr.flush()
