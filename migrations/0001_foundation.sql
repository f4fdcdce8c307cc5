-- 0001_foundation: identity, tokens, projects, membership, idempotency, audit.

CREATE TABLE users (
	id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	username      text NOT NULL UNIQUE
	              CHECK (username ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
	password_hash text NOT NULL,
	role          text NOT NULL DEFAULT 'none'
	              CHECK (role IN ('admin', 'operator', 'billing', 'none')),
	disabled      boolean NOT NULL DEFAULT false,
	generation    bigint NOT NULL DEFAULT 1,
	created_at    timestamptz NOT NULL DEFAULT now(),
	updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Bearer tokens. Only the SHA-256 digest of the secret is stored.
CREATE TABLE tokens (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	kind         text NOT NULL CHECK (kind IN ('session', 'api')),
	name         text NOT NULL,
	digest       bytea NOT NULL UNIQUE CHECK (length(digest) = 32),
	prefix       text NOT NULL,
	created_at   timestamptz NOT NULL DEFAULT now(),
	expires_at   timestamptz,
	revoked_at   timestamptz,
	last_used_at timestamptz
);
CREATE INDEX tokens_user_idx ON tokens (user_id, id);

-- Failed logins, per user name and per client address, for rate limiting.
CREATE TABLE login_failures (
	key          text PRIMARY KEY,
	failures     integer NOT NULL,
	window_start timestamptz NOT NULL
);

CREATE TABLE projects (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name         text NOT NULL UNIQUE
	             CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
	display_name text NOT NULL CHECK (length(display_name) BETWEEN 1 AND 200),
	generation   bigint NOT NULL DEFAULT 1,
	created_at   timestamptz NOT NULL DEFAULT now(),
	updated_at   timestamptz NOT NULL DEFAULT now()
);

-- Kubernetes namespaces a project owns; a namespace has one owner.
CREATE TABLE project_namespaces (
	project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
	namespace  text NOT NULL PRIMARY KEY
	           CHECK (namespace ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$')
);
CREATE INDEX project_namespaces_project_idx ON project_namespaces (project_id);

CREATE TABLE project_members (
	project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
	user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	role       text NOT NULL CHECK (role IN ('owner', 'member', 'viewer')),
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (project_id, user_id)
);
CREATE INDEX project_members_user_idx ON project_members (user_id);

-- Idempotency-Key records: per caller, replayed byte for byte.
CREATE TABLE idempotency_keys (
	user_id      bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	key          text NOT NULL,
	request_hash bytea NOT NULL,
	state        text NOT NULL CHECK (state IN ('in_flight', 'done')),
	status       integer,
	content_type text,
	etag         text,
	location     text,
	body         bytea,
	created_at   timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (user_id, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

-- Every mutation, written in the same transaction as the mutation.
CREATE TABLE audit_log (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at          timestamptz NOT NULL DEFAULT now(),
	actor_id    bigint,
	actor       text,
	action      text NOT NULL,
	object_type text NOT NULL,
	object_id   text NOT NULL,
	project_id  bigint,
	request_id  text,
	before      jsonb,
	after       jsonb
);
CREATE INDEX audit_log_action_idx ON audit_log (action, id);
CREATE INDEX audit_log_actor_idx ON audit_log (actor, id);
CREATE INDEX audit_log_project_idx ON audit_log (project_id, id);
