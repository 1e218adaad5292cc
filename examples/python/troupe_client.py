"""Troupe client for Python (python3-msgpack): one TCP connection, many concurrent requests.

    from troupe_client import Client
    with Client("127.0.0.1", 7711) as c:
        for ev in c.generate(prompt="Hello", max_tokens=16):     # streaming iterator
            print(ev.get("text", ""), end="", flush=True)

Each generate() yields the request's `token` events and finally its `done` event (a dict, see
docs/protocol.md: done["usage"] has prompt_tokens, cached_prompt_tokens — the prompt tokens served
from the prefix cache — and completion_tokens); a refused request raises TroupeError. Several generate() iterators may be
consumed in any order on one client: events of other requests are buffered until asked for.
"""
import itertools
import socket
import struct

try:
    import msgpack
except ImportError as e:  # e.g. a pyenv or venv python3 that does not see Debian's packages
    raise ImportError("troupe_client needs msgpack: `apt-get install python3-msgpack` (then run it "
                      "with /usr/bin/python3) or `pip install msgpack`") from e

PROTOCOL_VERSION = 1


class TroupeError(Exception):
    """An `error` event: .code (e.g. "invalid_value") and .message name the problem."""

    def __init__(self, code, message, request_id=None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.request_id = request_id


class Client:
    def __init__(self, host="127.0.0.1", port=7711, timeout=None):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = b""
        self._pending = {}  # id -> list of events not yet consumed
        self._ids = itertools.count(1)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- framing -----------------------------------------------------------------------------
    def send(self, request):
        """Sends one request map (adds `v`)."""
        payload = msgpack.packb({"v": PROTOCOL_VERSION, **request}, use_bin_type=True)
        self.sock.sendall(struct.pack(">I", len(payload)) + payload)

    def recv_event(self):
        """The next event from the server, whatever request it belongs to."""
        while True:
            if len(self._buf) >= 4:
                (n,) = struct.unpack(">I", self._buf[:4])
                if len(self._buf) >= 4 + n:
                    payload, self._buf = self._buf[4 : 4 + n], self._buf[4 + n :]
                    return msgpack.unpackb(payload, raw=False)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self._buf += chunk

    def _next_for(self, request_id):
        queue = self._pending.setdefault(request_id, [])
        while not queue:
            ev = self.recv_event()
            self._pending.setdefault(ev.get("id"), []).append(ev)
        return queue.pop(0)

    # -- requests ----------------------------------------------------------------------------
    def generate(self, prompt=None, prompt_ids=None, messages=None, request_id=None, **fields):
        """Starts a generate request and returns an iterator over its events (token..., done).

        Keyword fields are the protocol's (max_tokens, temperature, seed, stop, stream, n,
        prompts, ...). With n > 1, or a batch of prompts (prompts=[text or ids, ...]: completion
        p * n + j is completion j of prompt p), the completions' events interleave, each with its
        "index"; the iterator ends after the last one's done."""
        rid = request_id or f"py-{next(self._ids)}"
        req = {"type": "generate", "id": rid, **fields}
        if prompt is not None:
            req["prompt"] = prompt
        if prompt_ids is not None:
            req["prompt_ids"] = list(prompt_ids)
        if messages is not None:
            req["messages"] = messages
        self.send(req)
        return self._events(rid, fields.get("n", 1) * max(1, len(fields.get("prompts", []))))

    def _events(self, rid, n):
        dones = 0
        while True:
            ev = self._next_for(rid)
            if ev["event"] == "error":
                self._pending.pop(rid, None)
                raise TroupeError(ev["code"], ev["message"], rid)
            yield ev
            if ev["event"] == "done":
                dones += 1
                if dones == n:
                    self._pending.pop(rid, None)
                    return

    def _pooled(self, req, field, *more):
        """Sends an embed, classify or rerank request and gathers each input's `field` (with `more`:
        a tuple of those fields) from its done, in input order."""
        rid = req.setdefault("id", f"py-{next(self._ids)}")
        n = len(req["documents"]) if "documents" in req else (1 if isinstance(req["input"], str) or
                                                                   (req["input"] and isinstance(req["input"][0], int))
                                                                   else len(req["input"]))
        self.send(req)
        out = [None] * n
        for ev in self._events(rid, n):
            if ev["event"] == "done":
                for f in (field, *more):
                    if f not in ev:
                        raise TroupeError(ev.get("error", {}).get("code", "internal"),
                                          ev.get("error", {}).get("message") or
                                          f"input {ev.get('index', 0)} ended without its {f} ({ev['finish_reason']})", rid)
                out[ev.get("index", 0)] = tuple(ev[f] for f in (field, *more)) if more else ev[field]
        return out

    def embed(self, input, request_id=None, **fields):
        """The `embed` request: input is a text, texts, token ids or lists of them; returns one
        embedding (a list of floats) per input, in order. Fields: dimensions, normalize, priority, ..."""
        req = {"type": "embed", "input": input, **fields}
        if request_id:
            req["id"] = request_id
        return self._pooled(req, "embedding")

    def classify(self, input, request_id=None, **fields):
        """The `embed` request with task "classify" (a sequence classifier): input as for embed;
        returns one (label, probs) per input, in order: the likeliest label's name and every label's
        probability."""
        req = {"type": "embed", "task": "classify", "input": input, **fields}
        if request_id:
            req["id"] = request_id
        return self._pooled(req, "label", "probs")

    def rerank(self, query, documents, request_id=None, **fields):
        """The `rerank` request: each document's relevance to the query (P(yes) as Qwen3-Reranker
        answers), in document order. `query` may be a list, one query per document (pairs).
        Fields: instruction, priority, ..."""
        req = {"type": "rerank", "documents": list(documents), **fields}
        if isinstance(query, (list, tuple)):
            req["queries"] = list(query)
        else:
            req["query"] = query
        if request_id:
            req["id"] = request_id
        return self._pooled(req, "score")

    def complete(self, **kwargs):
        """Runs a generate to the end: (text, ids, done_event)."""
        text, ids, done = "", [], None
        for ev in self.generate(**kwargs):
            if ev["event"] == "token":
                text += ev["text"]
                ids += ev["ids"]
            else:
                done = ev
                if "text" in ev:
                    text, ids = ev["text"], ev["ids"]
        return text, ids, done

    def complete_all(self, **kwargs):
        """Runs a generate to the end and gathers all it reported, streamed or not: a dict with
        text, reasoning (requests with separate_reasoning), ids, logprobs (with logprobs: one per
        id), prompt_logprobs (with prompt_logprobs: None first, then one per prompt token) and
        done (the done event)."""
        if kwargs.get("n", 1) != 1:
            raise ValueError("complete_all gathers one completion; use choices() for n > 1")
        return self.choices(**kwargs)[0]

    def choices(self, **kwargs):
        """complete_all for any n: one dict per completion, in index order (prompt_logprobs only
        on the first: the prompt is the same for all)."""
        n = kwargs.get("n", 1)
        outs = [{"text": "", "reasoning": "", "ids": [], "logprobs": [], "prompt_logprobs": None, "done": None}
                for _ in range(n)]
        for ev in self.generate(**kwargs):
            out = outs[ev.get("index", 0)]
            if ev["event"] == "token":
                out["text"] += ev["text"]
                out["reasoning"] += ev.get("reasoning", "")
                out["ids"] += ev["ids"]
                if "logprobs" in ev:
                    out["logprobs"].append(ev["logprobs"])
                continue
            out["done"] = ev
            if "text" in ev:
                out["text"], out["ids"] = ev["text"], ev["ids"]
                out["reasoning"] = ev.get("reasoning", "")
                out["logprobs"] = ev.get("logprobs", [])
            out["prompt_logprobs"] = ev.get("prompt_logprobs")
        return outs

    def cancel(self, request_id):
        self.send({"type": "cancel", "id": request_id})

    def _simple(self, req):
        rid = f"py-{next(self._ids)}"
        self.send({**req, "id": rid})
        ev = self._next_for(rid)
        self._pending.pop(rid, None)
        if ev["event"] == "error":
            raise TroupeError(ev["code"], ev["message"], rid)
        return ev

    def tokenize(self, prompt=None, messages=None, enable_thinking=None, tools=None):
        req = {"type": "tokenize"}
        if prompt is not None:
            req["prompt"] = prompt
        if messages is not None:
            req["messages"] = messages
        if enable_thinking is not None:
            req["enable_thinking"] = enable_thinking
        if tools is not None:
            req["tools"] = tools
        return self._simple(req)["ids"]

    def health(self):
        return self._simple({"type": "health"})

    def models(self):
        return self._simple({"type": "models"})["models"]
