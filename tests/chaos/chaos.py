#!/usr/bin/env python3
"""tests/chaos/chaos.py - the reliability probes of issue 9, on demand.

Run by scripts/chaos, which builds gpupoold and starts one PostgreSQL. This
driver starts two gpupoold replicas on fixed ports and, for DURATION s:

- load: CLIENTS threads, each owning one pool at a time: create it,
  expand it one MIG slice at a time, release it after three expands (an
  agent thread marks releasing allocations released, with SQL); every
  submission and approval carries an Idempotency-Key (the submission's
  justification is the key, so a key that ran twice shows in SQL); no
  answer moves the retry, same key, to the other replica; 5xx retries on
  the same one;
- kill -9 of a random replica every 5-15 s, restarted at once;
- PostgreSQL restarted (fast) every PG_RESTART s;
- SLOW slow clients per replica (1,100 by default) trickling one header
  line every 5-10 s, while /healthz of each replica is timed every second
  on its probe listener (GPUPOOL_PROBE_LISTEN, what a Kubernetes probe or
  a balancer would ask) and, for information, on its API port;
- duplicate Idempotency-Keys: every 0.5 s one expand submission sent four
  times at once with one key, two to each replica.

Then it prints the figures and the checks. Exit status 1 when a check
failed: a 2xx answer whose body is not the request (id 0, another id or
key), a key that ran twice (SQL) or was answered as a first run twice,
definite answers of one key that disagree, a request answered 201 that is
not in the database, an approval answered 2xx but not approved, a
submission or approval answered 4xx although it committed (a key's answer
not kept) or never answered at all (409 idempotency_conflict, 5xx or no
answer to every retry until 30 s past the end: submissions and approvals
store their answer with their change, so a retry must get it), a
probe-listener /healthz failure while its replica was up, deadlocks in
PostgreSQL's log, broken allocation invariants.
"""

import argparse
import os
import random
import resource
import shlex
import socket
import subprocess
import sys
import threading
import time
import uuid

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ha"))
import gpload  # noqa: E402

ITEM = ["H100-80GB/1g.10gb=1"]


def get(url, path, timeout):
    """(status, ms) of one GET on a new connection; status 0 when no answer."""
    c = gpload.Client(url, timeout=timeout)
    t = time.monotonic()
    st, doc, _ = c.request("GET", path)
    ms = (time.monotonic() - t) * 1000
    c.close()
    return st, gpload.error_code(doc), ms


