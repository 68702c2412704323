#!/usr/bin/env python3
"""The client matrix's nats-py program (see ../README.md for the contract).

Prints one `RESULT <feature> <ok|fail|skip> <observation>` line per feature; the
observation is compact JSON with nothing volatile in it. Logs go to stderr.
For debugging, MATRIX_ONLY=feature,feature runs only those features.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import ssl
import sys
import traceback

import nats
import nats.errors
import nats.js.errors
from nats.js import api

ENV = os.environ
URL = ENV["MATRIX_URL"]
USER = ENV["MATRIX_USER"]
PASSWORD = ENV["MATRIX_PASSWORD"]
NKEY_SEED_FILE = ENV["MATRIX_NKEY_SEED_FILE"]
WS_URL = ENV["MATRIX_WS_URL"]
TOKEN_URL = ENV["MATRIX_TOKEN_URL"]
TOKEN = ENV["MATRIX_TOKEN"]
TLS_URL = ENV["MATRIX_TLS_URL"]
TLS_CA = ENV["MATRIX_TLS_CA"]
CREDS_URL = ENV["MATRIX_CREDS_URL"]
CREDS_FILE = ENV["MATRIX_CREDS_FILE"]


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


class Mismatch(Exception):
    """The program's own expectation was not met; the message is deterministic, and
    `seen` is what the feature observed so far (reported with it)."""

    def __init__(self, what: str, seen=None):
        super().__init__(what)
        self.seen = seen


def expect(cond: bool, what: str, seen=None) -> None:
    if not cond:
        raise Mismatch(what, seen)


def err_kind(e: BaseException) -> dict:
    """A deterministic description of an error: its class, and for JetStream API errors
    the server's codes and description."""
    d: dict = {"error": type(e).__name__}
    if isinstance(e, nats.js.errors.APIError):
        for attr in ("code", "err_code", "description"):
            if getattr(e, attr, None) is not None:
                d[attr] = getattr(e, attr)
    elif isinstance(e, Mismatch):
        d["what"] = str(e)
        if e.seen is not None:
            d["seen"] = e.seen
    return d


async def quiet_error_cb(e: Exception) -> None:
    log(f"  (error_cb) {type(e).__name__}: {e}")


async def connect(url: str = URL, **kw) -> nats.NATS:
    if url in (URL, WS_URL) and not any(k in kw for k in ("user", "nkeys_seed", "token")):
        kw.setdefault("user", USER)
        kw.setdefault("password", PASSWORD)
    kw.setdefault("error_cb", quiet_error_cb)
    kw.setdefault("connect_timeout", 3)
    return await nats.connect(url, **kw)


INFO_FIELDS = ("auth_required", "tls_required", "tls_verify", "headers", "jetstream", "max_payload", "proto", "client_ip", "ldm")


def info_obs(nc: nats.NATS) -> dict:
    """The server's INFO as the client saw it, without the volatile fields (ids, names,
    ports, versions, nonce and xkey values): the stable values, and whether a nonce came."""
    info = nc._server_info or {}
    d = {k: info[k] for k in INFO_FIELDS if k in info}
    d["nonce"] = bool(info.get("nonce"))
    return d


async def refused(url: str, **kw) -> dict:
    """Connects with bad credentials, expecting a refusal; returns the error's kind."""
    try:
        nc = await nats.connect(
            url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=3, error_cb=quiet_error_cb, **kw
        )
    except Exception as e:  # noqa: BLE001 - the kind of error is the observation
        return {"error": type(e).__name__, "message": str(e)}
    await nc.close()
    raise Mismatch("connection with bad credentials was accepted")


async def round_trip(nc: nats.NATS, subject: str, payload: bytes) -> bytes:
    sub = await nc.subscribe(subject)
    await nc.publish(subject, payload)
    msg = await sub.next_msg(timeout=3)
    await sub.unsubscribe()
    return msg.data


async def wait_for(cond, timeout: float = 3.0, step: float = 0.02) -> bool:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        if cond():
            return True
        await asyncio.sleep(step)
    return cond()


