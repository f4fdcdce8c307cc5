-- 0014_server_keys: secrets every replica shares, created once by the
-- first gpupoold that starts (a random value from the kernel, inserted
-- with ON CONFLICT DO NOTHING, so replicas starting together agree).
-- "cursor" keys the HMAC that makes list cursors opaque and unforgeable
-- (docs/api.md, "Lists and pagination").
CREATE TABLE server_keys (
	name       text PRIMARY KEY CHECK (name ~ '^[a-z_]{1,40}$'),
	secret     bytea NOT NULL CHECK (length(secret) >= 32),
	created_at timestamptz NOT NULL DEFAULT now()
);
