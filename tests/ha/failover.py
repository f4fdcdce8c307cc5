#!/usr/bin/env python3
"""tests/ha/failover.py - approval load through a PostgreSQL failover.

Run by scripts/test-failover. Sets up a fleet and projects through the API,
then CLIENTS threads loop: submit a pool request (create, one MIG slice)
and approve it, each with an Idempotency-Key, retrying an answer of 5xx or
no answer with the same key until a definite answer. KILL_AFTER seconds in,
it runs the kill command (kill -9 of the primary). After DURATION seconds it
checks, on the new primary: every approval answered 2xx is approved in the
database, the SQL invariants hold. Prints the figures; exit status 1 when
an approval was lost, an invariant broke or the service did not come back.
"""

import argparse
import os
import shlex
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpload  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--user", default="admin")
    ap.add_argument("--password", required=True)
    ap.add_argument("--psql", required=True, help="psql command line for the primary")
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--duration", type=float, default=25)
    ap.add_argument("--rate", type=float, default=20,
                    help="at most this many submit+approve per second per client")
    ap.add_argument("--kill-after", type=float, default=8)
    ap.add_argument("--kill-cmd", required=True)
    ap.add_argument("--recovery-limit", type=float, default=30,
                    help="fail when the first approval after the kill takes longer (s)")
    a = ap.parse_args()
    psql = shlex.split(a.psql)

    token = gpload.login(a.url, a.user, a.password)
    gpload.setup_fleet(a.url, token, "ha", a.nodes, 8, 4, a.user)
    gpload.psql(psql, "UPDATE gpus SET mig_enabled = true;")

    log = []          # every HTTP attempt: (kind, status, start, end)
    approvals = []    # (request id, final status, first sent, last sent, done)
    lock = threading.Lock()
    t_start = time.monotonic()
    stop_at = t_start + a.duration
    kill_at = [None]

    def worker(i):
        c = gpload.Client(a.url, token)
        mylog, mine, n = [], [], 0
        while time.monotonic() < stop_at:
            # paced, so that the fleet lasts the whole run on a fast machine
            time.sleep(max(0.0, t_start + n / a.rate - time.monotonic()))
            n += 1
            st, doc, _, _, _ = gpload.retrying(
                c, "POST", "/v1/projects/ha-p%d/pool-requests" % (i % 4),
                {"action": "create", "pool": "ha-%d-%d" % (i, n),
                 "items": ["H100-80GB/1g.10gb=1"], "justification": "failover test"},
                stop_at + 30, log=mylog)
            if st != 201:
                time.sleep(0.05)
                continue
            rid = doc["id"]
            st, doc, _, t_first, t_last = gpload.retrying(
                c, "POST", "/v1/pool-requests/%s/approve" % rid, {"note": "ha"},
                stop_at + 30, log=mylog)
            mine.append((int(rid), st, t_first, t_last, time.monotonic()))
        c.close()
        with lock:
            log.extend(mylog)
            approvals.extend(mine)

    def killer():
        time.sleep(a.kill_after)
        subprocess.run(a.kill_cmd, shell=True, check=False)
        # after the kill returned: a request sent later cannot reach the old primary
        kill_at[0] = time.monotonic()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(a.clients)]
    threads.append(threading.Thread(target=killer))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    k = kill_at[0]

    acked = [r for r in approvals if 200 <= r[1] < 300]
    after = [r for r in acked if r[3] >= k]
    first_ok = min((r[4] for r in after), default=None)
    failed = [e for e in log if e[1] in gpload.RETRY_STATUSES]
    fail_window = (max(e[3] for e in failed) - k) if failed else 0.0
    lat = [(r[4] - r[3]) * 1000 for r in acked if r[3] < k - 0.5 or r[3] > k + 30]
    by_status = {}
    for e in log:
        key = "%s %s" % (e[0] if e[0] == "approve" else "submit", e[1] or "no answer")
        by_status[key] = by_status.get(key, 0) + 1
    missing = gpload.missing_approvals(psql, [r[0] for r in acked])
    other = [r for r in approvals if not 200 <= r[1] < 300]
    other_committed = len(other) - len(gpload.missing_approvals(psql, [r[0] for r in other]))
    inv = gpload.invariants(psql)

    print("failover under approval load: %d clients (at most %.0f approvals/s each), %.0f s,"
          " kill -9 of the primary at %.1f s" % (a.clients, a.rate, a.duration, k - t_start))
    print("  HTTP attempts by answer: %s" % ", ".join(
        "%s: %d" % kv for kv in sorted(by_status.items())))
    print("  requests failed (no answer or 5xx, retried with the same key): %d" % len(failed))
    print("  approvals answered 2xx: %d; of them not approved in the database after failover"
          " (lost): %d" % (len(acked), len(missing)))
    print("  approvals with another final answer: %d (%s); of them committed anyway: %d"
          % (len(other), ", ".join(sorted({str(r[1]) for r in other})) or "-", other_committed))
    if first_ok is None:
        print("  service back: NEVER (no approval sent after the kill succeeded)")
    else:
        print("  service back: first successful approval %.2f s after the kill;"
              " last failed request ended %.2f s after it" % (first_ok - k, fail_window))
    print("  approval latency outside the failover: p50 %.1f ms, p99 %.1f ms"
          % (gpload.percentile(lat, 50), gpload.percentile(lat, 99)))
    for name, n in inv.items():
        print("  invariant: %s: %d" % (name, n))

    ok = (not missing and all(n == 0 for n in inv.values()) and first_ok is not None
          and first_ok - k <= a.recovery_limit and len(acked) > 0)
    print("RESULT: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
