// Client matrix: the JavaScript program (nats.js v3: @nats-io/transport-node,
// jetstream, kv, obj). The contract is tests/clients/README.md: one
// `RESULT <feature> <ok|fail|skip> <observation>` line per feature on stdout,
// `CONTROL restart|lameduck` lines answered by `done` on stdin, logs on stderr.

import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { createInterface } from "node:readline";

import {
  connect,
  credsAuthenticator,
  headers,
  nkeyAuthenticator,
} from "@nats-io/transport-node";
import { errors, nkeys, wsconnect } from "@nats-io/nats-core";
import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  StorageType,
} from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";

const env = process.env;
const URL = env.MATRIX_URL;
const USER = env.MATRIX_USER;
const PASS = env.MATRIX_PASSWORD;

const enc = new TextEncoder();
const dec = new TextDecoder();

function log(...args) {
  process.stderr.write(`[js] ${args.join(" ")}\n`);
}

function nanos(ms) {
  return ms * 1_000_000;
}

function delay(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

function sha256(u8) {
  return createHash("sha256").update(u8).digest("hex");
}

// A deterministic error description: the class name, and the server/API code
// when there is one. Messages are kept only where they are fixed texts.
function errKind(e) {
  if (e === null || e === undefined) return { name: String(e) };
  const out = { name: e.name ?? e.constructor?.name ?? typeof e };
  if (typeof e.message === "string") out.message = e.message;
  if (e.code !== undefined) out.code = String(e.code);
  if (e.api_error?.err_code !== undefined) out.err_code = e.api_error.err_code;
  if (e.cause) out.cause = e.cause.name ?? String(e.cause);
  return out;
}

// Thrown by a feature when its own expectation is not met: `obs` is printed.
class Fail extends Error {
  constructor(obs) {
    super("expectation not met");
    this.obs = obs;
  }
}

function expect(cond, obs) {
  if (!cond) throw new Fail(obs);
}

// ---------------------------------------------------------------- stdin/stdout

const stdinLines = [];
const stdinWaiters = [];
const rl = createInterface({ input: process.stdin, terminal: false });
rl.on("line", (line) => {
  const w = stdinWaiters.shift();
  if (w) w(line);
  else stdinLines.push(line);
});
rl.on("close", () => {
  while (stdinWaiters.length) stdinWaiters.shift()(null);
});

function readLine() {
  if (stdinLines.length) return Promise.resolve(stdinLines.shift());
  return new Promise((r) => stdinWaiters.push(r));
}

function out(line) {
  return new Promise((r) => process.stdout.write(line + "\n", () => r()));
}

async function control(what) {
  await out(`CONTROL ${what}`);
  const line = await readLine();
  if (line === null) throw new Error("stdin closed before done");
  if (line.trim() !== "done") throw new Error(`unexpected control reply ${line}`);
}

// --------------------------------------------------------------- feature runner

const printed = new Set();

async function result(name, status, obs) {
  if (printed.has(name)) return;
  printed.add(name);
  await out(`RESULT ${name} ${status} ${JSON.stringify(obs)}`);
}

// Each feature gets a context whose connections are closed when it ends,
// whether it succeeded, failed or timed out.
class Ctx {
  constructor() {
    this.conns = [];
  }
  async connect(opts) {
    const nc = await connect({ servers: URL, user: USER, pass: PASS, timeout: 5000, ...opts });
    this.conns.push(nc);
    return nc;
  }
  track(nc) {
    this.conns.push(nc);
    return nc;
  }
  async cleanup() {
    await Promise.race([
      Promise.allSettled(
        this.conns.map((nc) => (nc.isClosed() ? null : nc.close())),
      ),
      delay(2000),
    ]);
  }
}

async function feature(name, timeoutMs, fn) {
  const ctx = new Ctx();
  let timer;
  const timeout = new Promise((_, rej) => {
    timer = setTimeout(() => rej(new Fail({ error: "timeout", after_ms: timeoutMs, step: ctx.step })), timeoutMs);
  });
  try {
    const obs = await Promise.race([fn(ctx), timeout]);
    if (obs && obs.__skip) await result(name, "skip", obs.reason);
    else await result(name, "ok", obs);
  } catch (e) {
    if (e instanceof Fail) await result(name, "fail", e.obs);
    else {
      log(name, "exception", e?.stack ?? e);
      await result(name, "fail", { exception: errKind(e), step: ctx.step });
    }
  } finally {
    clearTimeout(timer);
    await ctx.cleanup();
  }
}

// Waits for `cond()` to become true, polling; false when the deadline passes.
async function until(cond, ms, every = 20) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await delay(every);
  }
  return cond();
}