async def interest_ready(sub_nc: nats.NATS, pub_nc: nats.NATS, tag: str) -> None:
    """Returns once the subscriptions `sub_nc` made so far are in place on the server, as
    seen from `pub_nc`. nats-py's flush() writes its PING ahead of commands still in its
    pending buffer, so a PONG does not prove that a SUB was processed; instead `sub_nc`
    subscribes to a probe subject after them (a connection's SUBs are processed in order)
    and `pub_nc` publishes probes until one arrives."""
    probe = await sub_nc.subscribe(f"probe.{tag}")
    try:
        for _ in range(50):
            await pub_nc.publish(f"probe.{tag}", b"")
            await pub_nc.flush()
            try:
                await probe.next_msg(timeout=0.1)
                return
            except nats.errors.TimeoutError:
                continue
        raise Mismatch("the subscription never became visible to the other connection")
    finally:
        await probe.unsubscribe()


async def control(action: str) -> str:
    """Asks the runner to act on the main server and waits for its `done`."""
    print(f"CONTROL {action}", flush=True)
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return line.strip()


# ---------------------------------------------------------------------------------------
# Features


async def connect_user():
    nc = await connect()
    try:
        got = await round_trip(nc, "cu.echo", b"hello user")
        info = info_obs(nc)
    finally:
        await nc.close()
    expect(got == b"hello user", "round trip payload")
    bad = await refused(URL, user=USER, password="wrong")
    return {"got": got.decode(), "info": info, "wrong_password": bad}


async def connect_token():
    nc = await connect(TOKEN_URL, token=TOKEN)
    try:
        got = await round_trip(nc, "ct.echo", b"hello token")
        info = info_obs(nc)
    finally:
        await nc.close()
    expect(got == b"hello token", "round trip payload")
    bad = await refused(TOKEN_URL, token="wrong" + TOKEN)
    return {"got": got.decode(), "info": info, "wrong_token": bad}


async def connect_nkey():
    nc = await connect(URL, nkeys_seed=NKEY_SEED_FILE)
    try:
        got = await round_trip(nc, "cn.echo", b"hello nkey")
        info = info_obs(nc)
    finally:
        await nc.close()
    expect(got == b"hello nkey", "round trip payload")
    return {"got": got.decode(), "info": info}


async def connect_creds():
    nc = await connect(CREDS_URL, user_credentials=CREDS_FILE)
    try:
        got = await round_trip(nc, "cc.echo", b"hello creds")
        info = info_obs(nc)
    finally:
        await nc.close()
    expect(got == b"hello creds", "round trip payload")
    # the main server's nkey user is no user of the operator's accounts
    bad = await refused(CREDS_URL, nkeys_seed=NKEY_SEED_FILE)
    return {"got": got.decode(), "info": info, "unknown_nkey": bad}


def pattern(n: int, seed: bytes) -> bytes:
    """n deterministic, incompressible-looking bytes."""
    out = bytearray()
    block = seed
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:n])


async def tls():
    ctx = ssl.create_default_context(cafile=TLS_CA)
    nc = await connect(TLS_URL, tls=ctx)
    seen = []
    try:
        for size in (1, 10_000, 500_000):
            data = pattern(size, b"tls%d" % size)
            got = await round_trip(nc, f"tls.{size}", data)
            seen.append({"size": size, "got": len(got), "same": got == data})
        info = info_obs(nc)
    finally:
        await nc.close()
    expect(all(s["same"] for s in seen), "a payload came back different", seen)
    # without the CA the server's certificate is not trusted
    untrusted = await refused(TLS_URL, tls=ssl.create_default_context())
    untrusted.pop("message", None)  # the ssl module's text names the address
    return {"round_trips": seen, "info": info, "untrusted": untrusted}


