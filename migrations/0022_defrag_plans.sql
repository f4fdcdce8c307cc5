-- 0022_defrag_plans: stored MIG defragmentation plans (docs/capacity.md).
--
-- POST /v1/capacity/defrag-plans computes a plan from the fleet as it is
-- and changes nothing in it; the plan is kept here so that an operator
-- can read it again (GET /v1/capacity/defrag-plans/{id}) and, once
-- applying is built (issue 25 part 3), apply exactly what was reviewed.
-- body is the plan as the API answers it (moves, capacity before and
-- after, tenants touched); state says where it stands.
CREATE TABLE defrag_plans (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	created_by  bigint REFERENCES users (id) ON DELETE SET NULL,
	cluster_id  bigint REFERENCES clusters (id) ON DELETE SET NULL,
	goal        text NOT NULL CHECK (goal IN ('items', 'free_gpus')),
	state       text NOT NULL DEFAULT 'planned'
	            CHECK (state IN ('planned', 'applying', 'applied', 'failed', 'expired')),
	moves       integer NOT NULL CHECK (moves >= 0),
	body        jsonb NOT NULL,
	created_at  timestamptz NOT NULL DEFAULT now(),
	updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX defrag_plans_created_idx ON defrag_plans (created_at);
