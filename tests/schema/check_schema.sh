#!/usr/bin/env bash
# A database migrated from zero must match schema/schema.sql exactly
# (normalized pg_dump -s). Regenerate with:
#   scripts/schema-dump build/server/gpupoold > schema/schema.sql
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$1
got=$(mktemp)
trap 'rm -f "$got"' EXIT
"$root/scripts/schema-dump" "$bin" >"$got"
if ! diff -u "$root/schema/schema.sql" "$got"; then
	echo "schema/schema.sql differs from the migrated schema (diff above)" >&2
	exit 1
fi
echo "schema/schema.sql matches the migrations"
