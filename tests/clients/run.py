#!/usr/bin/env python3
"""Client matrix runner: runs each client's program against the reference nats-server and
against rnats (per reactor) and compares what the programs observed. See README.md beside
this file for the contract.

    tests/clients/run.py [--reactor uring|mio|both] [--clients a,b] [--rnats PATH]
                         [--reference PATH] [--markdown FILE] [--keep] [--timeout S]

Standard library only (Python 3.11); needs the `openssl` CLI for the TLS server's
certificates.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FIXTURES = HERE / "fixtures"

# The contract's features, in the order the table shows them.
FEATURES = [
    "connect_user",
    "connect_token",
    "connect_nkey",
    "connect_creds",
    "tls",
    "pubsub_wildcard",
    "queue_group",
    "request_reply_headers",
    "no_responders",
    "drain",
    "reconnect_restart",
    "reconnect_lameduck",
    "js_publish_dedupe",
    "js_pull_consumer",
    "js_push_consumer",
    "kv",
    "object_store",
    "websocket",
]

USER, PASSWORD = "alice", "alicepw"
TOKEN = "matrixtoken"
PROGRAM_TIMEOUT = 180.0  # seconds, per run of a program (from its first stdout line)
BUILD_TIMEOUT = 900.0  # seconds before a program's first stdout line (run.sh may build it)
START_TIMEOUT = 20.0  # seconds for a server to accept TCP
STOP_TIMEOUT = 15.0  # seconds for a SIGTERM'd server to exit before SIGKILL
LAMEDUCK_TIMEOUT = 30.0  # seconds for a lame-duck server to exit by itself

# Every process this runner started and has not reaped yet (killed on exit / Ctrl-C).
LIVE: set[subprocess.Popen] = set()


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Setup: binaries, certificates, ports, configs


def resolve_rnats(arg: str | None) -> Path:
    if arg:
        return Path(arg).resolve()
    target = os.environ.get("CARGO_TARGET_DIR")
    path = (Path(target) if target else REPO / "target") / "debug" / "rnats"
    if not path.exists():
        log(f"run.py: {path} missing; building it (cargo build --bin rnats)")
        subprocess.run(["nice", "cargo", "build", "--bin", "rnats"], cwd=REPO, check=True)
    return path.resolve()


def resolve_reference(arg: str | None) -> Path:
    if arg:
        return Path(arg).resolve()
    env = os.environ.get("NATS_REFERENCE_SERVER")
    if env:
        return Path(env).resolve()
    out = subprocess.run(
        [str(REPO / "tools" / "reference-server")], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return Path(out.strip().splitlines()[-1]).resolve()


def make_certs(d: Path) -> dict[str, Path]:
    """A CA and a server certificate (SANs IP:127.0.0.1, DNS:localhost) signed by it."""
    d.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt = d / "ca-key.pem", d / "ca.pem"
    key, csr, crt = d / "server-key.pem", d / "server.csr", d / "server-cert.pem"
    ext = d / "server.ext"
    ext.write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
    )

    def ossl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca_crt),
         "-days", "3", "-subj", "/CN=rnats matrix CA",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    ossl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
         "-subj", "/CN=localhost")
    ossl("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key), "-CAcreateserial",
         "-out", str(crt), "-days", "3", "-extfile", str(ext))
    return {"ca": ca_crt, "cert": crt, "key": key}


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def q(path: Path | str) -> str:
    return json.dumps(str(path))


@dataclass
class ServerSet:
    """The four servers of one program run: their ports, config files and processes."""

    dir: Path
    binary: Path
    extra_args: list[str]
    ports: dict[str, int] = field(default_factory=dict)
    confs: dict[str, Path] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    starts: dict[str, int] = field(default_factory=dict)


def write_configs(d: Path, certs: dict[str, Path]) -> tuple[dict[str, int], dict[str, Path]]:
    d.mkdir(parents=True, exist_ok=True)
    main, ws, tok, tls, creds = free_ports(5)
    ports = {"main": main, "ws": ws, "token": tok, "tls": tls, "creds": creds}
    nkey_pub = (FIXTURES / "nkey.pub").read_text().strip()
    ids = json.loads((FIXTURES / "ids.json").read_text())
    store = d / "jetstream"
    texts = {
        "main": (
            f"listen: \"127.0.0.1:{main}\"\n"
            f"jetstream {{\n  store_dir: {q(store)}\n}}\n"
            "authorization {\n"
            "  users: [\n"
            f"    {{user: {USER}, password: {PASSWORD}}}\n"
            f"    {{nkey: {nkey_pub}}}\n"
            "  ]\n"
            "}\n"
            f"websocket {{\n  listen: \"127.0.0.1:{ws}\"\n  no_tls: true\n}}\n"
            "lame_duck_duration: 30s\n"
            "lame_duck_grace_period: 1s\n"
        ),
        "token": (
            f"listen: \"127.0.0.1:{tok}\"\n"
            f"authorization {{\n  token: {TOKEN}\n}}\n"
        ),
        "tls": (
            f"listen: \"127.0.0.1:{tls}\"\n"
            f"tls {{\n  cert_file: {q(certs['cert'])}\n  key_file: {q(certs['key'])}\n}}\n"
        ),
        "creds": (
            f"listen: \"127.0.0.1:{creds}\"\n"
            f"operator: {q(FIXTURES / 'operator.jwt')}\n"
            f"system_account: {ids['system_account']}\n"
            "resolver: MEMORY\n"
            "resolver_preload: {\n"
            f"  {ids['system_account']}: {q((FIXTURES / 'sys.jwt').read_text().strip())}\n"
            f"  {ids['account']}: {q((FIXTURES / 'account.jwt').read_text().strip())}\n"
            "}\n"
        ),
    }
    confs = {}
    for name, text in texts.items():
        path = d / f"{name}.conf"
        path.write_text(text)
        confs[name] = path
    return ports, confs


# ---------------------------------------------------------------------------------------
# Processes


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def listen_ports(name: str, ports: dict[str, int]) -> list[int]:
    return [ports["main"], ports["ws"]] if name == "main" else [ports[name]]


def start_server(ss: ServerSet, name: str) -> None:
    ss.starts[name] = ss.starts.get(name, 0) + 1
    logf = ss.logs.setdefault(name, ss.dir / f"{name}.log")
    with open(logf, "ab") as out:
        out.write(f"=== start {ss.starts[name]}: {ss.binary} -c {ss.confs[name]} {' '.join(ss.extra_args)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            [str(ss.binary), "-c", str(ss.confs[name]), *ss.extra_args],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    LIVE.add(proc)
    ss.procs[name] = proc
    deadline = time.monotonic() + START_TIMEOUT
    pending = listen_ports(name, ss.ports)
    while pending:
        if proc.poll() is not None:
            raise RuntimeError(f"server {name} exited with {proc.returncode} while starting")
        if time.monotonic() > deadline:
            raise RuntimeError(f"server {name} did not accept TCP on {pending} within {START_TIMEOUT:.0f}s")
        pending = [p for p in pending if not accepts(p)]
        if pending:
            time.sleep(0.05)


def reap(proc: subprocess.Popen, timeout: float) -> bool:
    try:
        proc.wait(timeout=timeout)
        LIVE.discard(proc)
        return True
    except subprocess.TimeoutExpired:
        return False


def kill(proc: subprocess.Popen, group: bool = False) -> None:
    if proc.poll() is None:
        try:
            if group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    LIVE.discard(proc)


def stop_server(ss: ServerSet, name: str, sig: int, timeout: float) -> str:
    """Signals the server and waits for it to exit; SIGKILL after `timeout`. Returns a note."""
    proc = ss.procs[name]
    if proc.poll() is not None:
        return f"{name} had already exited ({proc.returncode})"
    proc.send_signal(sig)
    t0 = time.monotonic()
    if reap(proc, timeout):
        return f"{name} exited ({proc.returncode}) {time.monotonic() - t0:.1f}s after {signal.Signals(sig).name}"
    kill(proc)
    return f"{name} did not exit within {timeout:.0f}s of {signal.Signals(sig).name}; killed"


def tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "  (no file)"
    return "\n".join("  | " + l for l in text[-lines:]) or "  (empty)"


# ---------------------------------------------------------------------------------------
# One program run


@dataclass
class RunOutcome:
    label: str  # "reference", "rnats/uring", ...
    results: dict[str, tuple[str, str]] = field(default_factory=dict)  # feature -> (status, obs)
    error: str | None = None  # the program could not run at all (or the servers not start)
    problems: list[str] = field(default_factory=list)  # exit code, timeout, duplicates
    seconds: float = 0.0
    dir: Path | None = None
    stderr: Path | None = None
    logs: dict[str, Path] = field(default_factory=dict)


def run_program(client: str, label: str, binary: Path, extra: list[str], work: Path,
                certs: dict[str, Path]) -> RunOutcome:
    d = work / client / label.replace("/", "-")
    out = RunOutcome(label=label, dir=d)
    ports, confs = write_configs(d, certs)
    ss = ServerSet(dir=d, binary=binary, extra_args=extra, ports=ports, confs=confs)
    out.logs = ss.logs
    t0 = time.monotonic()
    prog = None
    try:
        try:
            for name in ("main", "token", "tls", "creds"):
                start_server(ss, name)
        except RuntimeError as e:
            out.error = str(e)
            return out
        env = dict(os.environ)
        env.update({
            "MATRIX_URL": f"nats://127.0.0.1:{ports['main']}",
            "MATRIX_USER": USER,
            "MATRIX_PASSWORD": PASSWORD,
            "MATRIX_NKEY_SEED_FILE": str(FIXTURES / "nkey.seed"),
            "MATRIX_WS_URL": f"ws://127.0.0.1:{ports['ws']}",
            "MATRIX_TOKEN_URL": f"nats://127.0.0.1:{ports['token']}",
            "MATRIX_TOKEN": TOKEN,
            "MATRIX_TLS_URL": f"tls://127.0.0.1:{ports['tls']}",
            "MATRIX_TLS_CA": str(certs["ca"]),
            "MATRIX_CREDS_URL": f"nats://127.0.0.1:{ports['creds']}",
            "MATRIX_CREDS_FILE": str(FIXTURES / "user.creds"),
            "MATRIX_CLIENT": client,
        })
        out.stderr = d / "program.stderr"
        stdout_copy = open(d / "program.stdout", "w")
        with open(out.stderr, "wb") as errf:
            prog = subprocess.Popen(
                ["bash", str(HERE / client / "run.sh")], cwd=HERE / client, env=env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf, start_new_session=True,
            )
        LIVE.add(prog)
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert prog is not None and prog.stdout is not None
            for raw in prog.stdout:
                lines.put(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        # run.sh may first build the program (it prints nothing on stdout meanwhile): the
        # program's own time starts with its first stdout line.
        deadline = t0 + BUILD_TIMEOUT + PROGRAM_TIMEOUT
        started = False
        timed_out = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                timed_out = True
                break
            if line is None:
                break
            if not started:
                started = True
                deadline = time.monotonic() + PROGRAM_TIMEOUT
            stdout_copy.write(line + "\n")
            stdout_copy.flush()
            if line.startswith("RESULT "):
                parts = line.split(" ", 3)
                if len(parts) < 3:
                    out.problems.append(f"malformed line: {line!r}")
                    continue
                feature, status = parts[1], parts[2]
                obs = parts[3] if len(parts) > 3 else ""
                if feature in out.results:
                    out.problems.append(f"feature {feature} reported twice (the first line counts)")
                    continue
                out.results[feature] = (status, obs)
            elif line.startswith("CONTROL "):
                action = line[len("CONTROL "):].strip()
                if action == "restart":
                    note = stop_server(ss, "main", signal.SIGTERM, STOP_TIMEOUT)
                elif action == "lameduck":
                    note = stop_server(ss, "main", signal.SIGUSR2, LAMEDUCK_TIMEOUT)
                else:
                    out.problems.append(f"unknown control {action!r}")
                    note = None
                if note is not None:
                    log(f"    [{client} {label}] CONTROL {action}: {note}")
                    try:
                        start_server(ss, "main")
                    except RuntimeError as e:
                        out.problems.append(f"CONTROL {action}: {e}")
                try:
                    assert prog.stdin is not None
                    prog.stdin.write(b"done\n")
                    prog.stdin.flush()
                except (BrokenPipeError, OSError):
                    pass
        stdout_copy.close()
        if timed_out:
            if started:
                out.problems.append(f"program timed out ({PROGRAM_TIMEOUT:.0f}s after its first line); killed")
            else:
                out.problems.append(f"program printed nothing in {BUILD_TIMEOUT + PROGRAM_TIMEOUT:.0f}s; killed")
            kill(prog, group=True)
        else:
            try:
                prog.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill(prog, group=True)
            if prog.returncode not in (0, None):
                out.problems.append(f"program exited with {prog.returncode}")
        LIVE.discard(prog)
        try:  # whatever the program left running in its process group
            os.killpg(prog.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if not out.results:
            out.error = "the program reported no RESULT line; " + "; ".join(out.problems or ["(exit 0)"])
        for name in ("main", "token", "tls", "creds"):
            p = ss.procs.get(name)
            if p is not None and p.poll() is not None and p.returncode not in (0,):
                out.problems.append(f"server {name} died during the run (exit {p.returncode})")
        return out
    finally:
        out.seconds = time.monotonic() - t0
        if prog is not None and prog.poll() is None:
            kill(prog, group=True)
        for p in ss.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in ss.procs.values():
            if not reap(p, 5):
                kill(p)


# ---------------------------------------------------------------------------------------
# Comparison and report


def cell(ref: tuple[str, str] | None, got: tuple[str, str] | None) -> str:
    r = ref or ("missing", "")
    g = got or ("missing", "")
    if r == g:
        return "ok" if r[0] == "ok" else f"same:{r[0]}"
    return "FAIL"


def fmt(res: tuple[str, str] | None) -> str:
    return "missing" if res is None else f"{res[0]} {res[1]}".rstrip()


def print_table(rows: list[str], cols: list[str], cells: dict[tuple[str, str], str]) -> str:
    w0 = max(len("feature"), *(len(r) for r in rows))
    widths = [max(len(c), 4, *(len(cells.get((r, c), "")) for r in rows)) for c in cols]
    lines = ["  ".join(["feature".ljust(w0)] + [c.ljust(w) for c, w in zip(cols, widths)])]
    lines.append("  ".join(["-" * w0] + ["-" * w for w in widths]))
    for r in rows:
        lines.append("  ".join([r.ljust(w0)] + [cells.get((r, c), "").ljust(w) for c, w in zip(cols, widths)]))
    return "\n".join(l.rstrip() for l in lines)


def markdown_table(rows: list[str], cols: list[str], cells: dict[tuple[str, str], str]) -> str:
    out = ["| feature | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for r in rows:
        out.append(f"| `{r}` | " + " | ".join(cells.get((r, c), "") for c in cols) + " |")
    return "\n".join(out) + "\n"


def show_failure_context(o: RunOutcome) -> None:
    if o.stderr is not None:
        log(f"    program stderr ({o.stderr}):\n{tail(o.stderr)}")
    for name, path in o.logs.items():
        log(f"    server {name} log ({path}):\n{tail(path, 12)}")


def main() -> int:
    global PROGRAM_TIMEOUT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reactor", choices=["uring", "mio", "both"], default="uring")
    ap.add_argument("--clients", help="comma-separated (default: every folder with a run.sh)")
    ap.add_argument("--rnats", help="rnats binary (default: $CARGO_TARGET_DIR or target/, debug)")
    ap.add_argument("--reference", help="reference nats-server (default: $NATS_REFERENCE_SERVER or tools/reference-server)")
    ap.add_argument("--markdown", help="also write the table as markdown to this file")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (also kept when anything fails)")
    ap.add_argument("--timeout", type=float, default=PROGRAM_TIMEOUT,
                    help=f"seconds a program may run after its first stdout line before it is killed "
                         f"(default {PROGRAM_TIMEOUT:.0f}; before that line, while run.sh may be building it, "
                         f"{BUILD_TIMEOUT:.0f} more are allowed)")
    args = ap.parse_args()
    PROGRAM_TIMEOUT = args.timeout

    if args.clients:
        clients = [c.strip() for c in args.clients.split(",") if c.strip()]
        for c in clients:
            if not (HERE / c / "run.sh").exists():
                ap.error(f"no {HERE / c / 'run.sh'}")
    else:
        clients = sorted(p.parent.name for p in HERE.glob("*/run.sh"))
    if not clients:
        ap.error("no client folder with a run.sh")
    reactors = ["uring", "mio"] if args.reactor == "both" else [args.reactor]
    rnats = resolve_rnats(args.rnats)
    reference = resolve_reference(args.reference)
    for b in (rnats, reference):
        if not os.access(b, os.X_OK):
            ap.error(f"{b} is not an executable")

    work = Path(tempfile.mkdtemp(prefix="rnats-matrix-"))
    log(f"run.py: work dir {work}; rnats {rnats}; reference {reference}; clients {','.join(clients)}; "
        f"reactors {','.join(reactors)}")
    keep = args.keep
    servers = [("reference", reference, [])] + [(f"rnats/{r}", rnats, ["--reactor", r]) for r in reactors]
    cols: list[str] = []
    cells: dict[tuple[str, str], str] = {}
    rows = list(FEATURES)
    passed = failed = same = 0
    broken: list[str] = []
    problems: list[str] = []
    try:
        certs = make_certs(work / "certs")
        for client in clients:
            outcomes: dict[str, RunOutcome] = {}
            for label, binary, extra in servers:
                log(f"== {client} on {label}")
                o = run_program(client, label, binary, extra, work, certs)
                outcomes[label] = o
                log(f"   {len(o.results)} results in {o.seconds:.1f}s")
                for p in o.problems:
                    log(f"   problem: {p}")
                    problems.append(f"{client} on {label}: {p}")
                if o.error:
                    log(f"   ERROR: {o.error}")
                if o.error or o.problems:
                    show_failure_context(o)
            ref = outcomes["reference"]
            for feature in ref.results:
                if feature not in rows:
                    rows.append(feature)
            for label, _, _ in servers[1:]:
                col = client if len(reactors) == 1 else f"{client}/{label.split('/')[1]}"
                cols.append(col)
                o = outcomes[label]
                if ref.error or o.error:
                    broken.append(f"{client} on {'reference' if ref.error else label}: {ref.error or o.error}")
                    for f in rows:
                        cells[(f, col)] = "ERROR"
                    continue
                for f in o.results:
                    if f not in rows:
                        rows.append(f)
                showed = False
                for f in rows:
                    c = cell(ref.results.get(f), o.results.get(f))
                    cells[(f, col)] = c
                    if c == "ok":
                        passed += 1
                    elif c.startswith("same:"):
                        same += 1
                        log(f"   same on both  {client} {f}: {fmt(ref.results.get(f))}")
                    else:
                        failed += 1
                        log(f"   FAIL {client} {f} ({label})\n"
                            f"      reference: {fmt(ref.results.get(f))}\n"
                            f"      {label:>9}: {fmt(o.results.get(f))}")
                        if not showed:
                            show_failure_context(o)
                            showed = True
    except KeyboardInterrupt:
        log("run.py: interrupted")
        keep = True
        broken.append("interrupted")
    finally:
        for p in list(LIVE):
            kill(p, group=True)

    print()
    print(print_table(rows, cols, cells))
    print()
    if same:
        print(f"{same} same on both (not ok on either server)")
    for p in problems:
        print(f"problem: {p}")
    for b in broken:
        print(f"could not run: {b}")
    print(f"{passed} passed, {failed} failed")
    if args.markdown:
        Path(args.markdown).write_text(markdown_table(rows, cols, cells))
    if failed or broken or problems:
        keep = True
    if keep:
        log(f"run.py: kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    # A timeout, a program that crashed or a server that died fails the run too.
    return 1 if failed or broken or problems else 0


if __name__ == "__main__":
    def on_term(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored
    sys.exit(main())