// Subscribes, publishes one message and returns what came back.
async function roundTrip(nc, subject, payload) {
  const sub = nc.subscribe(subject, { max: 1 });
  await nc.flush();
  nc.publish(subject, payload);
  for await (const m of sub) {
    return m.data;
  }
  throw new Error("subscription ended without a message");
}

async function refused(opts) {
  try {
    const nc = await connect({ reconnect: false, timeout: 5000, ...opts });
    await nc.close();
    return { refused: false };
  } catch (e) {
    return { refused: true, error: errKind(e) };
  }
}

// ----------------------------------------------------------------- features

async function connectUser(ctx) {
  ctx.step = "connect";
  const nc = await ctx.connect();
  const got = dec.decode(await roundTrip(nc, "mx.user", "hello user"));
  const i = nc.info ?? {};
  const info = {
    proto: i.proto,
    headers: i.headers,
    auth_required: i.auth_required ?? false,
    tls_required: i.tls_required ?? false,
    jetstream: i.jetstream ?? false,
    max_payload: i.max_payload,
  };
  ctx.step = "wrong password";
  const bad = await refused({ servers: URL, user: USER, pass: PASS + "-wrong" });
  const obs = { got, info, wrong_password: bad };
  expect(got === "hello user" && bad.refused, obs);
  return obs;
}

async function connectToken(ctx) {
  const url = env.MATRIX_TOKEN_URL;
  ctx.step = "connect";
  const nc = ctx.track(await connect({ servers: url, token: env.MATRIX_TOKEN, timeout: 5000 }));
  const got = dec.decode(await roundTrip(nc, "mx.token", "hello token"));
  ctx.step = "wrong token";
  const bad = await refused({ servers: url, token: env.MATRIX_TOKEN + "x" });
  const obs = { got, wrong_token: bad };
  expect(got === "hello token" && bad.refused, obs);
  return obs;
}

async function connectNkey(ctx) {
  const seed = readFileSync(env.MATRIX_NKEY_SEED_FILE, "utf8").trim();
  ctx.step = "connect";
  const nc = ctx.track(
    await connect({ servers: URL, authenticator: nkeyAuthenticator(enc.encode(seed)), timeout: 5000 }),
  );
  const got = dec.decode(await roundTrip(nc, "mx.nkey", "hello nkey"));
  // a user nkey the server does not know
  ctx.step = "unknown nkey";
  const stranger = nkeys.createUser().getSeed();
  const bad = await refused({ servers: URL, authenticator: nkeyAuthenticator(stranger) });
  const obs = { got, unknown_nkey: bad };
  expect(got === "hello nkey" && bad.refused, obs);
  return obs;
}

async function connectCreds(ctx) {
  const creds = readFileSync(env.MATRIX_CREDS_FILE);
  ctx.step = "connect";
  const nc = ctx.track(
    await connect({
      servers: env.MATRIX_CREDS_URL,
      authenticator: credsAuthenticator(new Uint8Array(creds)),
      timeout: 5000,
    }),
  );
  const got = dec.decode(await roundTrip(nc, "mx.creds", "hello creds"));
  const obs = { got };
  expect(got === "hello creds", obs);
  return obs;
}

// Deterministic bytes (an xorshift stream), so digests are stable between runs.
function bytes(n, seed) {
  const u8 = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    u8[i] = x & 0xff;
  }
  return u8;
}

