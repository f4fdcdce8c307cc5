CREATE EXTENSION IF NOT EXISTS btree_gist WITH SCHEMA public;

COMMENT ON EXTENSION btree_gist IS 'support for indexing common datatypes in GiST';

CREATE FUNCTION public.allocations_check_placement() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
	m_id          text;
	m_full_slices integer;
	p_name        text;
	p_slices      integer;
	p_placements  integer[];
BEGIN
	SELECT gm.id, gm.full_slices, p.name, p.memory_slices, p.placements
	INTO m_id, m_full_slices, p_name, p_slices, p_placements
	FROM gpus g JOIN gpu_models gm ON gm.id = g.model
	LEFT JOIN mig_profiles p ON p.model = gm.id AND p.name = NEW.profile
	WHERE g.id = NEW.gpu_id;
	IF NOT FOUND THEN
		RETURN NEW;     -- the foreign key reports it
	END IF;
	IF NEW.profile = 'full' THEN
		IF NEW.start <> 0 OR NEW.size <> m_full_slices THEN
			RAISE EXCEPTION 'a whole-gpu allocation on % holds slices [0, %)',
				m_id, m_full_slices
				USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_placement';
		END IF;
		RETURN NEW;
	END IF;
	IF p_name IS NULL THEN
		RAISE EXCEPTION 'model % offers no MIG profile %', m_id, NEW.profile
			USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_placement';
	END IF;
	IF NOT (NEW.start = ANY (p_placements)) OR NEW.size <> p_slices THEN
		RAISE EXCEPTION '% on % takes % slices from a start in %, not % from %',
			p_name, m_id, p_slices, p_placements, NEW.size, NEW.start
			USING ERRCODE = 'check_violation', CONSTRAINT = 'allocations_placement';
	END IF;
	RETURN NEW;
END
$$;

CREATE FUNCTION public.allocations_layout_sync() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
	ids bigint[];
BEGIN
	IF TG_OP = 'INSERT' THEN
		PERFORM 1 FROM gpus WHERE id IN (SELECT gpu_id FROM new_rows)
		ORDER BY id FOR NO KEY UPDATE;
		UPDATE gpus g SET layout = s.layout, used_mask = s.used_mask
		FROM (SELECT u.gpu_id AS id,
		             coalesce(string_agg(a.profile || '@' || a.start, ',' ORDER BY a.start), '')
		                 AS layout,
		             coalesce(bit_or(((1 << a.size) - 1) << a.start), 0)::smallint AS used_mask
		      FROM (SELECT DISTINCT gpu_id FROM new_rows) u
		      LEFT JOIN allocations a ON a.gpu_id = u.gpu_id AND a.state <> 'released'
		      GROUP BY u.gpu_id) s
		WHERE g.id = s.id AND (g.layout <> s.layout OR g.used_mask <> s.used_mask);
		RETURN NULL;
	ELSIF TG_OP = 'DELETE' THEN
		SELECT array_agg(DISTINCT gpu_id) INTO ids FROM old_rows;
	ELSE
		SELECT array_agg(DISTINCT x.gpu_id) INTO ids FROM (
			SELECT o.gpu_id FROM old_rows o JOIN new_rows n USING (id)
			WHERE (o.gpu_id, o.profile, o.start, o.size, o.state = 'released')
			      IS DISTINCT FROM (n.gpu_id, n.profile, n.start, n.size, n.state = 'released')
			UNION ALL
			SELECT n.gpu_id FROM old_rows o JOIN new_rows n USING (id)
			WHERE (o.gpu_id, o.profile, o.start, o.size, o.state = 'released')
			      IS DISTINCT FROM (n.gpu_id, n.profile, n.start, n.size, n.state = 'released')
		) x;
	END IF;
	IF ids IS NOT NULL THEN
		PERFORM gpu_layout_refresh(ids);
	END IF;
	RETURN NULL;
END
$$;

