# Prints the pull/push status messages nats-server 2.14.0 sends (the bytes the consumer
# tests assert). Run: python3 reference_statuses.py (needs the reference binary).
import socket, json, time, subprocess, tempfile, sys, os, re

PORT = 14999
sd = tempfile.mkdtemp()
srv = subprocess.Popen(["/root/.cache/nats-reference/2.14.0/nats-server", "-js", "-sd", sd, "-p", str(PORT)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.7)

class C:
    def __init__(s):
        s.s = socket.create_connection(("127.0.0.1", PORT)); s.buf = b""; s.sid = 0
        s.read_line()  # INFO
        s.s.sendall(b'CONNECT {"verbose":false,"headers":true,"no_responders":true,"protocol":1}\r\nPING\r\n')
        while s.read_line() != b"PONG": pass
    def read_line(s):
        while b"\r\n" not in s.buf:
            s.buf += s.s.recv(65536)
        l, s.buf = s.buf.split(b"\r\n", 1); return l
    def read_n(s, n):
        while len(s.buf) < n + 2: s.buf += s.s.recv(65536)
        d = s.buf[:n]; s.buf = s.buf[n+2:]; return d
    def sub(s, subj):
        s.sid += 1; s.s.sendall(f"SUB {subj} {s.sid}\r\n".encode()); return s.sid
    def pub(s, subj, data=b"", reply=""):
        s.s.sendall(f"PUB {subj} {reply} {len(data)}\r\n".encode() + data + b"\r\n")
    def flush(s):
        s.s.sendall(b"PING\r\n")
    def msgs(s, timeout):
        out = []; s.s.settimeout(timeout); end = time.time() + timeout
        try:
            while time.time() < end:
                l = s.read_line()
                if l.startswith(b"MSG"):
                    p = l.split(); n = int(p[-1]); d = s.read_n(n)
                    out.append((p[1].decode(), p[3].decode() if len(p) == 5 else "", b"", d))
                elif l.startswith(b"HMSG"):
                    p = l.split(); hl, tl = int(p[-2]), int(p[-1]); d = s.read_n(tl)
                    out.append((p[1].decode(), p[3].decode() if len(p) == 6 else "", d[:hl], d[hl:]))
                elif l == b"PING": s.s.sendall(b"PONG\r\n")
        except socket.timeout:
            pass
        s.s.settimeout(None); return out
    def req(s, subj, body):
        sid = s.sub("_R.x"); s.pub(subj, json.dumps(body).encode(), "_R.x")
        m = s.msgs(0.5); s.s.sendall(f"UNSUB {sid}\r\n".encode()); return json.loads(m[0][3]) if m else None

c = C()
print(c.req("$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s.>"]}).get("error"))
def consumer(name, **cfg):
    cfg.update({"durable_name": name, "ack_policy": cfg.get("ack_policy", "explicit")})
    r = c.req(f"$JS.API.CONSUMER.CREATE.S.{name}", {"stream_name": "S", "config": cfg})
    assert "error" not in r, r
def pull(name, reply, body, wait):
    c.sub(reply); c.pub(f"$JS.API.CONSUMER.MSG.NEXT.S.{name}", body.encode(), reply)
    return c.msgs(wait)
def show(tag, ms):
    print("==", tag)
    for (subj, reply, h, d) in ms:
        print("  ", subj, reply[:40], repr(h), repr(d[:20]))

consumer("P0")
show("no_wait empty", pull("P0", "r1", '{"batch":2,"no_wait":true}', 0.3))
for i in range(2): c.pub("s.a", b"0123456789")
time.sleep(0.1)
consumer("P1")
show("batch 5 expires 1s, 2 msgs", pull("P1", "r2", '{"batch":5,"expires":1000000000}', 1.4))
consumer("P2")
show("no_wait batch 3, 2 msgs", pull("P2", "r3", '{"batch":3,"no_wait":true}', 0.3))
consumer("P3")
show("max_bytes 1000 batch 1", pull("P3", "r4", '{"batch":1,"max_bytes":1000}', 0.3))
show("max_bytes 10 batch 5", pull("P3", "r5", '{"batch":5,"max_bytes":10}', 0.3))
consumer("P4")
show("hb", pull("P4", "r6", '{"batch":5,"expires":2500000000,"idle_heartbeat":1000000000}', 2.8))
consumer("P5", max_waiting=1, max_batch=10, max_expires=2000000000, max_bytes=100)
show("limits batch", pull("P5", "r7", '{"batch":11}', 0.2))
show("limits expires", pull("P5", "r8", '{"batch":1,"expires":3000000000}', 0.2))
show("limits bytes", pull("P5", "r9", '{"batch":1,"max_bytes":101}', 0.2))
show("waiting 1 (takes 2)", pull("P5", "r10", '{"batch":4}', 0.2))
show("waiting 2", pull("P5", "r11", '{"batch":1}', 0.2))
show("bad hb", pull("P5", "r12", '{"batch":1,"expires":1000,"idle_heartbeat":800}', 0.2))
show("prio", pull("P5", "r13", '{"batch":1,"priority":10}', 0.2))
consumer("P6")
show("pull on p6 waiting", pull("P6", "r14", '{"batch":3,"expires":5000000000}', 0.2))
c.pub("$JS.API.CONSUMER.DELETE.S.P6", b"", "")
show("deleted", c.msgs(0.3))
consumer("P7")
pull("P7", "r15", '{"batch":10}', 0.2)
show("requests pending", pull("P7", "r16", '{"no_wait":true}', 0.2))
consumer("PUSH", deliver_subject="dlv", idle_heartbeat=1000000000, flow_control=True)
c.sub("dlv")
show("push hb/fc", c.msgs(1.3))
srv.terminate()