async function tlsFeature(ctx) {
  ctx.step = "connect";
  const nc = ctx.track(
    await connect({ servers: env.MATRIX_TLS_URL, tls: { caFile: env.MATRIX_TLS_CA }, timeout: 5000 }),
  );
  const sizes = [1, 10 * 1024, 500 * 1024, 1024 * 1024];
  const rounds = [];
  let allEqual = true;
  for (const n of sizes) {
    ctx.step = `round trip ${n}`;
    const data = bytes(n, n);
    const got = await roundTrip(nc, `mx.tls.${n}`, data);
    const equal = got.length === n && sha256(got) === sha256(data);
    allEqual &&= equal;
    rounds.push({ size: n, got: got.length, equal });
  }
  // without the CA the server's certificate is not trusted
  ctx.step = "untrusted";
  const untrusted = await refused({ servers: env.MATRIX_TLS_URL, tls: {} });
  const obs = {
    rounds,
    tls_required: nc.info?.tls_required ?? null,
    max_payload: nc.info?.max_payload ?? null,
    without_ca: untrusted,
  };
  expect(allEqual && untrusted.refused, obs);
  return obs;
}

async function pubsubWildcard(ctx) {
  const subNc = await ctx.connect();
  const pubNc = await ctx.connect();
  const patterns = ["m.*.x", "m.>", "m.a.x"];
  const got = {};
  const done = {};
  for (const p of patterns) {
    got[p] = [];
    done[p] = false;
    subNc.subscribe(p, {
      callback: (err, m) => {
        if (err) return;
        const d = dec.decode(m.data);
        if (d === "end") done[p] = true;
        else got[p].push(`${m.subject}:${d}`);
      },
    });
  }
  await subNc.flush();
  const subjects = ["m.a.x", "m.b.x", "m.a.y", "m.a.x.y", "m.x", "n.a.x", "m.c.x", "m.a.b.c"];
  subjects.forEach((s, i) => pubNc.publish(s, `${i}`));
  // m.a.x matches all three patterns: it marks the end for each of them.
  pubNc.publish("m.a.x", "end");
  await pubNc.flush();
  ctx.step = "waiting for the end marker";
  const allDone = await until(() => patterns.every((p) => done[p]), 5000);
  const obs = { got, all_ended: allDone };
  expect(allDone, obs);
  return obs;
}

async function queueGroup(ctx) {
  const subNc = await ctx.connect();
  const pubNc = await ctx.connect();
  const members = [0, 0, 0];
  const seen = new Map();
  const plain = [];
  for (let i = 0; i < 3; i++) {
    subNc.subscribe("q.work", {
      queue: "workers",
      callback: (err, m) => {
        if (err) return;
        members[i]++;
        const d = dec.decode(m.data);
        seen.set(d, (seen.get(d) ?? 0) + 1);
      },
    });
  }
  subNc.subscribe("q.work", {
    callback: (err, m) => {
      if (!err) plain.push(Number(dec.decode(m.data)));
    },
  });
  await subNc.flush();
  for (let i = 0; i < 30; i++) pubNc.publish("q.work", `${i}`);
  await pubNc.flush();
  const total = () => members.reduce((a, b) => a + b, 0);
  ctx.step = "waiting for 30 deliveries";
  await until(() => total() >= 30 && plain.length >= 30, 5000);
  // A little longer, to see any extra (duplicate) delivery.
  await delay(200);
  await subNc.flush();
  const exactlyOnce = seen.size === 30 && [...seen.values()].every((c) => c === 1);
  const inOrder = plain.every((v, i) => v === i);
  const obs = {
    queue_total: total(),
    queue_distinct: seen.size,
    each_exactly_once: exactlyOnce,
    plain_count: plain.length,
    plain_in_order: inOrder,
  };
  expect(total() === 30 && exactlyOnce && plain.length === 30 && inOrder, obs);
  return obs;
}

function headersObj(h) {
  if (!h) return null;
  const o = {};
  for (const k of [...h.keys()].sort()) o[k] = h.values(k);
  return o;
}

async function requestReplyHeaders(ctx) {
  const svcNc = await ctx.connect();
  const nc = await ctx.connect();
  svcNc.subscribe("svc.echo", {
    callback: (err, m) => {
      if (err) return;
      const h = headers();
      if (m.headers) {
        for (const k of m.headers.keys()) {
          for (const v of m.headers.values(k)) h.append(k, v);
        }
      }
      h.set("X-Responder", "js");
      m.respond(enc.encode(`echo: ${dec.decode(m.data)}`), { headers: h });
    },
  });
  await svcNc.flush();
  const h = headers();
  h.set("X-Request-Id", "r-1");
  h.append("X-Multi", "one");
  h.append("X-Multi", "two");
  ctx.step = "request";
  const reply = await nc.request("svc.echo", enc.encode("ping"), { headers: h, timeout: 3000 });
  const obs = {
    data: dec.decode(reply.data),
    headers: headersObj(reply.headers),
    has_error: reply.headers?.hasError ?? false,
  };
  expect(
    obs.data === "echo: ping" && obs.headers?.["X-Responder"]?.[0] === "js" &&
      obs.headers?.["X-Request-Id"]?.[0] === "r-1",
    obs,
  );
  return obs;
}