CREATE FUNCTION public.audit_doc_compact(doc jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
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

CREATE FUNCTION public.audit_log_compact() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	NEW.before := audit_doc_compact(NEW.before);
	NEW.after := audit_doc_compact(NEW.after);
	RETURN NEW;
END
$$;

CREATE FUNCTION public.gpu_classes_sync() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO gpu_classes AS c (cluster_id, model, mig_enabled, healthy, node_ready,
		                              layout, gpus)
		SELECT cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready', layout,
		       count(*)
		FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (cluster_id, model, mig_enabled, healthy, node_ready, layout)
		DO UPDATE SET gpus = c.gpus + EXCLUDED.gpus;
	ELSIF TG_OP = 'DELETE' THEN
		UPDATE gpu_classes c SET gpus = c.gpus - d.n
		FROM (SELECT cluster_id, model, mig_enabled, health = 'ok' AS healthy,
		             node_status = 'ready' AS node_ready, layout, count(*) AS n
		      FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6) d
		WHERE (c.cluster_id, c.model, c.mig_enabled, c.healthy, c.node_ready, c.layout) =
		      (d.cluster_id, d.model, d.mig_enabled, d.healthy, d.node_ready, d.layout);
	ELSE
		INSERT INTO gpu_classes AS c (cluster_id, model, mig_enabled, healthy, node_ready,
		                              layout, gpus)
		SELECT cluster_id, model, mig_enabled, healthy, node_ready, layout, sum(n)
		FROM (SELECT cluster_id, model, mig_enabled, health = 'ok' AS healthy,
		             node_status = 'ready' AS node_ready, layout, -1 AS n FROM old_rows
		      UNION ALL
		      SELECT cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready',
		             layout, 1 FROM new_rows) d
		GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (cluster_id, model, mig_enabled, healthy, node_ready, layout)
		DO UPDATE SET gpus = c.gpus + EXCLUDED.gpus;
	END IF;
	RETURN NULL;
END
$$;

CREATE FUNCTION public.gpu_layout_refresh(ids bigint[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
	IF ids IS NULL OR cardinality(ids) = 0 THEN
		RETURN;
	END IF;
	PERFORM 1 FROM gpus WHERE id = ANY (ids) ORDER BY id FOR NO KEY UPDATE;
	UPDATE gpus g SET layout = s.layout, used_mask = s.used_mask
	FROM (SELECT u.id,
	             coalesce(string_agg(a.profile || '@' || a.start, ',' ORDER BY a.start), '')
	                 AS layout,
	             coalesce(bit_or(((1 << a.size) - 1) << a.start), 0)::smallint AS used_mask
	      FROM unnest(ids) AS u (id)
	      LEFT JOIN allocations a ON a.gpu_id = u.id AND a.state <> 'released'
	      GROUP BY u.id) s
	WHERE g.id = s.id AND (g.layout <> s.layout OR g.used_mask <> s.used_mask);
END
$$;

CREATE FUNCTION public.gpus_from_node() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	SELECT n.cluster_id, n.status INTO NEW.cluster_id, NEW.node_status
	FROM nodes n WHERE n.id = NEW.node_id;
	RETURN NEW;
END
$$;

CREATE FUNCTION public.nodes_status_to_gpus() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	UPDATE gpus SET node_status = NEW.status, cluster_id = NEW.cluster_id
	WHERE node_id = NEW.id;
	RETURN NULL;
END
$$;

CREATE FUNCTION public.pools_check(ok boolean, what text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
	IF ok IS NOT TRUE THEN
		RAISE EXCEPTION 'the approval found % changed; retrying', what
			USING ERRCODE = 'serialization_failure';
	END IF;
	RETURN true;
END
$$;

CREATE TABLE public.allocations (
    id bigint NOT NULL,
    gpu_id bigint NOT NULL,
    profile text NOT NULL,
    start integer NOT NULL,
    size integer NOT NULL,
    state text DEFAULT 'reserved'::text NOT NULL,
    pool_id bigint,
    device_uuid text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    released_at timestamp with time zone,
    request_id bigint,
    release_request_id bigint,
    CONSTRAINT allocations_size_check CHECK ((size > 0)),
    CONSTRAINT allocations_start_check CHECK ((start >= 0)),
    CONSTRAINT allocations_state_check CHECK ((state = ANY (ARRAY['reserved'::text, 'provisioning'::text, 'ready'::text, 'failed'::text, 'releasing'::text, 'released'::text]))),
    CONSTRAINT allocations_within_gpu CHECK (((start + size) <= 8))
);

ALTER TABLE public.allocations ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.allocations_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.audit_log (
    id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    actor_id bigint,
    actor text,
    action text NOT NULL,
    object_type text NOT NULL,
    object_id text NOT NULL,
    project_id bigint,
    request_id text,
    before jsonb,
    after jsonb
);

ALTER TABLE public.audit_log ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.audit_log_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.clusters (
    id bigint NOT NULL,
    name text NOT NULL,
    region text DEFAULT ''::text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    generation bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT clusters_description_check CHECK ((length(description) <= 500)),
    CONSTRAINT clusters_name_check CHECK ((name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'::text)),
    CONSTRAINT clusters_region_check CHECK ((length(region) <= 63))
);

ALTER TABLE public.clusters ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.clusters_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.gpu_classes (
    cluster_id bigint NOT NULL,
    model text NOT NULL,
    mig_enabled boolean NOT NULL,
    healthy boolean NOT NULL,
    node_ready boolean NOT NULL,
    layout text NOT NULL,
    gpus integer NOT NULL
);

CREATE TABLE public.gpu_models (
    id text NOT NULL,
    memory_mib integer NOT NULL,
    mig_capable boolean NOT NULL,
    memory_slices integer NOT NULL,
    compute_slices integer NOT NULL,
    full_slices integer NOT NULL,
    product_names text[] NOT NULL,
    pci_device_ids text[] NOT NULL,
    CONSTRAINT gpu_models_check CHECK ((mig_capable = (memory_slices > 0))),
    CONSTRAINT gpu_models_compute_slices_check CHECK (((compute_slices >= 0) AND (compute_slices <= 8))),
    CONSTRAINT gpu_models_full_slices_check CHECK (((full_slices >= 1) AND (full_slices <= 8))),
    CONSTRAINT gpu_models_memory_mib_check CHECK ((memory_mib > 0)),
    CONSTRAINT gpu_models_memory_slices_check CHECK (((memory_slices >= 0) AND (memory_slices <= 8)))
);

CREATE TABLE public.gpus (
    id bigint NOT NULL,
    node_id bigint NOT NULL,
    cluster_id bigint NOT NULL,
    gpu_index integer NOT NULL,
    uuid text NOT NULL,
    model text NOT NULL,
    memory_mib integer NOT NULL,
    mig_enabled boolean DEFAULT false NOT NULL,
    health text DEFAULT 'ok'::text NOT NULL,
    health_reason text,
    node_status text NOT NULL,
    layout text DEFAULT ''::text NOT NULL,
    used_mask smallint DEFAULT 0 NOT NULL,
    generation bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT gpus_gpu_index_check CHECK (((gpu_index >= 0) AND (gpu_index <= 15))),
    CONSTRAINT gpus_health_check CHECK ((health = ANY (ARRAY['ok'::text, 'degraded'::text, 'failed'::text]))),
    CONSTRAINT gpus_memory_mib_check CHECK ((memory_mib > 0)),
    CONSTRAINT gpus_used_mask_check CHECK (((used_mask >= 0) AND (used_mask <= 255))),
    CONSTRAINT gpus_uuid_check CHECK ((uuid ~ '^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'::text))
);

ALTER TABLE public.gpus ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.gpus_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.idempotency_keys (
    user_id bigint NOT NULL,
    key text NOT NULL,
    request_hash bytea NOT NULL,
    state text NOT NULL,
    status integer,
    content_type text,
    etag text,
    location text,
    body bytea,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_by text,
    CONSTRAINT idempotency_keys_state_check CHECK ((state = ANY (ARRAY['committed'::text, 'done'::text])))
);

CREATE TABLE public.login_failures (
    key text NOT NULL,
    failures integer NOT NULL,
    window_start timestamp with time zone NOT NULL
);

CREATE TABLE public.mig_profiles (
    model text NOT NULL,
    name text NOT NULL,
    profile_id integer NOT NULL,
    compute_slices integer NOT NULL,
    memory_slices integer NOT NULL,
    max_instances integer NOT NULL,
    sm_count integer NOT NULL,
    memory_mib integer NOT NULL,
    placements integer[] NOT NULL,
    media_extensions boolean NOT NULL,
    confirmed boolean NOT NULL,
    CONSTRAINT mig_profiles_compute_slices_check CHECK ((compute_slices > 0)),
    CONSTRAINT mig_profiles_max_instances_check CHECK ((max_instances > 0)),
    CONSTRAINT mig_profiles_memory_slices_check CHECK (((memory_slices >= 1) AND (memory_slices <= 8))),
    CONSTRAINT mig_profiles_placements_check CHECK ((cardinality(placements) > 0))
);

CREATE TABLE public.nodes (
    id bigint NOT NULL,
    cluster_id bigint NOT NULL,
    name text NOT NULL,
    hostname text NOT NULL,
    status text DEFAULT 'ready'::text NOT NULL,
    status_reason text,
    cpu_millicores bigint NOT NULL,
    memory_bytes bigint NOT NULL,
    labels jsonb DEFAULT '{}'::jsonb NOT NULL,
    agent_version text,
    agent_heartbeat_at timestamp with time zone,
    generation bigint DEFAULT 1 NOT NULL,
    observed_generation bigint DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT nodes_cpu_millicores_check CHECK ((cpu_millicores >= 0)),
    CONSTRAINT nodes_hostname_check CHECK (((length(hostname) >= 1) AND (length(hostname) <= 253))),
    CONSTRAINT nodes_labels_check CHECK ((jsonb_typeof(labels) = 'object'::text)),
    CONSTRAINT nodes_memory_bytes_check CHECK ((memory_bytes >= 0)),
    CONSTRAINT nodes_name_check CHECK ((name ~ '^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$'::text)),
    CONSTRAINT nodes_status_check CHECK ((status = ANY (ARRAY['ready'::text, 'cordoned'::text, 'draining'::text, 'down'::text, 'unknown'::text])))
);

ALTER TABLE public.nodes ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.nodes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.outbox (
    id bigint NOT NULL,
    node_id bigint NOT NULL,
    generation bigint NOT NULL,
    kind text DEFAULT 'desired_state'::text NOT NULL,
    request_id bigint,
    pool_id bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    delivered_at timestamp with time zone,
    last_error text
);

ALTER TABLE public.outbox ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.pool_request_events (
    id bigint NOT NULL,
    request_id bigint NOT NULL,
    at timestamp with time zone DEFAULT now() NOT NULL,
    from_state text,
    to_state text NOT NULL,
    actor_id bigint,
    actor text,
    note text
);

ALTER TABLE public.pool_request_events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.pool_request_events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.pool_requests (
    id bigint NOT NULL,
    project_id bigint NOT NULL,
    pool_id bigint NOT NULL,
    action text NOT NULL,
    items jsonb DEFAULT '[]'::jsonb NOT NULL,
    justification text DEFAULT ''::text NOT NULL,
    ends_at timestamp with time zone,
    state text DEFAULT 'pending'::text NOT NULL,
    requested_by bigint,
    requested_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    decided_by bigint,
    decided_at timestamp with time zone,
    note text,
    generation bigint DEFAULT 1 NOT NULL,
    CONSTRAINT pool_requests_action_check CHECK ((action = ANY (ARRAY['create'::text, 'expand'::text, 'shrink'::text, 'release'::text]))),
    CONSTRAINT pool_requests_check CHECK (((action = 'release'::text) = (items = '[]'::jsonb))),
    CONSTRAINT pool_requests_items_check CHECK ((jsonb_typeof(items) = 'array'::text)),
    CONSTRAINT pool_requests_justification_check CHECK ((length(justification) <= 2000)),
    CONSTRAINT pool_requests_note_check CHECK ((length(note) <= 2000)),
    CONSTRAINT pool_requests_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'approved'::text, 'fulfilled'::text, 'failed'::text, 'rejected'::text, 'cancelled'::text, 'expired'::text])))
);

ALTER TABLE public.pool_requests ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.pool_requests_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.pools (
    id bigint NOT NULL,
    project_id bigint NOT NULL,
    name text NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    items jsonb DEFAULT '[]'::jsonb NOT NULL,
    ends_at timestamp with time zone,
    generation bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    released_at timestamp with time zone,
    CONSTRAINT pools_items_check CHECK ((jsonb_typeof(items) = 'array'::text)),
    CONSTRAINT pools_name_check CHECK ((name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'::text)),
    CONSTRAINT pools_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'provisioning'::text, 'active'::text, 'degraded'::text, 'releasing'::text, 'released'::text])))
);

