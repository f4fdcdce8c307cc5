#!/usr/bin/env python3
"""tests/chaos/agents.py - the agent scenario of scripts/chaos (issue 19).

Run by `SCENARIO=agents scripts/chaos`, which builds gpupoold and
gpupool-agent and starts one PostgreSQL. This driver starts two gpupoold
replicas and, for DURATION s:

- AGENTS simulated agents (one H100-80GB in MIG mode each; worker threads,
  Python standard library): each enrolls, then every CYCLE s reads its
  desired state (`after=G&wait=0`), realizes it at once (a status report
  listing the instances at the placements named) and sends one metric
  sample stamped now together with whatever it still holds. What a send
  could not deliver (no answer: a replica down) stays in a buffer bounded
  like the real agent's (--max-buffered-samples, oldest dropped first,
  counted) and goes out with the next send, to the other replica;
- a load thread creating one-slice pools on the fleet and releasing each
  some seconds later;
- real gpupool-agent processes (fake backend, two GPUs each, samples every
  second): "lost", whose GPU 1 falls off the bus (the fault file's
  "lost": true) a third of the way in; "cut", whose way to the server (a
  TCP proxy) is cut for CUT s half-way and then restored;
- kill -9 of a replica every KILL_EVERY s, alternating, restarted at once.

Then the load stops, the fleet gets SETTLE s to converge, and it prints the
figures and checks (exit status 1 when one failed):

- samples lost: simulated samples neither stored nor dropped by the
  documented buffer bound; for the real agents, the 1-s samples missing
  from each GPU's series (holes) from its first sample to the end;
- allocations stuck: allocations still reserved, provisioning or releasing
  after the settle time;
- the lost GPU failed, alerted, its sibling ok; the cut agent's node ready;
- the allocation invariants of tests/ha/gpload.py.
"""

import argparse
import collections
import json
import os
import random
import shlex
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ha"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpload  # noqa: E402
from chaos import Replica  # noqa: E402

CLUSTER = "ca"
PROJECT = "ca-p"


def sim_gpu(i):
    return "GPU-5e1a0000-0000-4000-8000-%012x" % i


class SimAgent:
    def __init__(self, i, buffer_bound):
        self.i = i
        self.name = "sim-%04d" % i
        self.gpu = sim_gpu(i)
        self.token = None
        self.gen = 0
        self.instances = []   # what is realized: the desired state's instances
        self.buf = collections.deque()
        self.bound = buffer_bound
        self.generated = 0    # samples taken
        self.dropped = 0      # dropped by the buffer bound (documented)
        self.rejected = 0     # refused by the server (422, rejected[]): none expected
        self.next_at = 0.0
        self.prefer = i % 2   # the replica it talks to first

    def enroll(self, url, admin):
        c = gpload.Client(url, admin)
        doc = gpload.must(c.request("POST", "/v1/clusters/%s/enrollment-tokens" % CLUSTER,
                                    {"expires_in_seconds": 3600}), 201)
        c.close()
        c = gpload.Client(url)
        doc = gpload.must(c.request("POST", "/v1/agent/enroll", {
            "enrollment_token": doc["token"], "node_name": self.name, "hostname": self.name,
            "agent_version": "chaos-sim", "cpu_millicores": 64000, "memory_bytes": 1 << 30,
            "gpus": [{"uuid": self.gpu, "index": 0, "product_name": "NVIDIA H100 80GB HBM3",
                      "pci_device_id": "0x233010DE", "memory_mib": 81559,
                      "mig_enabled": True, "instances": []}]}), 201)
        c.close()
        self.token = doc["node_token"]

    def call(self, clients, method, path, body):
        """Try the preferred replica, then the other; (status, doc)."""
        for k in (self.prefer, 1 - self.prefer):
            c = clients[k]
            c.token = self.token
            st, doc, _ = c.request(method, path, body)
            if st not in gpload.RETRY_STATUSES:
                return st, doc
            self.prefer = 1 - k
        return 0, None

    def tick(self, clients, now):
        st, doc = self.call(clients, "GET",
                            "/v1/agent/desired-state?after=%d&wait=0" % self.gen, None)
        if st == 200 and doc is not None:
            for g in doc.get("gpus", []):
                if g.get("uuid") == self.gpu:
                    self.instances = [{"profile": x["profile"], "start": x["start"],
                                       "size": x["size"],
                                       "uuid": "MIG-%s-%d" % (self.gpu[4:], x["start"])}
                                      for x in g.get("instances", [])]
            self.gen = doc.get("generation", self.gen)
        self.call(clients, "PUT", "/v1/agent/status", {
            "observed_generation": self.gen, "agent_version": "chaos-sim",
            "gpus": [{"uuid": self.gpu, "index": 0, "mig_enabled": True,
                      "ecc_uncorrected": 0, "remapped_rows_failure": False,
                      "recovery_action": "none", "xid_events": [],
                      "instances": self.instances}]})
        self.generated += 1
        self.buf.append({"ts": int(now), "gpu_uuid": self.gpu, "device_uuid": self.gpu,
                         "power_w": 100 + self.i % 50, "sm_active": 0.5,
                         "memory_used_mib": 100, "memory_total_mib": 81559,
                         "temperature_c": 40})
        while len(self.buf) > self.bound:
            self.buf.popleft()
            self.dropped += 1
        batch = list(self.buf)
        st, doc = self.call(clients, "POST", "/v1/agent/metrics", {"samples": batch})
        if st == 200:
            for _ in batch:
                self.buf.popleft()
            if isinstance(doc, dict):
                self.rejected += int(doc.get("rejected_count", len(doc.get("rejected", []))))
        elif st == 422:
            for _ in batch:
                self.buf.popleft()
            self.rejected += len(batch)


