#!/usr/bin/env bash
# test_check_boundaries.sh - scripts/check-boundaries passes on the tree
# and fails, naming file, line and rule, on each kind of violation, each
# put into a copy of the tree (outside git: the script's find path).
#
#   test_check_boundaries.sh <source dir>
set -euo pipefail
SRC=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

fresh() {
	rm -rf "$TMP/t"
	mkdir -p "$TMP/t/scripts"
	cp -r "$SRC/server" "$SRC/lib" "$SRC/client" "$TMP/t/"
	cp "$SRC/scripts/check-boundaries" "$TMP/t/scripts/"
}

# check_fails <expected message part>: the check must exit 1 saying it.
check_fails() {
	local want=$1 out rc=0
	out=$("$TMP/t/scripts/check-boundaries" 2>&1) || rc=$?
	if [ $rc -ne 1 ] || [[ "$out" != *"$want"* ]]; then
		echo "FAIL: exit $rc, wanted \"$want\", got:" >&2
		echo "$out" >&2
		exit 1
	fi
	echo "ok: $out"
}

# expect_fail <file> <line to append> <expected message part>: the file
# gets the line, the check must fail saying it, the file is put back.
expect_fail() {
	cp "$TMP/t/$1" "$TMP/saved"
	printf '%s\n' "$2" >>"$TMP/t/$1"
	check_fails "$3"
	mv "$TMP/saved" "$TMP/t/$1"
}

fresh
"$TMP/t/scripts/check-boundaries" || { echo "FAIL: the tree does not pass" >&2; exit 1; }
echo "ok: the tree passes"

# file | line appended | what the check must say
while IFS='|' read -r file line want; do
	expect_fail "$file" "$line" "$want"
done <<'CASES'
server/api/health.c|#include <microhttpd.h>|may not use microhttpd; it belongs to client/agent/ server/http/
lib/domain/pool.c|#include "db/db.h"|lib/domain/ may not use db/
lib/domain/spec.h|#include "service/pool_service.h"|lib/domain/ may not use service/
server/db/db.c|#include "domain/spec.h"|server/db/ may not use domain/
server/http/server.c|#include "db/db.h"|server/http/ may not use db/
server/auth/token.c|#include "domain/catalog.h"|server/auth/ may not use domain/
server/workers/expiry.c|#include "api/api.h"|server/workers/ may not use api/
server/workers/expiry.c|#include "http/server.h"|server/workers/ may not use http/
server/api/users.c|#include "http/server.h"|server/api/ may not use http/
server/api/users.c|#include <libpq-fe.h>|may not use libpq; it belongs to server/db/
server/db/db.c|#include <argon2.h>|may not use argon2; it belongs to server/auth/
lib/core/log.c|#include <openssl/sha.h>|lib/core/ may not use openssl; it belongs to lib/crypto/
server/auth/token.c|#include <openssl/sha.h>|server/auth/ may not use openssl; it belongs to lib/crypto/
client/cli/main.c|#include <openssl/evp.h>|client/cli/ may not use openssl; it belongs to lib/crypto/
client/agent/push.c|#include <openssl/hmac.h>|client/agent/ may not use openssl; it belongs to lib/crypto/
server/workers/pusher.c|#include <openssl/hmac.h>|server/workers/ may not use openssl; it belongs to lib/crypto/
lib/crypto/digest.c|#include "core/log.h"|lib/crypto/ may not use core/
server/db/db.c|#include "crypto/digest.h"|server/db/ may not use crypto/
client/k8s/main.c|#include "crypto/digest.h"|client/k8s/ may not use crypto/
server/workers/pusher.c|#include "auth/token.h"|server/workers/ may not use auth/
server/api/users.c|#include <curl/curl.h>|server/api/ may not use curl; it belongs to client/k8s/ client/lib/ server/workers/
client/cli/main.c|#include <curl/curl.h>|client/cli/ may not use curl
client/cli/main.c|#include "db/db.h"|client/cli/ may not use db/
client/agent/push.c|#include <libpq-fe.h>|client/agent/ may not use libpq
client/agent/agent.c|#include "service/pool_service.h"|client/agent/ may not use service/
client/cli/main.c|#include <microhttpd.h>|client/cli/ may not use microhttpd
server/api/users.c|#include "../db/db.h"|no relative paths
server/api/users.c|#include "db/db_internal.h"|a header private to db/
server/main.c|#include "api/capacity.h"|a header private to api/
server/main.c|#include "api/routes.h"|a header private to api/
server/api/users.c|#include <postgresql/libpq-fe.h>|server/api/ may not use libpq; it belongs to server/db/
server/api/users.c|#include <x86_64-linux-gnu/curl/curl.h>|server/api/ may not use curl
lib/domain/pool.c|#include "server/db/db.h"|lib/domain/ may not use db/
lib/domain/pool.c|#include "./db//db.h"|lib/domain/ may not use db/
client/agent/agent.c|#include "../../server/db/db.h"|no relative paths
lib/core/log.c|#include "http/server.h"|lib/core/ may not use http/
server/http/server.c|#include "auth/token.h"|server/http/ may not use auth/
server/auth/token.c|#include "http/server.h"|server/auth/ may not use http/
server/db/db.c|#include "service/pool_service.h"|server/db/ may not use service/
server/workers/expiry.c|#include <microhttpd.h>|server/workers/ may not use microhttpd
server/db/db.c|#include <curl/curl.h>|server/db/ may not use curl
server/service/pool_service.c|static const char *q = "SELECT id FROM pools WHERE id = $1";|SQL in a string literal
server/api/pools.c|static const char *q = "UPDATE pools SET state = 'x'";|SQL in a string literal
client/cli/main.c|static const char *q = "DELETE FROM users";|SQL in a string literal
server/workers/expiry.c|static const char *q = "INSERT INTO audit_log VALUES (1)";|SQL in a string literal
server/api/users.c|static const char *q = "SELECT pg_notify('x', 'y')";|SQL in a string literal
server/api/pools.c|#include "db/db_approvals.h"|a write-side db/ header in api/
server/api/users.c|#include "server/db//db_approvals.h"|a write-side db/ header in api/
server/api/pool_requests.c|#include "db/db_new_workflow.h"|a write-side db/ header in api/
server/api/billing.c|#include "db/db_billing_write.h"|a write-side db/ header in api/
server/api/agent.c|#include "db/db_agent_write.h"|a write-side db/ header in api/
server/api/telemetry.c|#include "server/db/db_agent_write.h"|a write-side db/ header in api/
CASES