async function noResponders(ctx) {
  const nc = await ctx.connect();
  ctx.step = "request";
  try {
    const m = await nc.request("nobody.home", enc.encode("anyone?"), { timeout: 3000 });
    throw new Fail({ replied: true, data: dec.decode(m.data) });
  } catch (e) {
    if (e instanceof Fail) throw e;
    const noResp = e instanceof errors.NoRespondersError ||
      e?.cause instanceof errors.NoRespondersError;
    // JetStream publish to a subject no stream captures: the same 503 status
    ctx.step = "jetstream publish without a stream";
    let jsPub;
    try {
      const a = await jetstream(nc).publish("nostream.here", "x", { timeout: 3000 });
      jsPub = { accepted: ackObs(a) };
    } catch (e2) {
      jsPub = errKind(e2);
    }
    const obs = { error: errKind(e), no_responders: noResp, jetstream_publish: jsPub };
    expect(noResp, obs);
    return obs;
  }
}

async function drain(ctx) {
  const nc = await ctx.connect();
  let handled = 0;
  const sub = nc.subscribe("drain.x", {
    callback: (err) => {
      if (!err) handled++;
    },
  });
  await nc.flush();
  for (let i = 0; i < 100; i++) nc.publish("drain.x", `${i}`);
  ctx.step = "drain";
  const closed = nc.closed();
  await nc.drain();
  const closeErr = await closed;
  const obs = {
    handled,
    sub_closed: sub.isClosed(),
    conn_closed: nc.isClosed(),
    close_error: closeErr ? errKind(closeErr) : null,
  };
  expect(handled === 100 && nc.isClosed(), obs);
  return obs;
}

async function reconnect(ctx, what, subject) {
  const nc = await ctx.connect({
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    reconnectJitter: 0,
    name: `matrix-js-${what}`,
  });
  const events = new Set();
  const sequence = [];
  (async () => {
    for await (const s of nc.status()) {
      events.add(s.type);
      if (sequence[sequence.length - 1] !== s.type) sequence.push(s.type);
    }
  })().catch(() => {});
  const got = [];
  nc.subscribe(subject, {
    callback: (err, m) => {
      if (!err) got.push(dec.decode(m.data));
    },
  });
  await nc.flush();
  // JetStream state (file storage) that must survive the restart: a stream with
  // three messages published with message ids, a durable pull consumer that
  // acked the first one.
  ctx.step = "jetstream before";
  const stream = `MXR${what.toUpperCase()}`;
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  await jsm.streams.add({ name: stream, subjects: [`mxr.${what}.>`], storage: StorageType.File });
  for (let i = 1; i <= 3; i++) await js.publish(`mxr.${what}.${i}`, `r${i}`, { msgID: `r${i}` });
  await jsm.consumers.add(stream, { durable_name: "c", ack_policy: AckPolicy.Explicit });
  const c = await js.consumers.get(stream, "c");
  const m1 = await c.next({ expires: 3000 });
  await m1.ackAck();
  ctx.step = `control ${what}`;
  await control(what);
  ctx.step = "waiting for the reconnect";
  const reconnected = await until(() => events.has("reconnect"), 15000, 50);
  // The subscription must be re-established by the client: publish from a
  // second connection (retrying, since the SUB may still be on its way).
  ctx.step = "publishing after the restart";
  const pub = await ctx.connect();
  let received = false;
  for (let i = 0; i < 50 && !received; i++) {
    pub.publish(subject, "after");
    await pub.flush();
    received = await until(() => got.length > 0, 100, 10);
  }
  // JetStream after the restart (retried while the server recovers its store).
  ctx.step = "jetstream after";
  let si = null;
  for (let i = 0; i < 50 && si === null; i++) {
    try {
      si = await jsm.streams.info(stream);
    } catch (e) {
      log(what, "stream info after restart:", e?.message);
      await delay(100);
    }
  }
  const dup = ackObs(await js.publish(`mxr.${what}.2`, "r2 again", { msgID: "r2" }));
  const ci = await jsm.consumers.info(stream, "c");
  const m2 = await c.next({ expires: 3000 });
  if (m2) await m2.ackAck();
  log(what, "status sequence", JSON.stringify(sequence));
  const obs = {
    reconnected,
    disconnect_event: events.has("disconnect"),
    reconnect_event: events.has("reconnect"),
    ldm_event: events.has("ldm"),
    // status types in order, repeats collapsed (reconnect attempts vary in number)
    status_sequence: sequence,
    got: got.slice(0, 1),
    jetstream: {
      stream: si && { messages: si.state.messages, bytes: si.state.bytes, last_seq: si.state.last_seq },
      duplicate_publish: dup,
      consumer: consumerState(ci),
      next: m2 && { seq: m2.seq, data: dec.decode(m2.data), delivered: m2.info.deliveryCount },
    },
  };
  expect(
    reconnected && received && got[0] === "after" && si?.state.messages === 3 && dup.duplicate &&
      m2?.seq === 2,
    obs,
  );
  return obs;
}

