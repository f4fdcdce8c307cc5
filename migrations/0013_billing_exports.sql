-- 0013_billing_exports: export jobs (docs/billing.md "Exports"). The
-- worker reads billing_usage in (hour, id) order by keyset pages, so the
-- index below; the file's text is built by the SQL helpers here, so that
-- the same rows always give the same bytes.

CREATE INDEX billing_usage_hour_id_idx ON billing_usage (hour, id);

-- Who asked for the file, how far the worker got (rows and chunks
-- written by the attempt under way are invisible until it commits).
ALTER TABLE billing_exports ADD COLUMN chunks integer;
ALTER TABLE billing_exports ADD COLUMN worker text;

-- One CSV field (RFC 4180): quoted when it holds a comma, quote, CR or
-- LF; NULL is empty.
CREATE FUNCTION gp_csv(v text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN v IS NULL THEN ''
	            WHEN v ~ '[",\r\n]' THEN '"' || replace(v, '"', '""') || '"'
	            ELSE v END
$$;

-- Micro-units as an exact decimal string with six fraction digits
-- ("-1.250000"); gp_dec trims trailing zeros ("-1.25", "0").
CREATE FUNCTION gp_micro(v bigint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT round(v::numeric / 1000000, 6)::text
$$;
CREATE FUNCTION gp_dec(v numeric) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT trim_scale(v)::text
$$;

-- ISO 8601 UTC with a Z ("2026-11-01T00:00:00Z").
CREATE FUNCTION gp_iso(t timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;