async def pubsub_wildcard():
    nc = await connect()
    got: dict[str, list[str]] = {"m.*.x": [], "m.>": [], "m.a.x": []}
    try:
        for pat in got:
            async def cb(msg, pat=pat):
                got[pat].append(f"{msg.subject}:{msg.data.decode()}")

            await nc.subscribe(pat, cb=cb)
        subjects = ["m.a.x", "m.b.x", "m.a.y", "m.a.x.y", "n.a.x", "m.c.x", "m.a.x"]
        for i, s in enumerate(subjects):
            await nc.publish(s, str(i).encode())
        await nc.flush()
        expected = {
            "m.*.x": ["m.a.x:0", "m.b.x:1", "m.c.x:5", "m.a.x:6"],
            "m.>": ["m.a.x:0", "m.b.x:1", "m.a.y:2", "m.a.x.y:3", "m.c.x:5", "m.a.x:6"],
            "m.a.x": ["m.a.x:0", "m.a.x:6"],
        }
        await wait_for(lambda: all(len(got[p]) >= len(expected[p]) for p in expected))
        await asyncio.sleep(0.1)  # anything extra would show up now
    finally:
        await nc.close()
    expect(got == expected, "wrong deliveries", got)
    return got


async def queue_group():
    nc = await connect()
    members: list[list[str]] = [[], [], []]
    plain: list[str] = []
    try:
        for i in range(3):
            async def cb(msg, i=i):
                members[i].append(msg.data.decode())

            await nc.subscribe("qg.work", queue="workers", cb=cb)

        async def plain_cb(msg):
            plain.append(msg.data.decode())

        await nc.subscribe("qg.work", cb=plain_cb)
        await nc.flush()
        for i in range(30):
            await nc.publish("qg.work", str(i).encode())
        await nc.flush()
        await wait_for(lambda: len(plain) >= 30 and sum(map(len, members)) >= 30)
        await asyncio.sleep(0.1)
    finally:
        await nc.close()
    queued = sorted((m for mem in members for m in mem), key=int)
    obs = {
        "plain": len(plain),
        "plain_in_order": plain == [str(i) for i in range(30)],
        "queue_total": len(queued),
        "each_once": queued == [str(i) for i in range(30)],
    }
    expect(obs == {"plain": 30, "plain_in_order": True, "queue_total": 30, "each_once": True}, "wrong deliveries", obs)
    return obs


async def request_reply_headers():
    nc = await connect()
    try:
        async def responder(msg):
            hdrs = dict(msg.headers or {})
            hdrs["X-Responder"] = "py"
            await nc.publish(msg.reply, b"echo:" + msg.data, headers=hdrs)

        await nc.subscribe("rr.svc", cb=responder)
        await nc.flush()
        reply = await nc.request("rr.svc", b"ping", timeout=3, headers={"X-Req": "one", "X-Trace": "abc 123"})
    finally:
        await nc.close()
    obs = {"payload": reply.data.decode(), "headers": dict(sorted((reply.headers or {}).items()))}
    expect(obs["payload"] == "echo:ping", "reply payload", obs)
    expect(obs["headers"].get("X-Req") == "one" and obs["headers"].get("X-Responder") == "py", "reply headers", obs)
    return obs


async def no_responders():
    nc = await connect()
    try:
        await nc.request("nr.nobody.home", b"anyone?", timeout=3)
    except nats.errors.NoRespondersError as e:
        return {"error": type(e).__name__}
    finally:
        await nc.close()
    raise Mismatch("the request got a reply")


async def drain():
    nc = await connect()
    handled: list[int] = []
    closed = asyncio.Event()

    async def cb(msg):
        await asyncio.sleep(0.001)
        handled.append(int(msg.data))

    async def on_closed():
        closed.set()

    nc2 = await connect(closed_cb=on_closed)
    try:
        sub = await nc2.subscribe("dr.x", cb=cb)
        await interest_ready(nc2, nc, "drain")
        for i in range(100):
            await nc.publish("dr.x", str(i).encode())
        await nc.flush()
        # as flush() does not prove the messages arrived (see interest_ready), wait until
        # nc2 has read all 100 (most still queued behind the slow callback), then drain.
        await wait_for(lambda: sub.delivered >= 100, timeout=5)
        received = sub.delivered
        await nc2.drain()
        await asyncio.wait_for(closed.wait(), 5)
    finally:
        await nc.close()
    obs = {"received": received, "handled": len(handled), "in_order": handled == list(range(100)), "closed": nc2.is_closed}
    expect(
        obs == {"received": 100, "handled": 100, "in_order": True, "closed": True},
        "drain lost messages or left it open",
        obs,
    )
    return obs