function ackObs(a) {
  return { stream: a.stream, seq: a.seq, duplicate: a.duplicate };
}

async function jsPublishDedupe(ctx) {
  const nc = await ctx.connect();
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  ctx.step = "add stream";
  await jsm.streams.add({ name: "MX", subjects: ["mx.>"], storage: StorageType.File });
  const acks = [];
  for (const [id, data] of [["a", "one"], ["a", "one again"], ["b", "two"]]) {
    ctx.step = `publish ${id}`;
    acks.push(ackObs(await js.publish("mx.dedupe", data, { msgID: id })));
  }
  ctx.step = "publish expecting a wrong last sequence";
  let wrongLast;
  try {
    const a = await js.publish("mx.dedupe", "three", { expect: { lastSequence: 1 } });
    wrongLast = { accepted: ackObs(a) };
  } catch (e) {
    wrongLast = errKind(e);
  }
  const si = await jsm.streams.info("MX");
  const obs = {
    acks,
    wrong_last_sequence: wrongLast,
    state: { messages: si.state.messages, bytes: si.state.bytes, first_seq: si.state.first_seq, last_seq: si.state.last_seq },
    duplicate_window: si.config.duplicate_window,
  };
  expect(
    acks[0].seq === 1 && !acks[0].duplicate && acks[1].seq === 1 && acks[1].duplicate &&
      acks[2].seq === 2 && !acks[2].duplicate,
    obs,
  );
  return obs;
}

function jsMsgObs(m) {
  return { seq: m.seq, subject: m.subject, data: dec.decode(m.data), delivered: m.info.deliveryCount };
}

function consumerState(ci) {
  return {
    num_ack_pending: ci.num_ack_pending,
    num_pending: ci.num_pending,
    num_redelivered: ci.num_redelivered,
    delivered_stream_seq: ci.delivered.stream_seq,
    ack_floor_stream_seq: ci.ack_floor.stream_seq,
  };
}

async function jsPullConsumer(ctx) {
  const nc = await ctx.connect();
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  ctx.step = "add stream";
  await jsm.streams.add({ name: "MXPULL", subjects: ["mxpull.>"], storage: StorageType.File });
  for (let i = 1; i <= 5; i++) await js.publish(`mxpull.${i}`, `p${i}`);
  ctx.step = "add consumer";
  await jsm.consumers.add("MXPULL", {
    durable_name: "pull1",
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(1000),
  });
  const c = await js.consumers.get("MXPULL", "pull1");
  ctx.step = "fetch";
  const first = [];
  const iter = await c.fetch({ max_messages: 5, expires: 3000 });
  for await (const m of iter) {
    first.push(m);
    if (first.length === 5) break;
  }
  // ack 1..3 (confirmed by the server), nak 4, leave 5 to its ack wait.
  ctx.step = "ack";
  for (const m of first.slice(0, 3)) await m.ackAck();
  first[3].nak();
  await nc.flush();
  ctx.step = "consume redeliveries";
  const again = [];
  const msgs = await c.consume({ max_messages: 10, expires: 5000 });
  for await (const m of msgs) {
    again.push(m);
    await m.ackAck();
    if (again.length === 2) break;
  }
  await msgs.close();
  ctx.step = "info";
  const ci = await c.info();
  const obs = {
    first: first.map(jsMsgObs),
    redelivered: again.map((m) => ({ seq: m.seq, delivered: m.info.deliveryCount })),
    state: consumerState(ci),
  };
  expect(
    first.length === 5 && again.length === 2 && again[0].seq === 4 && again[1].seq === 5 &&
      again.every((m) => m.info.deliveryCount === 2) && ci.num_ack_pending === 0 &&
      ci.num_pending === 0,
    obs,
  );
  return obs;
}

