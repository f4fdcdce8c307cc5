-- 0004_pools_check: an assertion for statements that commit in the same
-- round trip as they run (db_exec_commit), so that their caller cannot
-- look at their result before COMMIT: the approval statement checks that
-- it changed exactly what it was decided on (the request was pending, the
-- allocations were inserted or freed as chosen) and fails otherwise.
-- serialization_failure: the transaction is rolled back and retried from
-- the start, re-reading everything (db_tx), as after any lost race.

CREATE FUNCTION pools_check(ok boolean, what text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	IF ok IS NOT TRUE THEN
		RAISE EXCEPTION 'the approval found % changed; retrying', what
			USING ERRCODE = 'serialization_failure';
	END IF;
	RETURN true;
END
$$;
