-- 0006_idempotency_in_tx: an Idempotency-Key is claimed inside the
-- transaction of the mutation it protects (docs/architecture.md), no
-- longer in a statement of its own guarded by a session advisory lock.
-- A row is either 'committed' (the mutation committed; its answer is
-- not stored yet, or was lost with a crashed server) or 'done' (the
-- answer is stored and is never replaced). claimed_by names the request
-- that claimed it: only that request may store the answer.

-- 'in_flight' rows belonged to the old claim: their requests are gone.
DELETE FROM idempotency_keys WHERE state = 'in_flight';
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_state_check;
ALTER TABLE idempotency_keys ADD COLUMN claimed_by text;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_state_check
	CHECK (state IN ('committed', 'done'));
