#!/usr/bin/env bash
# test_dev_db_private.sh SRC [BUILD] - as root, a clone in a private (0700)
# directory starts, reports and stops its development database: the user
# postgres cannot reach the clone's var/, so scripts/dev-db keeps the data
# where it can (/var/tmp/gpupool-<hash>/pg) and says so. Also: the shared
# gp_pg_init refuses a private directory with a line that names the fix, and
# so does the integration fixture (a test of BUILD run with TMPDIR there).
# Skips (77) when not root or without PostgreSQL.
set -euo pipefail
SRC=$1
BUILD=${2:-}
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root"; exit 77; }
id postgres >/dev/null 2>&1 || { echo "skip: no postgres user"; exit 77; }
ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1 || { echo "skip: no PostgreSQL"; exit 77; }

PRIV=$(mktemp -d /tmp/gp-private.XXXXXX)
chmod 700 "$PRIV"
CLONE=$PRIV/gpupool
fail() { echo "FAIL: $*" >&2; exit 1; }
cleanup() {
	[ -x "$CLONE/scripts/dev-db" ] && "$CLONE/scripts/dev-db" stop >/dev/null 2>&1 || true
	[ -n "${DATA:-}" ] && case $DATA in /var/tmp/gpupool-*/pg) rm -rf "${DATA%/pg}" ;; esac
	rm -rf "$PRIV"
}
trap cleanup EXIT

# the clone: the repository's committed tree, then the checkout's scripts
# as they are now (so that uncommitted changes are what is tested)
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
	git clone -q --depth 1 "file://$SRC" "$CLONE"
else
	mkdir -p "$CLONE"
fi
rm -rf "$CLONE/scripts"
cp -a "$SRC/scripts" "$CLONE/scripts"
runuser -u postgres -- test -x "$CLONE" && fail "postgres can reach $CLONE: the directory is not private"

out=$("$CLONE/scripts/dev-db" start 2>&1) || fail "dev-db start failed: $out"
DATA=$("$CLONE/scripts/dev-db" dir)
case $DATA in /var/tmp/gpupool-*/pg) ;; *) fail "data directory $DATA is not under /var/tmp/gpupool-*" ;; esac
grep -q "cannot reach $CLONE/var" <<<"$out" || fail "dev-db start did not say why the data moved: $out"
[ "$(cat "$CLONE/var/pg-dir")" = "$DATA" ] || fail "var/pg-dir does not name $DATA"
[ "$(stat -c %U "$DATA")" = postgres ] || fail "$DATA is not owned by postgres"
st=$("$CLONE/scripts/dev-db" status) || fail "status after start: $st"
grep -q "^running: host=$DATA port=[0-9]* user=postgres dbname=gpupool$" <<<"$st" || fail "status: $st"
# the database answers, and keeps its data across a stop and a start
"$CLONE/scripts/dev-db" psql -qAt -c "CREATE TABLE walk (v int); INSERT INTO walk VALUES (7)" ||
	fail "psql"
"$CLONE/scripts/dev-db" stop >/dev/null 2>&1
st=$("$CLONE/scripts/dev-db" status) && fail "status after stop exits 0: $st"
[ "$st" = stopped ] || fail "status after stop: $st"
"$CLONE/scripts/dev-db" start >/dev/null 2>&1 || fail "second start"
[ "$("$CLONE/scripts/dev-db" psql -qAt -c 'SELECT v FROM walk')" = 7 ] || fail "data lost across restart"
"$CLONE/scripts/dev-db" stop >/dev/null 2>&1

# the test harness's clusters: a private directory fails at once, naming the fix
out=$(bash -c 'source "$1/scripts/lib.sh"; gp_pg_init "$2/harness/pg"' _ "$CLONE" "$PRIV" 2>&1) &&
	fail "gp_pg_init in a private directory succeeded"
grep -q "cannot reach $PRIV/harness/pg.*chmod o+x" <<<"$out" || fail "gp_pg_init said: $out"
if [ -n "$BUILD" ] && [ -x "$BUILD/tests/integration/test_ui" ]; then
	mkdir -p "$PRIV/tmp"
	chmod 1777 "$PRIV/tmp"
	out=$(env -u GPUPOOL_TEST_PGHOST -u GPUPOOL_TEST_PGPORT TMPDIR=$PRIV/tmp \
		timeout 120 "$BUILD/tests/integration/test_ui" 2>&1) && fail "the fixture ran in a private TMPDIR"
	grep -q "cannot reach $PRIV/tmp/gpfx-.*Set TMPDIR" <<<"$out" || fail "the fixture said: $out"
fi
echo "ok"