async function jsPushConsumer(ctx) {
  const nc = await ctx.connect();
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  ctx.step = "add stream";
  await jsm.streams.add({ name: "MXPUSH", subjects: ["mxpush.>"], storage: StorageType.File });
  for (let i = 1; i <= 3; i++) await js.publish(`mxpush.${i}`, `q${i}`);
  ctx.step = "add consumer";
  await jsm.consumers.add("MXPUSH", {
    durable_name: "push1",
    deliver_subject: "deliver.mxpush",
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(10_000),
    flow_control: true,
    idle_heartbeat: nanos(1000),
  });
  const pc = await js.consumers.getPushConsumer("MXPUSH", "push1");
  ctx.step = "consume";
  const msgs = await pc.consume();
  const seen = [];
  const held = [];
  let ci = null;
  for await (const m of msgs) {
    seen.push({ seq: m.seq, subject: m.subject, data: dec.decode(m.data), delivered: m.info.deliveryCount });
    if (seen.length <= 3) {
      held.push(m);
      if (held.length === 3) {
        // all three first deliveries are in: ack 1 and 3, nak 2
        await held[0].ackAck();
        held[1].nak();
        await held[2].ackAck();
      }
    } else {
      await m.ackAck();
      // while the client still listens on the deliver subject (leaving the
      // loop stops the iterator, which unsubscribes)
      ctx.step = "info";
      ci = await jsm.consumers.info("MXPUSH", "push1");
      break;
    }
  }
  await msgs.close();
  const rebind = await pushRebind(ctx, jsm, js);
  const obs = { deliveries: seen, state: consumerState(ci), push_bound: ci.push_bound ?? false, rebind };
  expect(
    seen.length === 4 && seen[3].seq === 2 && seen[3].delivered === 2 && ci.num_ack_pending === 0 &&
      rebind.second?.data === "r2",
    obs,
  );
  return obs;
}

// An application that stops consuming a durable push consumer and later starts
// again (a second durable, without heartbeats): once the first subscription is
// gone the consumer is no longer bound, and a new consume() gets what was
// published meanwhile.
async function pushRebind(ctx, jsm, js) {
  ctx.step = "rebind: add consumer";
  await jsm.consumers.add("MXPUSH", {
    durable_name: "push2",
    deliver_subject: "deliver.mxpush2",
    deliver_policy: DeliverPolicy.New,
    filter_subject: "mxpush.r.>",
    ack_policy: AckPolicy.Explicit,
  });
  const take = async (what) => {
    const pc = await js.consumers.getPushConsumer("MXPUSH", "push2");
    const it = await pc.consume();
    await delay(100); // let the server see the new subscription
    if (what) await js.publish("mxpush.r.1", what);
    let got = null;
    for await (const m of it) {
      await m.ackAck();
      got = { seq: m.seq, data: dec.decode(m.data), delivered: m.info.deliveryCount };
      break; // stops the iterator: unsubscribes
    }
    await it.close();
    return got;
  };
  ctx.step = "rebind: first consume";
  const out = { first: await take("r1") };
  ctx.step = "rebind: bound after close";
  let bound = true;
  for (let i = 0; i < 30 && bound; i++) {
    bound = (await jsm.consumers.info("MXPUSH", "push2")).push_bound ?? false;
    if (bound) await delay(100);
  }
  out.bound_after_close = bound;
  await js.publish("mxpush.r.2", "r2");
  ctx.step = "rebind: second consume";
  try {
    out.second = await take(null);
  } catch (e) {
    out.second = { error: errKind(e) };
  }
  return out;
}

function kvEntryObs(e) {
  if (!e) return null;
  return {
    key: e.key,
    value: dec.decode(e.value),
    revision: e.revision,
    operation: e.operation,
  };
}

