-- 0006_audit_compact: large audit documents are stored compactly.
-- An approval of thousands of GPUs wrote its whole allocation list
-- into the audit row (about 1 MB each), and reading such rows back is
-- what made GET /v1/audit slow and memory-hungry. Every writer of
-- audit_log (the API's audit rows, the approval, release and expiry
-- statements) goes through this trigger, so none of them changes: a
-- top-level "allocations" array of more than 32 entries in "before" or
-- "after" is replaced by "allocations_summary": the count, the distinct
-- GPUs and nodes, the count per model, profile and state, and where
-- the full list is (the pool: GET /v1/pools/{pool_id}; each allocation
-- carries its request id). Small documents are stored as they come.

CREATE FUNCTION audit_doc_compact(doc jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE
	WHEN jsonb_typeof(doc -> 'allocations') = 'array'
	     AND jsonb_array_length(doc -> 'allocations') > 32 THEN
		(doc - 'allocations') || jsonb_build_object('allocations_summary', (
			SELECT jsonb_build_object(
				'count', count(*),
				'gpus', count(DISTINCT e ->> 'gpu_uuid'),
				'nodes', count(DISTINCT e ->> 'node'),
				'by_spec', (
					SELECT jsonb_agg(jsonb_build_object('model', s.model,
						'profile', s.profile, 'state', s.state, 'count', s.n)
						ORDER BY s.model, s.profile, s.state)
					FROM (SELECT x ->> 'model' AS model, x ->> 'profile' AS profile,
					             x ->> 'state' AS state, count(*) AS n
					      FROM jsonb_array_elements(doc -> 'allocations') x
					      GROUP BY 1, 2, 3) s),
				'full_list', CASE WHEN doc ? 'pool_id'
				                  THEN '/v1/pools/' || (doc ->> 'pool_id') END)
			FROM jsonb_array_elements(doc -> 'allocations') e))
	ELSE doc
	END
$$;

CREATE FUNCTION audit_log_compact() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.before := audit_doc_compact(NEW.before);
	NEW.after := audit_doc_compact(NEW.after);
	RETURN NEW;
END
$$;

-- fires only for a large list: small documents pay the WHEN test alone
CREATE TRIGGER audit_log_compact BEFORE INSERT ON audit_log FOR EACH ROW
WHEN (coalesce(jsonb_array_length(CASE WHEN jsonb_typeof(NEW.after -> 'allocations') = 'array'
                                       THEN NEW.after -> 'allocations' END), 0) > 32
      OR coalesce(jsonb_array_length(CASE WHEN jsonb_typeof(NEW.before -> 'allocations') = 'array'
                                          THEN NEW.before -> 'allocations' END), 0) > 32)
EXECUTE FUNCTION audit_log_compact();