async def reconnect(action: str, subject: str):
    events: list[str] = []
    reconnected = asyncio.Event()
    ldm = asyncio.Event()

    async def on_disconnected():
        events.append("disconnected")

    async def on_reconnected():
        events.append("reconnected")
        reconnected.set()

    async def on_ldm():
        ldm.set()

    nc = await connect(
        reconnect_time_wait=0.25,
        max_reconnect_attempts=-1,
        disconnected_cb=on_disconnected,
        reconnected_cb=on_reconnected,
        lame_duck_mode_cb=on_ldm,
    )
    got: list[str] = []
    persisted = None
    try:
        sub = await nc.subscribe(subject)
        await nc.flush()
        before = await round_trip(nc, subject + ".check", b"before")
        if action == "restart":
            # a file stream with a durable consumer that acked 1 of 3: all survives a restart
            js = nc.jetstream(timeout=5)
            await js.add_stream(name="MXR", subjects=["mxr.>"], storage=api.StorageType.FILE)
            for i in range(1, 4):
                await js.publish(f"mxr.{i}", f"r{i}".encode(), headers={"Nats-Msg-Id": f"r{i}"})
            psub = await js.pull_subscribe("mxr.>", durable="KEEP", stream="MXR")
            (m,) = await psub.fetch(1, timeout=3)
            await m.ack_sync()
        done = await control(action)
        expect(done == "done", f"runner answered {done!r}")
        await asyncio.wait_for(reconnected.wait(), 20)
        other = await connect()
        try:
            await interest_ready(nc, other, action)  # the resent SUB is in place
            await other.publish(subject, b"after " + action.encode())
            await other.flush()
        finally:
            await other.close()
        msg = await sub.next_msg(timeout=5)
        got.append(msg.data.decode())
        if action == "restart":
            si = await js.stream_info("MXR")
            ci = await js.consumer_info("MXR", "KEEP")
            dup = await js.publish("mxr.1", b"r1", headers={"Nats-Msg-Id": "r1"})
            (m,) = await psub.fetch(1, timeout=3)
            await m.ack_sync()
            persisted = {
                "messages": si.state.messages,
                "seqs": [si.state.first_seq, si.state.last_seq],
                "consumer": {
                    "delivered": [ci.delivered.consumer_seq, ci.delivered.stream_seq],
                    "ack_floor": [ci.ack_floor.consumer_seq, ci.ack_floor.stream_seq],
                    "num_pending": ci.num_pending,
                    "num_ack_pending": ci.num_ack_pending,
                },
                "republish_r1": ack_obs(dup),
                "next": [m.data.decode(), m.metadata.num_delivered, m.metadata.sequence.stream],
            }
    finally:
        await nc.close()
    obs = {"before": before.decode(), "got": got, "events": events}
    if persisted is not None:
        obs["jetstream_after_restart"] = persisted
    if action == "lameduck":
        obs["lame_duck_reported"] = ldm.is_set()
    return obs


async def reconnect_restart():
    return await reconnect("restart", "rc.restart")


async def reconnect_lameduck():
    return await reconnect("lameduck", "rc.ldm")


def config_obs(cfg) -> dict:
    """A stream's or consumer's config as the client parsed it (the server fills in the
    defaults), in JSON-able form."""
    return json.loads(json.dumps(cfg.as_dict(), default=lambda v: getattr(v, "value", str(v))))


def ack_obs(ack: api.PubAck) -> dict:
    return {"stream": ack.stream, "seq": ack.seq, "duplicate": bool(ack.duplicate)}


