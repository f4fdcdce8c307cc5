-- 0003_pools: project quotas, GPU pools, pool requests and their history,
-- the usage ledger and the outbox of desired-state changes per node.
--
-- The approval of a request changes, in one transaction: the request,
-- its history, allocations (0002), the pool's SpecAndCount, the usage
-- ledger, the affected nodes' generation, the outbox and the audit log
-- (see docs/pools.md). Items are canonical JSON arrays of SpecAndCount,
-- [{"model":"H100-80GB","profile":"3g.40gb","count":2}, ...], one entry
-- per (model, profile), sorted by model then profile.

-- A project's quota: the most it may hold of each (model, profile).
-- No row: no limit. A row: every kind it does not list is limited to 0.
CREATE TABLE project_quotas (
	project_id bigint PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
	items      jsonb NOT NULL CHECK (jsonb_typeof(items) = 'array'),
	generation bigint NOT NULL DEFAULT 1,
	updated_at timestamptz NOT NULL DEFAULT now()
);

-- A project's dedicated resources. A pool is created (status pending) by
-- the submission of its create request; items are what approved
-- requests gave it, so a pending pool holds none. A released pool keeps
-- its row (history, billing) and frees its name.
CREATE TABLE pools (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	project_id bigint NOT NULL REFERENCES projects (id),
	name       text NOT NULL CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
	status     text NOT NULL DEFAULT 'pending'
	           CHECK (status IN ('pending', 'provisioning', 'active', 'degraded',
	                             'releasing', 'released')),
	items      jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(items) = 'array'),
	ends_at    timestamptz,
	generation bigint NOT NULL DEFAULT 1,
	created_at timestamptz NOT NULL DEFAULT now(),
	updated_at timestamptz NOT NULL DEFAULT now(),
	released_at timestamptz
);
CREATE UNIQUE INDEX pools_project_name_key ON pools (project_id, name) WHERE status <> 'released';
CREATE INDEX pools_project_idx ON pools (project_id, id);
-- the expiry worker: time-bounded pools still holding resources
CREATE INDEX pools_ends_at_idx ON pools (ends_at)
	WHERE ends_at IS NOT NULL AND status IN ('provisioning', 'active', 'degraded');
CREATE INDEX pools_settle_idx ON pools (status, id) WHERE status IN ('provisioning', 'releasing');

-- The approval workflow object. requested_by NULL: the system (a pool
-- reaching its end time). expires_at: when a pending request expires.
--
-- Foreign keys: the structural ones are declared (a request's project
-- and pool, an allocation's pool, a ledger interval's pool, an outbox
-- row's node, an event's request). Columns that only record who or
-- which request did something (requested_by, decided_by, request_id,
-- release_request_id, opened_by, closed_by, the ledger's project and
-- model) are copies written by the same statement that validated them;
-- they carry no constraint, because each one is a per-row trigger on
-- the approval's hot path and none of their targets is ever deleted.
CREATE TABLE pool_requests (
	id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	project_id    bigint NOT NULL REFERENCES projects (id),
	pool_id       bigint NOT NULL REFERENCES pools (id),
	action        text NOT NULL CHECK (action IN ('create', 'expand', 'shrink', 'release')),
	items         jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(items) = 'array'),
	justification text NOT NULL DEFAULT '' CHECK (length(justification) <= 2000),
	ends_at       timestamptz,
	state         text NOT NULL DEFAULT 'pending'
	              CHECK (state IN ('pending', 'approved', 'fulfilled', 'failed',
	                               'rejected', 'cancelled', 'expired')),
	requested_by  bigint,
	requested_at  timestamptz NOT NULL DEFAULT now(),
	expires_at    timestamptz NOT NULL,
	decided_by    bigint,
	decided_at    timestamptz,
	note          text CHECK (length(note) <= 2000),
	generation    bigint NOT NULL DEFAULT 1,
	CHECK ((action = 'release') = (items = '[]'::jsonb))
);
CREATE INDEX pool_requests_project_idx ON pool_requests (project_id, id);
CREATE INDEX pool_requests_pending_idx ON pool_requests (id) WHERE state = 'pending';
CREATE INDEX pool_requests_pool_idx ON pool_requests (pool_id, id);
CREATE INDEX pool_requests_expiry_idx ON pool_requests (expires_at) WHERE state = 'pending';

-- Every transition of a request (the first row: submission, from NULL).
CREATE TABLE pool_request_events (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	request_id bigint NOT NULL REFERENCES pool_requests (id),
	at         timestamptz NOT NULL DEFAULT now(),
	from_state text,
	to_state   text NOT NULL,
	actor_id   bigint,
	actor      text,
	note       text
);
CREATE INDEX pool_request_events_request_idx ON pool_request_events (request_id, id);

-- Allocations belong to pools; request_id made them, release_request_id
-- freed them (moved them to releasing).
ALTER TABLE allocations
	ADD CONSTRAINT allocations_pool_fkey FOREIGN KEY (pool_id) REFERENCES pools (id),
	ADD COLUMN request_id bigint,
	ADD COLUMN release_request_id bigint;
CREATE INDEX allocations_request_idx ON allocations (request_id) WHERE request_id IS NOT NULL;

-- Billable intervals: count instances of (model, profile) held by the
-- pool from started_at (the approval that added them) to ended_at (the
-- approval or end time that removed them; NULL while held). Per
-- (pool, model, profile) the open intervals sum to the pool's item.
-- A shrink closes the kind's open intervals and opens one for what
-- remains, both at the approval timestamp.
CREATE TABLE usage_ledger (
	id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	pool_id           bigint NOT NULL REFERENCES pools (id),
	project_id        bigint NOT NULL,
	model             text NOT NULL,
	profile           text NOT NULL,
	count             integer NOT NULL CHECK (count > 0),
	started_at        timestamptz NOT NULL,
	ended_at          timestamptz,
	opened_by         bigint NOT NULL,
	closed_by         bigint,
	CHECK (ended_at IS NULL OR ended_at >= started_at)
);
CREATE INDEX usage_ledger_open_idx ON usage_ledger (pool_id, model, profile) WHERE ended_at IS NULL;
CREATE INDEX usage_ledger_project_idx ON usage_ledger (project_id, started_at);

-- A node's desired state changed (generation): one row per affected node
-- per approval, written in the approval's transaction, delivered to the
-- node's agent by a worker (agent issue).
CREATE TABLE outbox (
	id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	node_id         bigint NOT NULL REFERENCES nodes (id),
	generation      bigint NOT NULL,
	kind            text NOT NULL DEFAULT 'desired_state',
	request_id      bigint,
	pool_id         bigint,
	created_at      timestamptz NOT NULL DEFAULT now(),
	attempts        integer NOT NULL DEFAULT 0,
	next_attempt_at timestamptz NOT NULL DEFAULT now(),
	delivered_at    timestamptz,
	last_error      text
);
CREATE INDEX outbox_pending_idx ON outbox (next_attempt_at, id) WHERE delivered_at IS NULL;
CREATE INDEX outbox_node_idx ON outbox (node_id, id);
