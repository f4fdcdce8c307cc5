"""gpload - what the failover test (tests/ha) and the chaos run (tests/chaos)
share: a keep-alive HTTP client for gpupoold, the fleet/project set-up
through the API, the submit+approve step with Idempotency-Key retries, the
SQL invariant checks and small statistics. Python 3 standard library only.
"""

import http.client
import json
import subprocess
import threading
import time
import uuid
from urllib.parse import urlsplit

# statuses after which a retry with the same Idempotency-Key makes sense:
# no answer (connection refused or cut), 5xx, a concurrent duplicate
RETRY_STATUSES = (0, 500, 502, 503, 504)


class Client:
    """One keep-alive connection to one gpupoold; reconnects after errors."""

    def __init__(self, base_url, token=None, timeout=10.0):
        u = urlsplit(base_url)
        self.host, self.port = u.hostname, u.port
        self.token = token
        self.timeout = timeout
        self.conn = None

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def request(self, method, path, body=None, key=None):
        """(status, parsed body or None, headers); status 0 when no answer."""
        hdrs = {"Content-Type": "application/json"}
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        if key:
            hdrs["Idempotency-Key"] = key
        data = json.dumps(body) if body is not None else None
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port,
                                                       timeout=self.timeout)
            self.conn.request(method, path, body=data, headers=hdrs)
            r = self.conn.getresponse()
            raw = r.read()
            headers = {k.lower(): v for k, v in r.getheaders()}
            if headers.get("connection", "").lower() == "close":
                self.close()
        except (OSError, http.client.HTTPException):
            self.close()
            return 0, None, {}
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = None
        return r.status, doc, headers


def error_code(doc):
    """The problem document's code ("" when there is none)."""
    return doc.get("code", "") if isinstance(doc, dict) else ""


def login(base_url, username, password):
    c = Client(base_url)
    st, doc, _ = c.request("POST", "/v1/auth/login",
                           {"username": username, "password": password})
    c.close()
    if st != 200 or not doc or "token" not in doc:
        raise RuntimeError("login failed: %s %s" % (st, doc))
    return doc["token"]


def must(result, *ok):
    st, doc, _ = result
    if st not in ok:
        raise RuntimeError("unexpected answer %s: %s" % (st, doc))
    return doc


def setup_fleet(base_url, token, prefix, nodes, gpus, projects, username):
    """A cluster of nodes x gpus H100-80GB through the API, and projects
    that username owns. MIG is switched on by the caller (SQL), as the
    integration fixture does."""
    c = Client(base_url, token)
    must(c.request("POST", "/v1/clusters", {"name": prefix, "region": "t"}), 201)
    seq = [0]
    lock = threading.Lock()

    def add_nodes(first, step):
        cc = Client(base_url, token)
        for n in range(first, nodes, step):
            node = "%s-n%d" % (prefix, n)
            must(cc.request("POST", "/v1/nodes", {
                "name": node, "cluster": prefix, "hostname": node + ".local",
                "cpu_millicores": 64000, "memory_bytes": 1000000000}), 201)
            for g in range(gpus):
                with lock:
                    seq[0] += 1
                    s = seq[0]
                must(cc.request("POST", "/v1/nodes/%s/gpus" % node, {
                    "index": g, "model": "H100-80GB",
                    "uuid": "GPU-%08x-0000-4000-8000-%012x" % (s, s)}), 201)
        cc.close()

    threads = [threading.Thread(target=add_nodes, args=(i, 4)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in range(projects):
        name = "%s-p%d" % (prefix, p)
        must(c.request("POST", "/v1/projects", {"name": name, "display_name": name}), 201)
        must(c.request("PUT", "/v1/projects/%s/members/%s" % (name, username),
                       {"role": "owner"}), 200, 201)
    c.close()


def retrying(client, method, path, body, deadline, key=None, log=None):
    """Send with one Idempotency-Key until a definite answer (< 500, and not
    idempotency_conflict) or the deadline; (status, doc, attempts, t_first,
    t_last_sent). Each attempt is appended to log as (path kind, status,
    start, end)."""
    key = key or str(uuid.uuid4())
    attempts = 0
    t_first = time.monotonic()
    while True:
        t0 = time.monotonic()
        st, doc, hdrs = client.request(method, path, body, key)
        attempts += 1
        if log is not None:
            log.append((path.rsplit("/", 1)[-1], st, t0, time.monotonic()))
        conflict = st == 409 and error_code(doc) == "idempotency_conflict"
        if (st not in RETRY_STATUSES and not conflict) or time.monotonic() >= deadline:
            return st, doc, attempts, t_first, t0
        time.sleep(0.05 if st == 0 else 0.1)


def percentile(values, p):
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


# ---- SQL, through psql ------------------------------------------------------

INVARIANTS = {
    "overlapping live allocations": """
        SELECT count(*) FROM allocations a JOIN allocations b
          ON a.gpu_id = b.gpu_id AND a.id < b.id
         AND a.state <> 'released' AND b.state <> 'released'
         AND int4range(a.start, a.start + a.size) && int4range(b.start, b.start + b.size)""",
    "pools whose allocations differ from their items": """
        SELECT count(*) FROM pools p WHERE p.status IN ('provisioning', 'active')
           AND p.items <> (SELECT coalesce(jsonb_agg(jsonb_build_object('model', m,
                   'profile', pf, 'count', c) ORDER BY m, pf), '[]')
                 FROM (SELECT g.model AS m, a.profile AS pf, count(*) AS c
                         FROM allocations a JOIN gpus g ON g.id = a.gpu_id
                        WHERE a.pool_id = p.id AND a.state NOT IN ('releasing', 'released')
                        GROUP BY 1, 2) s)""",
    "approved requests without allocations": """
        SELECT count(*) FROM pool_requests r WHERE r.state IN ('approved', 'fulfilled') AND r.action = 'create'
           AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.pool_id = r.pool_id)""",
}


def psql(cmd, sql):
    """Run sql with the psql command line cmd (a list); rows as lists."""
    out = subprocess.run(cmd + ["-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1"],
                         input=sql, capture_output=True, text=True, check=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


def invariants(cmd):
    """{check name: count of violations}."""
    return {name: int(psql(cmd, sql + ";")[0][0]) for name, sql in INVARIANTS.items()}


def missing_approvals(cmd, ids):
    """Of the request ids, those not approved in the database."""
    if not ids:
        return []
    arr = "{" + ",".join(str(i) for i in ids) + "}"
    rows = psql(cmd, "SELECT i FROM unnest('%s'::bigint[]) AS i WHERE NOT EXISTS "
                     "(SELECT 1 FROM pool_requests r WHERE r.id = i AND r.state IN ('approved', 'fulfilled'));"
                % arr)
    return [int(r[0]) for r in rows]