async def js_publish_dedupe():
    nc = await connect()
    try:
        js = nc.jetstream(timeout=5)
        info = await js.add_stream(name="MX", subjects=["mx.>"], storage=api.StorageType.FILE)
        acks = []
        for mid, payload in (("a", b"first"), ("a", b"again"), ("b", b"second")):
            acks.append(ack_obs(await js.publish("mx.dedupe", payload, headers={"Nats-Msg-Id": mid})))
        try:
            await js.publish("mx.dedupe", b"elsewhere", stream="NOTMX")
            wrong_stream = "accepted"
        except nats.js.errors.APIError as e:
            wrong_stream = err_kind(e)
        try:
            await js.publish("nostream.here", b"lost")
            no_stream = "accepted"
        except nats.js.errors.NoStreamResponseError as e:
            no_stream = type(e).__name__
        api_errors = {}
        for what, call in (
            ("overlapping_subjects", js.add_stream(name="MX2", subjects=["mx.a"])),
            ("same_name_other_config", js.add_stream(name="MX", subjects=["other.>"])),
            ("stream_not_found", js.stream_info("NOPE")),
            ("consumer_not_found", js.consumer_info("MX", "NOPE")),
            ("msg_not_found", js.get_msg("MX", seq=99)),
        ):
            try:
                await call
                api_errors[what] = "accepted"
            except nats.js.errors.APIError as e:
                api_errors[what] = err_kind(e)
        state = (await js.stream_info("MX")).state
        last = await js.get_msg("MX", seq=state.last_seq)
        # a scratch stream: per-subject last message, delete one, purge a subject, keep 1
        await js.add_stream(name="MXS", subjects=["mxs.>"], storage=api.StorageType.MEMORY)
        for i, subj in enumerate(["mxs.a", "mxs.b", "mxs.a", "mxs.c", "mxs.b", "mxs.a"]):
            await js.publish(subj, f"s{i + 1}".encode())
        last_a = await js.get_last_msg("MXS", "mxs.a")
        await js.delete_msg("MXS", 2)
        try:
            await js.get_msg("MXS", seq=2)
            deleted_get = "found"
        except nats.js.errors.NotFoundError as e:
            deleted_get = err_kind(e)
        await js.purge_stream("MXS", subject="mxs.b")
        after_subject_purge = (await js.stream_info("MXS", subjects_filter=">")).state
        await js.purge_stream("MXS", keep=1)
        after_keep = (await js.stream_info("MXS")).state
        scratch = {
            "last_a": [last_a.seq, (last_a.data or b"").decode(), last_a.subject],
            "get_deleted": deleted_get,
            "after_subject_purge": {
                "messages": after_subject_purge.messages,
                "seqs": [after_subject_purge.first_seq, after_subject_purge.last_seq],
                "num_deleted": after_subject_purge.num_deleted,
                "subjects": dict(sorted((after_subject_purge.subjects or {}).items())),
            },
            "after_keep_1": {"messages": after_keep.messages, "seqs": [after_keep.first_seq, after_keep.last_seq]},
        }
    finally:
        await nc.close()
    obs = {
        "config": config_obs(info.config),
        "acks": acks,
        "wrong_expected_stream": wrong_stream,
        "no_stream": no_stream,
        "api_errors": api_errors,
        "scratch_stream": scratch,
        "messages": state.messages,
        "seqs": [state.first_seq, state.last_seq],
        "last": {"seq": last.seq, "data": (last.data or b"").decode(), "msg_id": (last.headers or {}).get("Nats-Msg-Id")},
    }
    expect(
        [(a["seq"], a["duplicate"]) for a in acks] == [(1, False), (1, True), (2, False)] and state.messages == 2,
        "dedupe acks",
        obs,
    )
    return obs


def delivered(msgs) -> list[list]:
    return [[m.data.decode(), m.metadata.num_delivered, m.metadata.sequence.stream] for m in msgs]