async function kvFeature(ctx) {
  const nc = await ctx.connect();
  const kvm = new Kvm(nc);
  ctx.step = "create bucket";
  const kv = await kvm.create("mxkv", { history: 5 });
  const watched = [];
  const watcher = await kv.watch();
  (async () => {
    for await (const e of watcher) watched.push(kvEntryObs(e));
  })().catch(() => {});
  const steps = {};
  ctx.step = "put";
  steps.put_k1 = await kv.put("k1", "v1");
  steps.get_k1 = kvEntryObs(await kv.get("k1"));
  steps.update_k1 = await kv.update("k1", "v2", steps.put_k1);
  try {
    await kv.update("k1", "v3", steps.put_k1);
    steps.stale_update = "accepted";
  } catch (e) {
    steps.stale_update = errKind(e);
  }
  steps.put_k2 = await kv.put("k2", "x");
  try {
    await kv.create("k2", "again");
    steps.create_existing = "accepted";
  } catch (e) {
    steps.create_existing = errKind(e);
  }
  ctx.step = "delete";
  await kv.delete("k1");
  steps.get_deleted = kvEntryObs(await kv.get("k1"));
  ctx.step = "purge";
  await kv.purge("k2");
  steps.get_purged = kvEntryObs(await kv.get("k2"));
  steps.put_k3 = await kv.put("k3", "z");
  steps.create_k1 = await kv.create("k1", "reborn");
  ctx.step = "keys";
  const keys = [];
  for await (const k of await kv.keys()) keys.push(k);
  keys.sort();
  ctx.step = "history";
  const hist = [];
  for await (const e of await kv.history({ key: "k1" })) hist.push(kvEntryObs(e));
  ctx.step = "watch";
  const enough = await until(() => watched.length >= 7, 3000);
  watcher.stop();
  // A watcher started now gets the last entry of every key (deletes included),
  // in revision order, then nothing until the next change.
  ctx.step = "late watch";
  const late = [];
  const lateWatcher = await kv.watch();
  (async () => {
    for await (const e of lateWatcher) late.push({ ...kvEntryObs(e), is_update: e.isUpdate });
  })().catch(() => {});
  await until(() => late.length >= 3, 3000);
  await kv.put("k3", "zz");
  const lateEnough = await until(() => late.length >= 4, 3000);
  lateWatcher.stop();
  const st = await kv.status();
  const obs = {
    steps,
    keys,
    history_k1: hist,
    watched,
    late_watch: late,
    status: { bucket: st.bucket, values: st.values, history: st.history },
  };
  expect(
    enough && lateEnough && steps.put_k1 === 1 && steps.update_k1 === 2 && keys.join() === "k1,k3" &&
      typeof steps.stale_update === "object" && typeof steps.create_existing === "object",
    obs,
  );
  return obs;
}

async function objectStore(ctx) {
  const nc = await ctx.connect();
  const objm = new Objm(nc);
  ctx.step = "create bucket";
  const os = await objm.create("mxobj");
  const data = bytes(1536 * 1024 + 7, 7);
  ctx.step = "put";
  const put = await os.putBlob({ name: "big.bin", description: "matrix" }, data);
  ctx.step = "get";
  const back = await os.getBlob("big.bin");
  const info = await os.info("big.bin");
  const st = await os.status();
  const status = { bucket: st.bucket, size: st.size, sealed: st.sealed, storage: st.storage };
  const list = (await os.list()).map((i) => i.name).sort();
  ctx.step = "delete";
  await os.delete("big.bin");
  const after = await os.info("big.bin");
  const listAfter = (await os.list()).map((i) => i.name);
  const infoObs = (i) =>
    i && { name: i.name, size: i.size, chunks: i.chunks, digest: i.digest, deleted: i.deleted ?? false };
  const obs = {
    put: infoObs(put),
    got_size: back?.length ?? null,
    equal: back !== null && sha256(back) === sha256(data),
    info: infoObs(info),
    status,
    list,
    after_delete: after ? { deleted: after.deleted ?? false, size: after.size } : null,
    list_after_delete: listAfter,
  };
  expect(obs.equal && put.chunks > 1 && list.join() === "big.bin", obs);
  return obs;
}

