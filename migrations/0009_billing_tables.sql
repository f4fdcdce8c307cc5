-- 0009_billing_tables: the billing tables (docs/billing.md). Accrual,
-- credits, periods, adjustments and exports fill and guard them (their
-- functions and triggers come with the billing code). Money is integer
-- micro-units of a currency; hours are UTC hour starts.

-- A list price per hour of one (model, profile): a version in effect
-- from effective_from until the next version of the same key starts.
CREATE TABLE billing_rates (
	id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	model                text NOT NULL REFERENCES gpu_models (id),
	profile              text NOT NULL CHECK (length(profile) BETWEEN 1 AND 40),
	currency             text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
	price_per_hour_micro bigint NOT NULL CHECK (price_per_hour_micro >= 0),
	effective_from       timestamptz NOT NULL,
	created_at           timestamptz NOT NULL DEFAULT now(),
	created_by           bigint REFERENCES users (id),
	UNIQUE (model, profile, effective_from)
);

-- UTC months. A period with no row is open.
CREATE TABLE billing_periods (
	period    text PRIMARY KEY CHECK (period ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
	state     text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed')),
	closed_at timestamptz,
	closed_by bigint REFERENCES users (id),
	CHECK ((state = 'closed') = (closed_at IS NOT NULL))
);

-- Hourly rows. kind 'usage': the list charge of count instances held
-- for seconds of hour at rate; 'credit': the failed-GPU part of it
-- (amount_micro < 0); 'adjustment': a correction entered by billing,
-- referencing what it corrects (adjusts). period = the UTC month of hour.
CREATE TABLE billing_usage (
	id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind                 text NOT NULL CHECK (kind IN ('usage', 'credit', 'adjustment')),
	project_id           bigint NOT NULL REFERENCES projects (id),
	pool_id              bigint REFERENCES pools (id),
	model                text NOT NULL,
	profile              text NOT NULL,
	hour                 timestamptz NOT NULL,
	period               text NOT NULL,
	rate_id              bigint REFERENCES billing_rates (id),
	price_per_hour_micro bigint NOT NULL,
	currency             text NOT NULL,
	seconds              bigint NOT NULL CHECK (seconds BETWEEN 0 AND 3600),
	count                integer NOT NULL CHECK (count >= 0),
	amount_micro         bigint NOT NULL,
	adjusts              bigint REFERENCES billing_usage (id),
	note                 text,
	created_at           timestamptz NOT NULL DEFAULT now(),
	updated_at           timestamptz NOT NULL DEFAULT now(),
	CHECK (date_trunc('hour', hour AT TIME ZONE 'UTC') = hour AT TIME ZONE 'UTC')
);
CREATE INDEX billing_usage_project_hour_idx ON billing_usage (project_id, hour);
CREATE INDEX billing_usage_period_idx ON billing_usage (period, id);
CREATE INDEX billing_usage_pool_hour_idx ON billing_usage (pool_id, hour);

-- Export jobs: the file is kept in the database (chunks), so that any
-- replica can stream it.
CREATE TABLE billing_exports (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	format       text NOT NULL CHECK (format IN ('csv', 'jsonl', 'focus')),
	period       text,
	range_from   timestamptz,
	range_to     timestamptz,
	state        text NOT NULL DEFAULT 'queued'
	             CHECK (state IN ('queued', 'running', 'done', 'failed')),
	rows         bigint,
	bytes        bigint,
	sha256       text,
	error        text,
	lease_until  timestamptz,
	attempts     integer NOT NULL DEFAULT 0,
	created_by   bigint REFERENCES users (id),
	created_at   timestamptz NOT NULL DEFAULT now(),
	started_at   timestamptz,
	finished_at  timestamptz,
	CHECK ((period IS NOT NULL) <> (range_from IS NOT NULL AND range_to IS NOT NULL))
);
CREATE INDEX billing_exports_queued_idx ON billing_exports (id) WHERE state IN ('queued', 'running');

CREATE TABLE billing_export_chunks (
	export_id bigint NOT NULL REFERENCES billing_exports (id) ON DELETE CASCADE,
	seq       integer NOT NULL,
	data      bytea NOT NULL,
	PRIMARY KEY (export_id, seq)
);