ALTER TABLE public.pools ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.pools_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.project_members (
    project_id bigint NOT NULL,
    user_id bigint NOT NULL,
    role text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT project_members_role_check CHECK ((role = ANY (ARRAY['owner'::text, 'member'::text, 'viewer'::text])))
);

CREATE TABLE public.project_namespaces (
    project_id bigint NOT NULL,
    namespace text NOT NULL,
    CONSTRAINT project_namespaces_namespace_check CHECK ((namespace ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'::text))
);

CREATE TABLE public.project_quotas (
    project_id bigint NOT NULL,
    items jsonb NOT NULL,
    generation bigint DEFAULT 1 NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT project_quotas_items_check CHECK ((jsonb_typeof(items) = 'array'::text))
);

CREATE TABLE public.projects (
    id bigint NOT NULL,
    name text NOT NULL,
    display_name text NOT NULL,
    generation bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT projects_display_name_check CHECK (((length(display_name) >= 1) AND (length(display_name) <= 200))),
    CONSTRAINT projects_name_check CHECK ((name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'::text))
);

ALTER TABLE public.projects ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.projects_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.schema_migrations (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    checksum text
);

CREATE TABLE public.tokens (
    id bigint NOT NULL,
    user_id bigint NOT NULL,
    kind text NOT NULL,
    name text NOT NULL,
    digest bytea NOT NULL,
    prefix text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    last_used_at timestamp with time zone,
    CONSTRAINT tokens_digest_check CHECK ((length(digest) = 32)),
    CONSTRAINT tokens_kind_check CHECK ((kind = ANY (ARRAY['session'::text, 'api'::text])))
);

ALTER TABLE public.tokens ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.usage_ledger (
    id bigint NOT NULL,
    pool_id bigint NOT NULL,
    project_id bigint NOT NULL,
    model text NOT NULL,
    profile text NOT NULL,
    count integer NOT NULL,
    started_at timestamp with time zone NOT NULL,
    ended_at timestamp with time zone,
    opened_by bigint NOT NULL,
    closed_by bigint,
    CONSTRAINT usage_ledger_check CHECK (((ended_at IS NULL) OR (ended_at >= started_at))),
    CONSTRAINT usage_ledger_count_check CHECK ((count > 0))
);

ALTER TABLE public.usage_ledger ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.usage_ledger_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.users (
    id bigint NOT NULL,
    username text NOT NULL,
    password_hash text NOT NULL,
    role text DEFAULT 'none'::text NOT NULL,
    disabled boolean DEFAULT false NOT NULL,
    generation bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT users_role_check CHECK ((role = ANY (ARRAY['admin'::text, 'operator'::text, 'billing'::text, 'none'::text]))),
    CONSTRAINT users_username_check CHECK ((username ~ '^[a-z0-9][a-z0-9._-]{0,62}$'::text))
);

ALTER TABLE public.users ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.users_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE ONLY public.allocations
    ADD CONSTRAINT allocations_no_overlap EXCLUDE USING gist (gpu_id WITH =, int4range(start, (start + size)) WITH &&) WHERE ((state <> 'released'::text));

ALTER TABLE ONLY public.allocations
    ADD CONSTRAINT allocations_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.clusters
    ADD CONSTRAINT clusters_name_key UNIQUE (name);

ALTER TABLE ONLY public.clusters
    ADD CONSTRAINT clusters_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.gpu_classes
    ADD CONSTRAINT gpu_classes_pkey PRIMARY KEY (cluster_id, model, mig_enabled, healthy, node_ready, layout);

ALTER TABLE ONLY public.gpu_models
    ADD CONSTRAINT gpu_models_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.gpus
    ADD CONSTRAINT gpus_node_id_gpu_index_key UNIQUE (node_id, gpu_index);

ALTER TABLE ONLY public.gpus
    ADD CONSTRAINT gpus_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.gpus
    ADD CONSTRAINT gpus_uuid_key UNIQUE (uuid);

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (user_id, key);

ALTER TABLE ONLY public.login_failures
    ADD CONSTRAINT login_failures_pkey PRIMARY KEY (key);

ALTER TABLE ONLY public.mig_profiles
    ADD CONSTRAINT mig_profiles_pkey PRIMARY KEY (model, name);

ALTER TABLE ONLY public.nodes
    ADD CONSTRAINT nodes_name_key UNIQUE (name);

ALTER TABLE ONLY public.nodes
    ADD CONSTRAINT nodes_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.pool_request_events
    ADD CONSTRAINT pool_request_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.pool_requests
    ADD CONSTRAINT pool_requests_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.pools
    ADD CONSTRAINT pools_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.project_members
    ADD CONSTRAINT project_members_pkey PRIMARY KEY (project_id, user_id);

ALTER TABLE ONLY public.project_namespaces
    ADD CONSTRAINT project_namespaces_pkey PRIMARY KEY (namespace);

ALTER TABLE ONLY public.project_quotas
    ADD CONSTRAINT project_quotas_pkey PRIMARY KEY (project_id);

ALTER TABLE ONLY public.projects
    ADD CONSTRAINT projects_name_key UNIQUE (name);

ALTER TABLE ONLY public.projects
    ADD CONSTRAINT projects_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_digest_key UNIQUE (digest);

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.usage_ledger
    ADD CONSTRAINT usage_ledger_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_username_key UNIQUE (username);

CREATE INDEX allocations_gpu_live_idx ON public.allocations USING btree (gpu_id, start) WHERE (state <> 'released'::text);

CREATE INDEX allocations_pool_idx ON public.allocations USING btree (pool_id) WHERE (pool_id IS NOT NULL);

CREATE INDEX allocations_request_idx ON public.allocations USING btree (request_id) WHERE (request_id IS NOT NULL);

CREATE INDEX audit_log_action_idx ON public.audit_log USING btree (action, id);

CREATE INDEX audit_log_actor_idx ON public.audit_log USING btree (actor, id);

CREATE INDEX audit_log_project_idx ON public.audit_log USING btree (project_id, id);

CREATE INDEX gpus_cluster_idx ON public.gpus USING btree (cluster_id, id);

CREATE INDEX gpus_model_idx ON public.gpus USING btree (model, id);

CREATE INDEX gpus_placeable_cluster_idx ON public.gpus USING btree (model, cluster_id, mig_enabled, layout, node_id, gpu_index, id) WHERE ((health = 'ok'::text) AND (node_status = 'ready'::text));

CREATE INDEX gpus_placeable_idx ON public.gpus USING btree (model, mig_enabled, layout, node_id, gpu_index, id) WHERE ((health = 'ok'::text) AND (node_status = 'ready'::text));

CREATE INDEX idempotency_keys_created_idx ON public.idempotency_keys USING btree (created_at);

CREATE INDEX nodes_cluster_idx ON public.nodes USING btree (cluster_id, id);

CREATE INDEX nodes_labels_idx ON public.nodes USING gin (labels jsonb_path_ops);

CREATE INDEX nodes_status_idx ON public.nodes USING btree (status, id);

CREATE INDEX outbox_node_idx ON public.outbox USING btree (node_id, id);

CREATE INDEX outbox_pending_idx ON public.outbox USING btree (next_attempt_at, id) WHERE (delivered_at IS NULL);

CREATE INDEX pool_request_events_request_idx ON public.pool_request_events USING btree (request_id, id);

CREATE INDEX pool_requests_expiry_idx ON public.pool_requests USING btree (expires_at) WHERE (state = 'pending'::text);

CREATE INDEX pool_requests_pending_idx ON public.pool_requests USING btree (id) WHERE (state = 'pending'::text);

CREATE INDEX pool_requests_pool_idx ON public.pool_requests USING btree (pool_id, id);

CREATE INDEX pool_requests_project_idx ON public.pool_requests USING btree (project_id, id);

CREATE INDEX pools_ends_at_idx ON public.pools USING btree (ends_at) WHERE ((ends_at IS NOT NULL) AND (status = ANY (ARRAY['provisioning'::text, 'active'::text, 'degraded'::text])));

CREATE INDEX pools_project_idx ON public.pools USING btree (project_id, id);

CREATE UNIQUE INDEX pools_project_name_key ON public.pools USING btree (project_id, name) WHERE (status <> 'released'::text);

CREATE INDEX pools_settle_idx ON public.pools USING btree (status, id) WHERE (status = ANY (ARRAY['provisioning'::text, 'releasing'::text]));

CREATE INDEX project_members_user_idx ON public.project_members USING btree (user_id);

CREATE INDEX project_namespaces_project_idx ON public.project_namespaces USING btree (project_id);

CREATE INDEX tokens_user_idx ON public.tokens USING btree (user_id, id);

CREATE INDEX usage_ledger_open_idx ON public.usage_ledger USING btree (pool_id, model, profile) WHERE (ended_at IS NULL);

CREATE INDEX usage_ledger_project_idx ON public.usage_ledger USING btree (project_id, started_at);

CREATE TRIGGER allocations_check_placement BEFORE INSERT OR UPDATE OF gpu_id, profile, start, size ON public.allocations FOR EACH ROW EXECUTE FUNCTION public.allocations_check_placement();

CREATE TRIGGER allocations_layout_delete AFTER DELETE ON public.allocations REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.allocations_layout_sync();

CREATE TRIGGER allocations_layout_insert AFTER INSERT ON public.allocations REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.allocations_layout_sync();

CREATE TRIGGER allocations_layout_update AFTER UPDATE ON public.allocations REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.allocations_layout_sync();

CREATE TRIGGER audit_log_compact BEFORE INSERT ON public.audit_log FOR EACH ROW WHEN (((COALESCE(jsonb_array_length(
        CASE
            WHEN (jsonb_typeof((new.after -> 'allocations'::text)) = 'array'::text) THEN (new.after -> 'allocations'::text)
            ELSE NULL::jsonb
        END), 0) > 32) OR (COALESCE(jsonb_array_length(
        CASE
            WHEN (jsonb_typeof((new.before -> 'allocations'::text)) = 'array'::text) THEN (new.before -> 'allocations'::text)
            ELSE NULL::jsonb
        END), 0) > 32))) EXECUTE FUNCTION public.audit_log_compact();

CREATE TRIGGER gpu_classes_delete AFTER DELETE ON public.gpus REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION public.gpu_classes_sync();

CREATE TRIGGER gpu_classes_insert AFTER INSERT ON public.gpus REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.gpu_classes_sync();

CREATE TRIGGER gpu_classes_update AFTER UPDATE ON public.gpus REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION public.gpu_classes_sync();

CREATE TRIGGER gpus_from_node BEFORE INSERT OR UPDATE OF node_id ON public.gpus FOR EACH ROW EXECUTE FUNCTION public.gpus_from_node();

CREATE TRIGGER nodes_status_to_gpus AFTER UPDATE OF status, cluster_id ON public.nodes FOR EACH ROW WHEN (((old.status IS DISTINCT FROM new.status) OR (old.cluster_id IS DISTINCT FROM new.cluster_id))) EXECUTE FUNCTION public.nodes_status_to_gpus();

ALTER TABLE ONLY public.allocations
    ADD CONSTRAINT allocations_gpu_id_fkey FOREIGN KEY (gpu_id) REFERENCES public.gpus(id);

ALTER TABLE ONLY public.allocations
    ADD CONSTRAINT allocations_pool_fkey FOREIGN KEY (pool_id) REFERENCES public.pools(id);

ALTER TABLE ONLY public.gpus
    ADD CONSTRAINT gpus_cluster_id_fkey FOREIGN KEY (cluster_id) REFERENCES public.clusters(id);

ALTER TABLE ONLY public.gpus
    ADD CONSTRAINT gpus_model_fkey FOREIGN KEY (model) REFERENCES public.gpu_models(id);

ALTER TABLE ONLY public.gpus
    ADD CONSTRAINT gpus_node_id_fkey FOREIGN KEY (node_id) REFERENCES public.nodes(id);

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.mig_profiles
    ADD CONSTRAINT mig_profiles_model_fkey FOREIGN KEY (model) REFERENCES public.gpu_models(id);

ALTER TABLE ONLY public.nodes
    ADD CONSTRAINT nodes_cluster_id_fkey FOREIGN KEY (cluster_id) REFERENCES public.clusters(id);

ALTER TABLE ONLY public.outbox
    ADD CONSTRAINT outbox_node_id_fkey FOREIGN KEY (node_id) REFERENCES public.nodes(id);

ALTER TABLE ONLY public.pool_request_events
    ADD CONSTRAINT pool_request_events_request_id_fkey FOREIGN KEY (request_id) REFERENCES public.pool_requests(id);

ALTER TABLE ONLY public.pool_requests
    ADD CONSTRAINT pool_requests_pool_id_fkey FOREIGN KEY (pool_id) REFERENCES public.pools(id);

ALTER TABLE ONLY public.pool_requests
    ADD CONSTRAINT pool_requests_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

ALTER TABLE ONLY public.pools
    ADD CONSTRAINT pools_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id);

ALTER TABLE ONLY public.project_members
    ADD CONSTRAINT project_members_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.project_members
    ADD CONSTRAINT project_members_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.project_namespaces
    ADD CONSTRAINT project_namespaces_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.project_quotas
    ADD CONSTRAINT project_quotas_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.usage_ledger
    ADD CONSTRAINT usage_ledger_pool_id_fkey FOREIGN KEY (pool_id) REFERENCES public.pools(id);