class Proxy:
    """A TCP proxy on a fixed port; stop() cuts every connection."""

    def __init__(self, port, to_port):
        self.port, self.to_port = port, to_port
        self.srv = None
        self.conns = []
        self.lock = threading.Lock()

    def start(self):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self.srv = s
        threading.Thread(target=self.accept, args=(s,), daemon=True).start()

    def accept(self, s):
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.to_port), timeout=5)
                u.settimeout(None)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.conns += [c, u]
            for x, y in ((c, u), (u, c)):
                threading.Thread(target=self.pipe, args=(x, y), daemon=True).start()

    @staticmethod
    def pipe(x, y):
        try:
            while True:
                b = x.recv(65536)
                if not b:
                    break
                y.sendall(b)
        except OSError:
            pass
        for s in (x, y):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self):
        self.srv.close()
        with self.lock:
            for c in self.conns:
                try:
                    c.shutdown(socket.SHUT_RDWR)
                    c.close()
                except OSError:
                    pass
            self.conns = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class RealAgent:
    def __init__(self, binary, name, server_url, logdir, admin_client):
        self.name = name
        self.dir = os.path.join(logdir, "agent-" + name)
        os.makedirs(self.dir, mode=0o700)
        self.gpus = os.path.join(logdir, "gpus-%s.json" % name)
        with open(self.gpus, "w") as f:
            json.dump({"gpus": [{"model": "H100-80GB", "count": 2}]}, f)
        doc = gpload.must(admin_client.request(
            "POST", "/v1/clusters/%s/enrollment-tokens" % CLUSTER,
            {"expires_in_seconds": 3600}), 201)
        self.log = open(os.path.join(logdir, "%s.log" % name), "ab")
        self.proc = subprocess.Popen([
            binary, "--server", server_url, "--node-name", name, "--state-dir", self.dir,
            "--backend", "fake", "--fake-gpus", self.gpus, "--enroll-token", doc["token"],
            "--poll-interval", "5", "--heartbeat-interval", "2", "--status-interval", "30",
            "--metrics-interval", "1"], stdout=self.log, stderr=self.log)

    def faults(self, doc):
        tmp = os.path.join(self.dir, "fake-faults.json.tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.rename(tmp, os.path.join(self.dir, "fake-faults.json"))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def q1(psql, sql):
    rows = gpload.psql(psql, sql)
    return rows[0][0] if rows else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpupoold", required=True)
    ap.add_argument("--agent", required=True, help="the gpupool-agent binary")
    ap.add_argument("--ports", required=True, help="two ports, comma-separated")
    ap.add_argument("--probe-ports", required=True)
    ap.add_argument("--logdir", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--psql", required=True)
    ap.add_argument("--duration", type=float, default=90)
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--cycle", type=float, default=10, help="simulated agent period, s")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--buffer", type=int, default=20000,
                    help="samples a simulated agent holds (--max-buffered-samples)")
    ap.add_argument("--kill-every", type=float, default=20)
    ap.add_argument("--cut", type=float, default=20)
    ap.add_argument("--settle", type=float, default=60)
    a = ap.parse_args()
    psql = shlex.split(a.psql)
    ports = [int(p) for p in a.ports.split(",")]
    probe_ports = [int(p) for p in a.probe_ports.split(",")]
    reps = [Replica("replica%d" % i, a.gpupoold, p, pp,
                    os.path.join(a.logdir, "gpupoold%d.log" % i))
            for i, (p, pp) in enumerate(zip(ports, probe_ports))]
    for r in reps:
        r.start()
    reals = []
    try:
        return run(a, psql, reps, reals)
    finally:
        for ra in reals:
            ra.stop()
        for r in reps:
            r.stop()


def run(a, psql, reps, reals):
    t_start = time.monotonic()
    admin = gpload.login(reps[0].url, "admin", a.password)
    ac = gpload.Client(reps[0].url, admin)
    gpload.must(ac.request("POST", "/v1/clusters", {"name": CLUSTER, "region": "t"}), 201)
    gpload.must(ac.request("POST", "/v1/projects", {"name": PROJECT, "display_name": "chaos"}),
                201)
    gpload.must(ac.request("PUT", "/v1/projects/%s/members/admin" % PROJECT, {"role": "owner"}),
                200, 201)

    # ---- enroll the simulated fleet (8 threads, both replicas)
    sims = [SimAgent(i, a.buffer) for i in range(a.agents)]
    errors = []

    def enroll(part):
        for s in part:
            try:
                s.enroll(reps[s.i % 2].url, admin)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append("%s: %s" % (s.name, e))

    ts = [threading.Thread(target=enroll, args=(sims[k::8],)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        print("enrollment failed: %d, e.g. %s" % (len(errors), errors[0]))
        return 1
    enroll_s = time.monotonic() - t_start
    print("agents: %d simulated agents enrolled in %.1f s" % (len(sims), enroll_s), flush=True)

    # ---- real agents: "lost" on replica 0, "cut" through a proxy to replica 1
    proxy = Proxy(free_port(), reps[1].port)
    proxy.start()
    lost = RealAgent(a.agent, "real-lost", reps[0].url, a.logdir, ac)
    cut = RealAgent(a.agent, "real-cut", "http://127.0.0.1:%d" % proxy.port, a.logdir, ac)
    reals += [lost, cut]
    deadline = time.monotonic() + 30
    while int(q1(psql, "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE "
                       "n.name LIKE 'real-%' AND n.status = 'ready';")) < 4:
        if time.monotonic() > deadline:
            print("the real agents did not enroll (see %s)" % a.logdir)
            return 1
        time.sleep(0.2)

    stop = threading.Event()
    kills = []

    # ---- simulated agents: workers, each owning a slice
    def work(part):
        clients = [gpload.Client(r.url, timeout=10) for r in reps]
        for s in part:
            s.next_at = time.monotonic() + random.uniform(0, a.cycle)
        while not stop.is_set():
            now = time.monotonic()
            due = [s for s in part if s.next_at <= now]
            for s in due:
                s.tick(clients, time.time())
                s.next_at += a.cycle
            if not due:
                time.sleep(0.05)
        # the last flush: what is still held goes out
        for s in part:
            for _ in range(20):
                if not s.buf:
                    break
                batch = list(s.buf)
                st, doc = s.call(clients, "POST", "/v1/agent/metrics", {"samples": batch})
                if st == 200:
                    for _ in batch:
                        s.buf.popleft()
                else:
                    time.sleep(0.5)
        for c in clients:
            c.close()

    workers = [threading.Thread(target=work, args=(sims[k::a.workers],))
               for k in range(a.workers)]
    for t in workers:
        t.start()

    # ---- load: one-slice pools created and released a few cycles later
    created = []
    answers = collections.Counter()  # "what status" of the load's requests

    def load():
        c = [gpload.Client(r.url, admin) for r in reps]
        live = collections.deque()
        n = 0
        while not stop.is_set():
            n += 1
            k = n % 2
            name = "cp-%d" % n
            st, doc, _ = c[k].request("POST", "/v1/projects/%s/pool-requests" % PROJECT, {
                "action": "create", "pool": name, "items": ["H100-80GB/1g.10gb=1"],
                "justification": "chaos"})
            answers["submit %d" % st] += 1
            if st == 201:
                st, _, _ = c[k].request("POST", "/v1/pool-requests/%s/approve" % doc["id"], {})
                answers["approve %d" % st] += 1
                if st == 200:
                    live.append((time.monotonic(), name))
                    created.append(name)
            while live and time.monotonic() - live[0][0] > 2 * a.cycle:
                _, old = live.popleft()
                for _ in range(10):
                    st, doc, _ = c[k].request("POST", "/v1/projects/%s/pool-requests" % PROJECT,
                                              {"action": "release", "pool": old})
                    answers["release %d" % st] += 1
                    if st == 201:
                        st, _, _ = c[k].request("POST", "/v1/pool-requests/%s/approve" % doc["id"],
                                                {})
                        answers["approve release %d" % st] += 1
                        break
                    k = 1 - k
                    time.sleep(0.2)
            stop.wait(0.5)
        for x in c:
            x.close()

    loader = threading.Thread(target=load)
    loader.start()

    # ---- the faults, on a timeline
    t0 = time.monotonic()
    lost_at = t0 + a.duration / 3
    cut_at = t0 + a.duration / 2
    next_kill = t0 + a.kill_every / 2
    victim = 0
    lost_done = cut_done = restored = False
    cut_from = cut_to = None
    lost_failed_s = None
    while time.monotonic() < t0 + a.duration:
        now = time.monotonic()
        if not lost_done and now >= lost_at:
            lost.faults({"gpus": [{"index": 1, "xids": [79], "lost": True}]})
            lost_done, lost_t = True, now
        if lost_done and lost_failed_s is None:
            if q1(psql, "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE "
                        "n.name = 'real-lost' AND g.gpu_index = 1 AND g.health = 'failed';") == "1":
                lost_failed_s = now - lost_t
        if not cut_done and now >= cut_at:
            proxy.stop()
            cut_done, cut_from = True, now
            print("agents: real-cut cut off at t=%.0f s" % (now - t0), flush=True)
        if cut_done and not restored and now >= cut_from + a.cut:
            proxy = Proxy(proxy.port, reps[1].port)
            for _ in range(50):
                try:
                    proxy.start()
                    break
                except OSError:
                    time.sleep(0.1)
            restored, cut_to = True, now
            print("agents: real-cut reconnected at t=%.0f s" % (now - t0), flush=True)
        if now >= next_kill:
            reps[victim].kill9()
            kills.append(reps[victim].name)
            print("agents: kill -9 %s at t=%.0f s" % (reps[victim].name, now - t0), flush=True)
            reps[victim].start()
            victim = 1 - victim
            next_kill = now + a.kill_every
        time.sleep(0.2)

    stop.set()
    loader.join()
    for t in workers:
        t.join()
    print("agents: load stopped; settling (up to %.0f s)" % a.settle, flush=True)

    # ---- settle: the simulated agents keep realizing what is left
    settle_stop = threading.Event()

    def settle(part):
        clients = [gpload.Client(r.url, timeout=10) for r in reps]
        while not settle_stop.is_set():
            for s in part:
                s.tick(clients, time.time())
            settle_stop.wait(1)

    stuck_sql = ("SELECT count(*) FROM allocations WHERE state IN "
                 "('reserved', 'provisioning', 'releasing');")
    busy = sorted({int(r[0][4:]) for r in gpload.psql(psql,
                   "SELECT DISTINCT n.name FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
                   "JOIN nodes n ON n.id = g.node_id WHERE a.state IN ('reserved', "
                   "'provisioning', 'releasing') AND n.name LIKE 'sim-%';")})
    # no new samples here: only the nodes with allocations in flight report
    helpers = [threading.Thread(target=settle, args=([_StatusOnly(sims[i]) for i in busy],))]
    for t in helpers:
        t.start()
    deadline = time.monotonic() + a.settle
    while time.monotonic() < deadline and int(q1(psql, stuck_sql)) > 0:
        time.sleep(0.5)
    settle_stop.set()
    for t in helpers:
        t.join()
    time.sleep(3)  # the real agents' last samples (1 s apart) reach the server

    # ---- figures and checks
    stored = {r[0]: int(r[1]) for r in gpload.psql(psql,
              "SELECT g.uuid, count(DISTINCT s.ts) FROM gpu_metric_samples s JOIN gpus g "
              "ON g.id = s.gpu_id JOIN nodes n ON n.id = g.node_id WHERE n.name LIKE 'sim-%' "
              "GROUP BY g.uuid;")}
    generated = sum(s.generated for s in sims)
    dropped = sum(s.dropped for s in sims)
    rejected = sum(s.rejected for s in sims)
    held = sum(len(s.buf) for s in sims)
    sim_lost = sum(max(0, s.generated - s.dropped - len(s.buf) - stored.get(s.gpu, 0))
                   for s in sims)
    # real agents: holes in each GPU's 1-s series, first sample to last
    holes = {}
    for name, gpu in (("real-cut", 0), ("real-cut", 1), ("real-lost", 0)):
        rows = gpload.psql(psql,
                           "SELECT coalesce(sum(greatest(0, round(extract(epoch FROM gap)) - 1)), 0)"
                           "::int8, count(*) FROM (SELECT s.ts - lag(s.ts) OVER (ORDER BY s.ts) AS gap "
                           "FROM (SELECT DISTINCT s.ts FROM gpu_metric_samples s JOIN gpus g ON "
                           "g.id = s.gpu_id JOIN nodes n ON n.id = g.node_id WHERE n.name = '%s' "
                           "AND g.gpu_index = %d AND s.device_uuid = g.uuid) s) x "
                           "WHERE gap > interval '2.5 seconds';" % (name, gpu))
        holes["%s/gpu%d" % (name, gpu)] = int(rows[0][0])
    cut_samples = int(q1(psql,
                         "SELECT count(*) FROM gpu_metric_samples s JOIN gpus g ON g.id = s.gpu_id "
                         "JOIN nodes n ON n.id = g.node_id WHERE n.name = 'real-cut' AND "
                         "s.device_uuid = g.uuid AND s.ts > now() - interval '%d seconds' AND "
                         "s.ts < now() - interval '%d seconds';"
                         % (int(time.monotonic() - cut_from), int(time.monotonic() - cut_to))))
    stuck = int(q1(psql, stuck_sql))
    stuck_rows = gpload.psql(psql, "SELECT a.id, a.state, n.name FROM allocations a JOIN gpus g "
                                   "ON g.id = a.gpu_id JOIN nodes n ON n.id = g.node_id WHERE "
                                   "a.state IN ('reserved', 'provisioning', 'releasing') "
                                   "ORDER BY a.id LIMIT 5;")
    lost_gpu = gpload.psql(psql, "SELECT g.gpu_index, g.health FROM gpus g JOIN nodes n ON "
                                 "n.id = g.node_id WHERE n.name = 'real-lost' ORDER BY 1;")
    lost_alert = int(q1(psql, "SELECT count(*) FROM alerts al JOIN gpus g ON g.id = al.gpu_id "
                              "JOIN nodes n ON n.id = g.node_id WHERE n.name = 'real-lost' AND "
                              "g.gpu_index = 1 AND al.type = 'gpu_failed' AND "
                              "al.resolved_at IS NULL;"))
    cut_status = q1(psql, "SELECT status FROM nodes WHERE name = 'real-cut';")
    allocs = {r[0]: int(r[1]) for r in gpload.psql(psql,
              "SELECT state, count(*) FROM allocations GROUP BY 1;")}
    inv = gpload.invariants(psql)

    print()
    print("%-44s %d simulated (+2 real gpupool-agent, fake backend), cycle %.0f s, %.0f s"
          % ("agents", len(sims), a.cycle, a.duration))
    print("%-44s %s" % ("replicas killed (-9)", ", ".join(kills) or "none"))
    print("%-44s %d created; allocations now %s" % ("pools", len(created), allocs))
    print("%-44s %s" % ("load answers", dict(sorted(answers.items()))))
    print("%-44s generated %d, stored %d, dropped by the bound (%d/agent) %d, "
          "still held %d, rejected %d" % ("simulated samples", generated, sum(stored.values()),
                                          a.buffer, dropped, held, rejected))
    print("%-44s %s" % ("real agents' holes (1-s samples missing)", holes))
    print("%-44s %d samples of the %.0f s cut stored after the reconnection"
          % ("real-cut backlog", cut_samples, a.cut))
    print("%-44s GPUs %s, alert %d, failed %.1f s after the fault"
          % ("real-lost", " ".join("%s:%s" % (r[0], r[1]) for r in lost_gpu), lost_alert,
             lost_failed_s if lost_failed_s is not None else -1))
    checks = [
        ("samples lost (beyond the buffer bound)", sim_lost + sum(holes.values()) + rejected),
        ("allocations stuck", stuck),
        ("lost GPU not failed / sibling not ok / no alert",
         0 if lost_gpu == [["0", "ok"], ["1", "failed"]] and lost_alert == 1 else 1),
        ("cut agent's backlog missing", 0 if cut_samples >= 2 * (a.cut - 3) else 1),
        ("cut agent's node not ready", 0 if cut_status == "ready" else 1),
    ] + sorted(inv.items())
    failed = 0
    print()
    for name, n in checks:
        print("%-44s %d %s" % (name, n, "ok" if n == 0 else "FAILED"))
        failed += n != 0
    if stuck:
        print("stuck, e.g.: %s" % stuck_rows)
    return 1 if failed else 0


class _StatusOnly:
    """A simulated agent that reads its desired state and reports status
    only (the settle phase: no samples, which would not be counted)."""

    def __init__(self, s):
        self.s = s

    def tick(self, clients, now):
        s = self.s
        st, doc = s.call(clients, "GET", "/v1/agent/desired-state?after=%d&wait=0" % s.gen, None)
        if st == 200 and doc is not None:
            for g in doc.get("gpus", []):
                if g.get("uuid") == s.gpu:
                    s.instances = [{"profile": x["profile"], "start": x["start"],
                                    "size": x["size"], "uuid": "MIG-%s-%d" % (s.gpu[4:], x["start"])}
                                   for x in g.get("instances", [])]
            s.gen = doc.get("generation", s.gen)
        s.call(clients, "PUT", "/v1/agent/status", {
            "observed_generation": s.gen, "agent_version": "chaos-sim",
            "gpus": [{"uuid": s.gpu, "index": 0, "mig_enabled": True, "instances": s.instances}]})


if __name__ == "__main__":
    sys.exit(main())