# SQL in server/db/ is where it belongs, and prose is not SQL
printf 'static const char *q = "SELECT 1 FROM pools";\n' >>"$TMP/t/server/db/db.c"
printf 'static const char *m = "could not select a node from the list";\n' >>"$TMP/t/server/api/users.c"
"$TMP/t/scripts/check-boundaries" || { echo "FAIL: SQL in server/db/ or prose refused" >&2; exit 1; }
echo "ok: SQL in server/db/ and prose pass"
fresh

# a service/ folder (not created yet on every branch) has its rule
mkdir -p "$TMP/t/server/service"
printf '#include "domain/spec.h"\n#include "db/db.h"\n#include "core/log.h"\n' \
	>"$TMP/t/server/service/x.c"
"$TMP/t/scripts/check-boundaries" || { echo "FAIL: service/ may use domain, db, core" >&2; exit 1; }
echo "ok: service/ may use domain/, db/, core/"
while IFS='|' read -r file line want; do
	expect_fail "$file" "$line" "$want"
done <<'CASES'
server/service/x.c|#include "workers/batch.h"|server/service/ may not use workers/
server/service/x.c|#include "api/api.h"|server/service/ may not use api/
CASES
rm -r "$TMP/t/server/service"

# a folder without a rule, and an exception that is no longer needed
mkdir -p "$TMP/t/server/billing"
printf '#include "core/log.h"\n' >"$TMP/t/server/billing/accrual.c"
check_fails "server/billing/ has no rule"
rm -r "$TMP/t/server/billing"

sed -i 's|^EXCEPTIONS=(.*|EXCEPTIONS=("server/main.c api/pools.h")|' "$TMP/t/scripts/check-boundaries"
check_fails 'exception "server/main.c api/pools.h" is no longer needed'
echo "all passed"