class Replica:
    def __init__(self, name, binary, port, probe_port, logpath):
        self.name, self.binary, self.port, self.logpath = name, binary, port, logpath
        self.url = "http://127.0.0.1:%d" % port
        self.probe_url = "http://127.0.0.1:%d" % probe_port
        self.probe_port = probe_port
        self.proc = None
        self.up = False  # started and answering; False from a kill to the restart's answer
        self.kills = 0   # bumped at each kill: a probe that spans one is not held against it

    def start(self):
        env = dict(os.environ, GPUPOOL_LISTEN="127.0.0.1:%d" % self.port,
                   GPUPOOL_PROBE_LISTEN="127.0.0.1:%d" % self.probe_port)
        with open(self.logpath, "ab") as log:
            self.proc = subprocess.Popen([self.binary, "serve"], env=env,
                                         stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if (get(self.probe_url, "/healthz", 1)[0] == 200 and
                    get(self.url, "/healthz", 1)[0] == 200):
                self.up = True
                return
            time.sleep(0.05)
        raise RuntimeError("%s did not start (see %s)" % (self.name, self.logpath))

    def kill9(self):
        self.up = False
        self.kills += 1
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.answers = {}        # "kind status" -> count
        self.approve_ms = []     # latency of 2xx approvals
        self.acked = []          # request ids answered 2xx to an approval
        self.refused = []        # request ids whose approval got a definite non-2xx answer
        self.unsure = []         # request ids whose approval got no definite answer in time
        self.sub_created = []    # keys (= justifications) of submissions answered 201
        self.sub_refused = []    # keys of submissions answered a definite non-201
        self.sub_unsure = []     # keys of submissions with no definite answer in time
        self.dup_fresh_twice = 0  # duplicate keys answered as a first run (not replayed) twice
        self.bad_bodies = 0      # 2xx answers whose body is not the request they are about
        self.bad_examples = []
        self.dup_keys = 0
        self.dup_inconsistent = 0
        self.details = {}        # 4xx answers of the load by detail -> count
        self.dup_combos = {}     # the answers of a key whose answers disagree -> count
        self.health_ms = []      # probe listener /healthz answered 200
        self.health_fail = 0     # ... not answered 200 while its replica was up
        self.health_restart = 0  # ... not answered 200 across a kill -9 and restart
        self.api_health_ms = []  # API port /healthz answered 200 (informational)
        self.api_health_other = {}  # API port /healthz otherwise: "status code" -> count
        self.kills = 0
        self.pg_restarts = 0
        self.events = []         # (UTC time, what) of each kill -9 and PostgreSQL restart
        self.slow_held = 0       # the most slow connections one replica held
        self.slow_closed = 0     # slow connections found closed by the server (deadline, kill)

    def event(self, what):
        t = time.time()
        with self.lock:
            self.events.append("%s.%d %s" % (time.strftime("%H:%M:%S", time.gmtime(t)),
                                             int(t * 10) % 10, what))

    def count(self, kind, status, code=""):
        k = "%s %s%s" % (kind, status or "no answer", " " + code if code else "")
        with self.lock:
            self.answers[k] = self.answers.get(k, 0) + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpupoold", required=True)
    ap.add_argument("--ports", required=True, help="two ports, comma-separated")
    ap.add_argument("--probe-ports", required=True,
                    help="two ports for the replicas' probe listeners, comma-separated")
    ap.add_argument("--logdir", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--psql", required=True)
    ap.add_argument("--pg-restart-cmd", required=True)
    ap.add_argument("--pg-log", required=True)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument("--slow", type=int, default=1100, help="slow clients per replica")
    ap.add_argument("--pg-restart", type=float, default=0,
                    help="restart PostgreSQL every this many s (0: once, half-way)")
    a = ap.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    psql = shlex.split(a.psql)
    ports = [int(p) for p in a.ports.split(",")]
    probe_ports = [int(p) for p in a.probe_ports.split(",")]
    reps = [Replica("replica%d" % i, a.gpupoold, p, pp,
                    os.path.join(a.logdir, "gpupoold%d.log" % i))
            for i, (p, pp) in enumerate(zip(ports, probe_ports))]
    for r in reps:
        r.start()
    try:
        return run(a, psql, reps)
    finally:
        for r in reps:
            r.stop()


def run(a, psql, reps):
    token = gpload.login(reps[0].url, "admin", a.password)
    gpload.setup_fleet(reps[0].url, token, "chaos", a.nodes, 8, 4, "admin")
    gpload.psql(psql, "UPDATE gpus SET mig_enabled = true;")
    setup = gpload.Client(reps[0].url, token)
    doc = gpload.must(setup.request("POST", "/v1/projects/chaos-p0/pool-requests", {
        "action": "create", "pool": "chaos-dup", "items": ITEM, "justification": "setup"}), 201)
    gpload.must(setup.request("POST", "/v1/pool-requests/%s/approve" % doc["id"], {}), 200)
    setup.close()
    with open(a.pg_log, "rb") as f:
        f.seek(0, 2)
        log_offset = f.tell()

    s = Stats()
    t0 = time.monotonic()
    stop_at = t0 + a.duration
    stopping = threading.Event()

    def body_ok(kind, st, doc, key=None, rid=None):
        """A 2xx answer names the request: a submission's carries an id and
        its key as justification, an approval's the id approved."""
        if not 200 <= st < 300:
            return True
        ok = (isinstance(doc, dict) and isinstance(doc.get("id"), int) and doc["id"] > 0 and
              (key is None or doc.get("justification") == key) and
              (rid is None or doc["id"] == int(rid)))
        if not ok:
            with s.lock:
                s.bad_bodies += 1
                if len(s.bad_examples) < 3:
                    s.bad_examples.append("%s %d: %s" % (kind, st, str(doc)[:160]))
        return ok

    def definite(st, doc):
        """An answer that is the key's own: not "no answer", not 5xx, not
        "the first request with this key has not stored its answer yet"."""
        return 0 < st < 500 and gpload.error_code(doc) != "idempotency_conflict"

    def send(clients, which, kind, path, body, key):
        """Definite answer for one key; no answer moves to the other replica."""
        while True:
            t = time.monotonic()
            st, doc, _ = clients[which[0]].request("POST", path, body, key)
            s.count(kind, st, gpload.error_code(doc))
            if 400 <= st < 500 and isinstance(doc, dict):
                with s.lock:
                    errs = doc.get("errors") or [{}]
                    what = "%s %d: %s %s %s" % (kind, st, doc.get("detail", ""),
                                                errs[0].get("field", ""),
                                                errs[0].get("message", ""))
                    s.details[what] = s.details.get(what, 0) + 1
            if st == 0:
                which[0] ^= 1
                time.sleep(0.05)
            elif st >= 500 or gpload.error_code(doc) == "idempotency_conflict":
                time.sleep(0.1)
            else:
                return st, doc, (time.monotonic() - t) * 1000
            if time.monotonic() > stop_at + 30:
                return st, doc, 0

    def submit(clients, which, project, body):
        key = "ck-" + str(uuid.uuid4())
        body = dict(body, justification=key)
        st, doc, ms = send(clients, which, "submit", "/v1/projects/%s/pool-requests" % project,
                           body, key)
        body_ok("submit", st, doc, key=key)
        with s.lock:
            if st == 201:
                s.sub_created.append(key)
            elif definite(st, doc):
                s.sub_refused.append(key)
            else:
                s.sub_unsure.append(key)
        return st, doc, ms

    def approve(clients, which, rid):
        st, doc, ms = send(clients, which, "approve", "/v1/pool-requests/%s/approve" % rid,
                           {"note": "chaos"}, "ck-" + str(uuid.uuid4()))
        body_ok("approve", st, doc, rid=rid)
        with s.lock:
            if 200 <= st < 300:
                s.acked.append(int(rid))
                s.approve_ms.append(ms)
            elif definite(st, doc):
                s.refused.append(int(rid))
            else:
                s.unsure.append(int(rid))
        return st

    def load(i):
        clients = [gpload.Client(r.url, token) for r in reps]
        which = [i % 2]
        project = "chaos-p%d" % (i % 4)
        pool, grown, n = None, 0, 0
        while time.monotonic() < stop_at:
            if pool is None:
                n += 1
                name = "c%d-%d" % (i, n)
                body = {"action": "create", "pool": name, "items": ITEM}
            elif grown >= 3:
                body = {"action": "release", "pool": pool}
            else:
                body = {"action": "expand", "pool": pool, "items": ITEM}
            st, doc, _ = submit(clients, which, project, body)
            if st != 201:
                # refused (a committed submission answered otherwise is
                # counted by a check): a new pool
                pool = None
                time.sleep(0.05)
                continue
            st = approve(clients, which, doc["id"])
            if body["action"] == "create":
                pool, grown = (name, 0) if st == 200 else (None, 0)
            elif body["action"] == "release":
                pool = None if st == 200 else pool
            else:
                grown += 1
        for c in clients:
            c.close()

    def agent():
        # the node agents' part, as the integration tests play it: releasing
        # allocations are gone, so released capacity comes back
        while not stopping.wait(0.5):
            try:
                gpload.psql(psql, "UPDATE allocations SET state = 'released', released_at = now()"
                                  " WHERE state = 'releasing';")
            except subprocess.CalledProcessError:
                pass  # PostgreSQL restarting

    def killer():
        rnd = random.Random()
        while not stopping.wait(rnd.uniform(5, 15)):
            r = rnd.choice(reps)
            s.event("kill -9 " + r.name)
            r.kill9()
            s.kills += 1
            r.start()

    def pg_restarter():
        every = a.pg_restart if a.pg_restart > 0 else a.duration / 2
        while not stopping.wait(every):
            s.event("PostgreSQL restart")
            subprocess.run(a.pg_restart_cmd, shell=True, check=False)
            s.event("PostgreSQL back")
            s.pg_restarts += 1
            if a.pg_restart <= 0:
                return

    def slow(rep):
        socks = []
        rnd = random.Random()
        while not stopping.is_set():
            while len(socks) < a.slow:
                try:
                    # 200 per source address (127.0.1.x): the per-address
                    # limit is not what this probe is about
                    src = ("127.0.1.%d" % (1 + len(socks) // 200), 0)
                    c = socket.create_connection(("127.0.0.1", rep.port), timeout=2,
                                                 source_address=src)
                    c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                    socks.append(c)
                except OSError:
                    break
            keep = []
            for c in socks:
                try:
                    c.sendall(b"X-Slow-%d: y\r\n" % rnd.randrange(1000))
                    keep.append(c)
                except OSError:
                    c.close()
            with s.lock:
                s.slow_closed += len(socks) - len(keep)
                s.slow_held = max(s.slow_held, len(keep))
            socks = keep
            stopping.wait(rnd.uniform(5, 10))
        for c in socks:
            c.close()

    def health():
        # a new connection each time, as a kubelet or a balancer probes;
        # the probe listener is what they would ask, the API port is timed
        # for comparison only (its overflow is answered 503 overloaded)
        while not stopping.wait(1):
            for r in reps:
                up, kills = r.up, r.kills
                st, _, ms = get(r.probe_url, "/healthz", 2)
                held = up and r.up and kills == r.kills
                with s.lock:
                    if st == 200:
                        s.health_ms.append(ms)
                    elif held:
                        s.health_fail += 1
                    else:
                        s.health_restart += 1
                st, code, ms = get(r.url, "/healthz", 2)
                with s.lock:
                    if st == 200:
                        s.api_health_ms.append(ms)
                    else:
                        k = "%s%s" % (st or "no answer", " " + code if code else "")
                        s.api_health_other[k] = s.api_health_other.get(k, 0) + 1

    def duplicates():
        # keep-alive connections, two per replica, opened before the slow
        # clients fill the servers: this probe is about keys, not accepting
        dup_clients = [gpload.Client(reps[j % 2].url, token) for j in range(4)]
        for c in dup_clients:
            c.request("GET", "/healthz")
        while not stopping.wait(0.5):
            key = "ck-dup-" + str(uuid.uuid4())
            body = {"action": "expand", "pool": "chaos-dup", "items": ITEM, "justification": key}
            out = []

            def one(c):
                st, doc, hdrs = c.request("POST", "/v1/projects/chaos-p0/pool-requests", body,
                                          key)
                code = gpload.error_code(doc)
                s.count("duplicate", st, code)
                body_ok("duplicate", st, doc, key=key)
                if definite(st, doc):
                    out.append((st, code, hdrs.get("idempotent-replayed") == "true"))

            ts = [threading.Thread(target=one, args=(c,)) for c in dup_clients]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            # the definite answers (not "still running", not 5xx) must agree,
            # and at most one of them is the first run (the others replays)
            with s.lock:
                s.dup_keys += 1
                if any(st == 201 for st, _, _ in out):
                    s.sub_created.append(key)
                if sum(1 for _, _, rp in out if not rp) > 1:
                    s.dup_fresh_twice += 1
                if len({st for st, _, _ in out}) > 1:
                    s.dup_inconsistent += 1
                    combo = " + ".join(sorted("%d%s%s" % (st, " " + code if code else "",
                                                          " replayed" if rp else "")
                                              for st, code, rp in out))
                    s.dup_combos[combo] = s.dup_combos.get(combo, 0) + 1
        for c in dup_clients:
            c.close()

    workers = [threading.Thread(target=load, args=(i,)) for i in range(a.clients)]
    helpers = [threading.Thread(target=f) for f in (agent, killer, pg_restarter, health, duplicates)]
    helpers += [threading.Thread(target=slow, args=(r,)) for r in reps]
    for t in workers + helpers:
        t.start()
    for t in workers:
        t.join()
    stopping.set()
    for t in helpers:
        t.join()

    with open(a.pg_log, "rb") as f:
        f.seek(log_offset)
        deadlocks = f.read().count(b"deadlock detected")
    ran_twice = int(gpload.psql(psql, """
        SELECT count(*) FROM (SELECT justification FROM pool_requests
         WHERE justification LIKE 'ck-%' GROUP BY 1 HAVING count(*) > 1) d;""")[0][0])
    lost = gpload.missing_approvals(psql, s.acked)
    refused_committed = len(s.refused) - len(gpload.missing_approvals(psql, s.refused))
    unsure_committed = len(s.unsure) - len(gpload.missing_approvals(psql, s.unsure))
    sub_lost = keys_in_db(psql, s.sub_created, False)
    sub_refused_committed = keys_in_db(psql, s.sub_refused, True)
    sub_unsure_committed = keys_in_db(psql, s.sub_unsure, True)
    inv = gpload.invariants(psql)

    total = sum(s.answers.values())
    errors = {k: v for k, v in s.answers.items() if not k.split()[1].startswith("2")}
    print("chaos run: %.0f s, 2 replicas, %d clients, %d slow clients per replica; "
          "%d kill -9 of a replica, %d PostgreSQL restarts"
          % (a.duration, a.clients, a.slow, s.kills, s.pg_restarts))
    print("  events (UTC): %s" % ", ".join(s.events))
    print("  requests: %d (%s)" % (total, ", ".join(
        "%s: %d" % kv for kv in sorted(s.answers.items()))))
    print("  errors by status: %s" % (", ".join(
        "%s: %d" % kv for kv in sorted(errors.items())) or "none"))
    for what, n in sorted(s.details.items(), key=lambda kv: -kv[1])[:4]:
        print("    %dx %s" % (n, what[:140]))
    print("  approvals answered 2xx: %d, p50 %.1f ms, p99 %.1f ms, max %.1f ms"
          % (len(s.acked), gpload.percentile(s.approve_ms, 50),
             gpload.percentile(s.approve_ms, 99), max(s.approve_ms, default=0)))
    print("  no definite answer after retrying until 30 s past the end (gave up):"
          " submissions %d (committed: %d), approvals %d (committed: %d)"
          % (len(s.sub_unsure), len(sub_unsure_committed), len(s.unsure), unsure_committed))
    for key in sub_unsure_committed[:3]:
        row = gpload.psql(psql, "SELECT id, to_char(requested_at, 'HH24:MI:SS.MS') FROM"
                                " pool_requests WHERE justification = '%s';" % key)[0]
        print("    submission committed, never answered: request %s, its transaction began"
              " %s UTC, justification %s" % (row[0], row[1], key))
    print("  slow clients: up to %d held open on one replica, %d found closed by the server"
          " (header deadline or kill)" % (s.slow_held, s.slow_closed))
    print("  /healthz on the probe listeners: %d answered 200, p50 %.1f ms, p99 %.1f ms,"
          " max %.1f ms; %d failed across a kill -9 and restart"
          % (len(s.health_ms), gpload.percentile(s.health_ms, 50),
             gpload.percentile(s.health_ms, 99), max(s.health_ms, default=0), s.health_restart))
    print("  /healthz on the API ports (informational): %d answered 200, p50 %.1f ms,"
          " p99 %.1f ms, max %.1f ms; otherwise: %s"
          % (len(s.api_health_ms), gpload.percentile(s.api_health_ms, 50),
             gpload.percentile(s.api_health_ms, 99), max(s.api_health_ms, default=0),
             ", ".join("%s: %d" % kv for kv in sorted(s.api_health_other.items())) or "none"))
    print("  duplicate-key probes: %d keys sent 4x across both replicas" % s.dup_keys)
    for combo, n in sorted(s.dup_combos.items(), key=lambda kv: -kv[1])[:3]:
        print("    disagreeing %dx: %s" % (n, combo))
    for ex in s.bad_examples:
        print("    not the request: %s" % ex)
    checks = [
        ("answers 2xx whose body is not the request (id 0, another id or key)", s.bad_bodies),
        ("idempotency keys that ran twice (SQL)", ran_twice),
        ("duplicate keys answered as a first run more than once", s.dup_fresh_twice),
        ("duplicate keys whose definite answers disagree", s.dup_inconsistent),
        ("submissions answered 201 but not in the database", len(sub_lost)),
        ("submissions answered 4xx that committed anyway", len(sub_refused_committed)),
        ("approvals answered 2xx but not approved in the database (lost)", len(lost)),
        ("submissions and approvals never answered (a 5xx, no answer or"
         " idempotency_conflict to every retry)", len(s.sub_unsure) + len(s.unsure)),
        ("approvals answered 4xx that committed anyway (of %d)" % len(s.refused),
         refused_committed),
        ("probe-listener /healthz failures while the replica was up", s.health_fail),
        ("deadlocks in PostgreSQL's log", deadlocks),
    ] + list(inv.items())
    for name, n in checks:
        print("  check: %s: %d" % (name, n))
    failed = any(n for _, n in checks)
    print("RESULT: %s" % ("FAIL" if failed else "PASS"))
    return 1 if failed else 0


def keys_in_db(psql, keys, present):
    """Of the submission keys (= justifications), those present (or
    missing) in pool_requests."""
    if not keys:
        return []
    arr = "{" + ",".join(keys) + "}"
    rows = gpload.psql(psql, "SELECT k FROM unnest('%s'::text[]) AS k WHERE %s EXISTS "
                             "(SELECT 1 FROM pool_requests r WHERE r.justification = k);"
                       % (arr, "" if present else "NOT"))
    return [r[0] for r in rows]


if __name__ == "__main__":
    sys.exit(main())