async def js_pull_consumer():
    nc = await connect()
    try:
        js = nc.jetstream(timeout=5)
        await js.add_stream(name="MXPULL", subjects=["mxpull.>"], storage=api.StorageType.FILE)
        for i in range(1, 6):
            await js.publish(f"mxpull.{i}", f"p{i}".encode())
        cfg = api.ConsumerConfig(ack_policy=api.AckPolicy.EXPLICIT, ack_wait=1, max_ack_pending=100)
        psub = await js.pull_subscribe("mxpull.>", durable="PULL", stream="MXPULL", config=cfg)
        first = await psub.fetch(5, timeout=3)
        await first[0].ack_sync()
        await first[1].ack_sync()
        await first[2].nak()
        await nc.flush()
        # p3 comes back at once (nak); p4 and p5 after their 1 s ack wait. Each is acked as
        # soon as it arrives, before its own new ack wait could run out.
        second = []
        loop = asyncio.get_running_loop()
        end = loop.time() + 6
        while len(second) < 3 and loop.time() < end:
            try:
                for m in await psub.fetch(1, timeout=2):
                    await m.ack_sync()
                    second.append(m)
            except nats.errors.TimeoutError:
                pass
        for i in range(6, 8):
            await js.publish(f"mxpull.{i}", f"p{i}".encode())
        ci = await js.consumer_info("MXPULL", "PULL")
        # a batch of 10 when 2 are there: the request expires with what there was
        partial = await psub.fetch(10, timeout=1)
        partial_got = [m.data.decode() for m in partial]
        for m in partial:
            await m.ack_sync()
        try:
            await psub.fetch(1, timeout=0.5)
            empty_fetch = "got a message"
        except nats.errors.TimeoutError as e:
            empty_fetch = type(e).__name__
    finally:
        await nc.close()
    obs = {
        "first": delivered(first),
        "second": delivered(second),
        "num_ack_pending": ci.num_ack_pending,
        "num_pending": ci.num_pending,
        "num_redelivered": ci.num_redelivered,
        "delivered": [ci.delivered.consumer_seq, ci.delivered.stream_seq],
        "ack_floor": [ci.ack_floor.consumer_seq, ci.ack_floor.stream_seq],
        "config": config_obs(ci.config),
        "empty_fetch": empty_fetch,
        "partial_fetch": partial_got,
    }
    expect([d[0] for d in obs["second"]] == ["p3", "p4", "p5"], "redeliveries", obs)
    expect(all(d[1] == 2 for d in obs["second"]), "redelivered counts", obs)
    expect(ci.num_ack_pending == 0 and ci.num_pending == 2, "final pending counts", obs)
    return obs


async def js_push_consumer():
    nc = await connect()
    try:
        js = nc.jetstream(timeout=5)
        await js.add_stream(name="MXPUSH", subjects=["mxpush.>"], storage=api.StorageType.FILE)
        for i in range(1, 5):
            await js.publish(f"mxpush.{i}", f"q{i}".encode())
        got: list = []
        sub = await nc.subscribe("deliver.mxpush")
        await nc.flush()
        await js.add_consumer(
            "MXPUSH",
            api.ConsumerConfig(
                durable_name="PUSH",
                deliver_subject="deliver.mxpush",
                ack_policy=api.AckPolicy.EXPLICIT,
                ack_wait=10,
            ),
        )
        for _ in range(4):
            got.append(await sub.next_msg(timeout=3))
        for i, m in enumerate(got):
            if i == 1:
                await m.nak()
            else:
                await m.ack_sync()
        got.append(await sub.next_msg(timeout=3))
        await got[-1].ack_sync()
        extra = None
        try:
            extra = await sub.next_msg(timeout=0.5)
        except nats.errors.TimeoutError:
            pass
        ci = await js.consumer_info("MXPUSH", "PUSH")
        ordered = await js.subscribe("mxpush.>", stream="MXPUSH", ordered_consumer=True, idle_heartbeat=0.5)
        in_order = []
        for _ in range(4):
            m = await ordered.next_msg(timeout=3)
            in_order.append([m.data.decode(), m.metadata.sequence.stream])
        await ordered.unsubscribe()
    finally:
        await nc.close()
    obs = {
        "order": delivered(got),
        "extra": None if extra is None else extra.data.decode(),
        "ordered_consumer": in_order,
        "num_ack_pending": ci.num_ack_pending,
        "num_pending": ci.num_pending,
        "delivered": [ci.delivered.consumer_seq, ci.delivered.stream_seq],
        "ack_floor": [ci.ack_floor.consumer_seq, ci.ack_floor.stream_seq],
        "config": config_obs(ci.config),
    }
    expect(
        obs["order"] == [["q1", 1, 1], ["q2", 1, 2], ["q3", 1, 3], ["q4", 1, 4], ["q2", 2, 2]] and extra is None,
        "push delivery order",
        obs,
    )
    return obs