async function websocketFeature(ctx) {
  if (typeof globalThis.WebSocket !== "function") {
    return { __skip: true, reason: { reason: "no global WebSocket in this Node.js" } };
  }
  ctx.step = "ws connect";
  const ws = ctx.track(await wsconnect({ servers: env.MATRIX_WS_URL, user: USER, pass: PASS, timeout: 5000 }));
  const tcp = await ctx.connect();
  const wsGot = [];
  const tcpGot = [];
  ws.subscribe("ws.in", { callback: (e, m) => !e && wsGot.push(dec.decode(m.data)) });
  tcp.subscribe("ws.out", { callback: (e, m) => !e && tcpGot.push(dec.decode(m.data)) });
  await ws.flush();
  await tcp.flush();
  ctx.step = "round trip";
  const echo = dec.decode(await roundTrip(ws, "ws.self", "hello ws"));
  tcp.publish("ws.in", "tcp to ws");
  ws.publish("ws.out", "ws to tcp");
  await tcp.flush();
  await ws.flush();
  await until(() => wsGot.length >= 1 && tcpGot.length >= 1, 3000);
  // 300 KB each way (several WebSocket frames on the wire)
  ctx.step = "large payloads";
  const big = bytes(300 * 1000, 3);
  const toTcp = tcp.subscribe("ws.big.tcp", { max: 1 });
  const toWs = ws.subscribe("ws.big.ws", { max: 1 });
  await tcp.flush();
  await ws.flush();
  ws.publish("ws.big.tcp", big);
  tcp.publish("ws.big.ws", big);
  const large = {};
  for await (const m of toTcp) large.tcp_got = { size: m.data.length, equal: sha256(m.data) === sha256(big) };
  for await (const m of toWs) large.ws_got = { size: m.data.length, equal: sha256(m.data) === sha256(big) };
  ctx.step = "wrong password";
  let badWs;
  try {
    const c = await wsconnect({ servers: env.MATRIX_WS_URL, user: USER, pass: PASS + "-wrong", reconnect: false, timeout: 5000 });
    await c.close();
    badWs = { refused: false };
  } catch (e) {
    badWs = { refused: true, error: errKind(e) };
  }
  const obs = { echo, ws_got: wsGot, tcp_got: tcpGot, large, wrong_password: badWs };
  expect(
    echo === "hello ws" && wsGot[0] === "tcp to ws" && tcpGot[0] === "ws to tcp" &&
      large.tcp_got?.equal && large.ws_got?.equal && badWs.refused,
    obs,
  );
  return obs;
}

// --------------------------------------------------------------------- main

const FEATURES = [
  ["connect_user", 8000, connectUser],
  ["connect_token", 8000, connectToken],
  ["connect_nkey", 8000, connectNkey],
  ["connect_creds", 8000, connectCreds],
  ["tls", 10000, tlsFeature],
  ["pubsub_wildcard", 8000, pubsubWildcard],
  ["queue_group", 8000, queueGroup],
  ["request_reply_headers", 8000, requestReplyHeaders],
  ["no_responders", 8000, noResponders],
  ["drain", 8000, drain],
  ["js_publish_dedupe", 8000, jsPublishDedupe],
  ["js_pull_consumer", 12000, jsPullConsumer],
  ["js_push_consumer", 10000, jsPushConsumer],
  ["kv", 10000, kvFeature],
  ["object_store", 15000, objectStore],
  ["websocket", 8000, websocketFeature],
  ["reconnect_restart", 30000, (ctx) => reconnect(ctx, "restart", "rc.restart")],
  ["reconnect_lameduck", 55000, (ctx) => reconnect(ctx, "lameduck", "rc.lameduck")],
];

const only = env.MATRIX_ONLY ? new Set(env.MATRIX_ONLY.split(",")) : null;

// The whole program stays under the contract's 120 s.
const globalTimer = setTimeout(async () => {
  for (const [name] of FEATURES) {
    if (!only || only.has(name)) await result(name, "fail", { error: "program timeout" });
  }
  process.exit(1);
}, 115_000);

process.on("unhandledRejection", (e) => log("unhandled rejection", e?.stack ?? e));

for (const [name, ms, fn] of FEATURES) {
  if (only && !only.has(name)) continue;
  log("feature", name);
  await feature(name, ms, fn);
}
clearTimeout(globalTimer);
rl.close();
process.exit(0);
