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
    CONSTRAINT idempotency_keys_state_check CHECK ((state = ANY (ARRAY['in_flight'::text, 'done'::text])))
);

CREATE TABLE public.login_failures (
    key text NOT NULL,
    failures integer NOT NULL,
    window_start timestamp with time zone NOT NULL
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
    applied_at timestamp with time zone DEFAULT now() NOT NULL
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

ALTER TABLE ONLY public.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (user_id, key);

ALTER TABLE ONLY public.login_failures
    ADD CONSTRAINT login_failures_pkey PRIMARY KEY (key);

ALTER TABLE ONLY public.project_members
    ADD CONSTRAINT project_members_pkey PRIMARY KEY (project_id, user_id);

ALTER TABLE ONLY public.project_namespaces
    ADD CONSTRAINT project_namespaces_pkey PRIMARY KEY (namespace);

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

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.users
    ADD CONSTRAINT users_username_key UNIQUE (username);

CREATE INDEX audit_log_action_idx ON public.audit_log USING btree (action, id);

CREATE INDEX audit_log_actor_idx ON public.audit_log USING btree (actor, id);

CREATE INDEX audit_log_project_idx ON public.audit_log USING btree (project_id, id);

CREATE INDEX idempotency_keys_created_idx ON public.idempotency_keys USING btree (created_at);

CREATE INDEX project_members_user_idx ON public.project_members USING btree (user_id);

CREATE INDEX project_namespaces_project_idx ON public.project_namespaces USING btree (project_id);

CREATE INDEX tokens_user_idx ON public.tokens USING btree (user_id, id);

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.project_members
    ADD CONSTRAINT project_members_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.project_members
    ADD CONSTRAINT project_members_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.project_namespaces
    ADD CONSTRAINT project_namespaces_project_id_fkey FOREIGN KEY (project_id) REFERENCES public.projects(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.tokens
    ADD CONSTRAINT tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES public.users(id) ON DELETE CASCADE;