def entry_obs(e) -> list:
    return [e.key, e.operation or "PUT", e.revision, (e.value or b"").decode()]


async def kv():
    nc = await connect()
    try:
        js = nc.jetstream(timeout=5)
        bucket = await js.create_key_value(bucket="mxkv", history=5)
        watcher = await bucket.watchall()
        first = await watcher.updates(timeout=3)  # None: nothing in the bucket yet
        ops = {}
        ops["put_k1"] = await bucket.put("k1", b"v1")
        ops["get_k1"] = entry_obs(await bucket.get("k1"))
        ops["update_k1"] = await bucket.update("k1", b"v2", last=1)
        try:
            await bucket.update("k1", b"stale", last=1)
            ops["stale_update"] = "accepted"
        except nats.js.errors.KeyWrongLastSequenceError as e:
            ops["stale_update"] = err_kind(e)
        ops["put_k2"] = await bucket.put("k2", b"a")
        await bucket.delete("k1")
        ops["put_k1_again"] = await bucket.put("k1", b"v3")
        await bucket.purge("k2")
        try:
            await bucket.get("k2")
            ops["get_k2"] = "found"
        except nats.js.errors.KeyNotFoundError as e:
            ops["get_k2"] = type(e).__name__
        ops["create_k1"] = None
        try:
            await bucket.create("k1", b"exists")
        except nats.js.errors.KeyWrongLastSequenceError as e:
            ops["create_k1"] = err_kind(e)
        ops["get_k1_rev2"] = entry_obs(await bucket.get("k1", revision=2))
        keys = sorted(await bucket.keys())
        history = [entry_obs(e) for e in await bucket.history("k1")]
        hw = await bucket.watch("k1", include_history=True)
        with_history = []
        while True:
            e = await hw.updates(timeout=3)
            if e is None:
                break
            with_history.append(entry_obs(e))
        await hw.stop()
        seen = []
        while len(seen) < 6:
            e = await watcher.updates(timeout=3)
            if e is None:
                continue
            seen.append(entry_obs(e))
        await watcher.stop()
        status = await bucket.status()
    finally:
        await nc.close()
    obs = {
        "first_watch": first,
        "ops": ops,
        "keys": keys,
        "history_k1": history,
        "watch_k1_with_history": with_history,
        "watch": seen,
        "status": {"bucket": status.bucket, "values": status.values, "history": status.history},
        "stream_config": config_obs(status.stream_info.config),
    }
    expect(keys == ["k1"], "keys", obs)
    expect([h[1] for h in history] == ["PUT", "PUT", "DEL", "PUT"], "history", obs)
    expect([w[1] for w in seen] == ["PUT", "PUT", "PUT", "DEL", "PUT", "PURGE"], "watch operations", obs)
    return obs


def sha256_digest(data: bytes) -> str:
    return "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()


async def object_store():
    nc = await connect()
    try:
        js = nc.jetstream(timeout=5)
        obs_store = await js.create_object_store("mxobj")
        data = pattern(1024 * 1024 + 12345, b"object")
        put = await obs_store.put("big.bin", data)
        res = await obs_store.get("big.bin")
        info = await obs_store.get_info("big.bin")
        await obs_store.put("small.txt", b"tiny object")
        listed = sorted(i.name for i in await obs_store.list())
        await obs_store.delete("big.bin")
        try:
            await obs_store.get_info("big.bin")
            after_delete = "found"
        except (nats.js.errors.ObjectNotFoundError, nats.js.errors.ObjectDeletedError) as e:
            after_delete = type(e).__name__
        listed_after = sorted(i.name for i in await obs_store.list(ignore_deletes=True))
        await obs_store.seal()
        try:
            await obs_store.put("late.txt", b"after the seal")
            after_seal = "accepted"
        except nats.js.errors.APIError as e:
            after_seal = err_kind(e)
        except nats.errors.Error as e:
            after_seal = {"error": type(e).__name__}
        st = await obs_store.status()
    finally:
        await nc.close()
    obs = {
        "put": {"size": put.size, "chunks": put.chunks, "digest": put.digest},
        "got_same": res.data == data,
        "digest_matches": put.digest == sha256_digest(data),
        "info": {"name": info.name, "size": info.size, "chunks": info.chunks, "deleted": bool(info.deleted)},
        "list": listed,
        "after_delete": after_delete,
        "list_after_delete": listed_after,
        "stream_config": config_obs(st.stream_info.config),
        "stream_state": {"messages": st.stream_info.state.messages, "bytes": st.stream_info.state.bytes},
        "put_after_seal": after_seal,
    }
    expect(obs["got_same"] and obs["digest_matches"], "object data or digest", obs)
    expect(listed_after == ["small.txt"], "list after delete", obs)
    return obs


async def websocket():
    ws = await connect(WS_URL)
    tcp = await connect()
    try:
        echo = await round_trip(ws, "ws.echo", b"over websocket")
        sub_ws = await ws.subscribe("ws.to_ws")
        sub_tcp = await tcp.subscribe("ws.to_tcp")
        await interest_ready(ws, tcp, "ws1")
        await interest_ready(tcp, ws, "ws2")
        await tcp.publish("ws.to_ws", b"from tcp")
        await ws.publish("ws.to_tcp", b"from ws", headers={"X-Via": "ws"})
        await tcp.flush()
        await ws.flush()
        to_ws = await sub_ws.next_msg(timeout=3)
        to_tcp = await sub_tcp.next_msg(timeout=3)
        big = pattern(200_000, b"ws")
        big_back = await round_trip(ws, "ws.big", big)
        info = info_obs(ws)
    finally:
        await ws.close()
        await tcp.close()
    bad = await refused(WS_URL, user=USER, password="wrong")
    obs = {
        "echo": echo.decode(),
        "to_ws": to_ws.data.decode(),
        "to_tcp": to_tcp.data.decode(),
        "to_tcp_headers": dict(to_tcp.headers or {}),
        "big_same": big_back == big,
        "info": info,
        "wrong_password": bad,
    }
    expect(obs["echo"] == "over websocket" and obs["big_same"], "websocket round trips", obs)
    return obs


FEATURES = [
    ("connect_user", connect_user, 15),
    ("connect_token", connect_token, 15),
    ("connect_nkey", connect_nkey, 10),
    ("connect_creds", connect_creds, 10),
    ("tls", tls, 15),
    ("pubsub_wildcard", pubsub_wildcard, 10),
    ("queue_group", queue_group, 10),
    ("request_reply_headers", request_reply_headers, 10),
    ("no_responders", no_responders, 10),
    ("drain", drain, 15),
    ("js_publish_dedupe", js_publish_dedupe, 15),
    ("js_pull_consumer", js_pull_consumer, 20),
    ("js_push_consumer", js_push_consumer, 15),
    ("kv", kv, 15),
    ("object_store", object_store, 20),
    ("websocket", websocket, 10),
    ("reconnect_restart", reconnect_restart, 40),
    ("reconnect_lameduck", reconnect_lameduck, 60),
]


def emit(feature: str, status: str, obs) -> None:
    print(f"RESULT {feature} {status} {json.dumps(obs, separators=(',', ':'), sort_keys=True)}", flush=True)


async def main() -> None:
    only = set(filter(None, ENV.get("MATRIX_ONLY", "").split(",")))
    for name, fn, timeout in FEATURES:
        if only and name not in only:
            continue
        log(f"--- {name}")
        try:
            obs = await asyncio.wait_for(fn(), timeout)
            emit(name, "ok", obs)
        except nats.errors.Error as e:
            log(traceback.format_exc())
            emit(name, "fail", err_kind(e))
        except asyncio.TimeoutError:
            log(traceback.format_exc())
            emit(name, "fail", {"error": "timeout", "after_s": timeout})
        except Exception as e:  # noqa: BLE001 - every failure becomes a RESULT line
            log(traceback.format_exc())
            emit(name, "fail", err_kind(e))


if __name__ == "__main__":
    asyncio.run(main())
