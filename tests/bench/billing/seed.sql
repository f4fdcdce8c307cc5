-- tests/bench/billing/seed.sql - the ledger of scripts/bench-billing:
-- :pools pools in 32 projects, each holding 1-4 whole H100 for :hours
-- hours from 1 October 2026 (start staggered by up to an hour, so that
-- the first and last hours are partial), at one EUR rate. Accrued, that
-- is about :pools x (:hours + 1) hourly rows in period 2026-10.
INSERT INTO projects (name, display_name)
SELECT 'bp' || i, 'Bench project ' || i FROM generate_series(0, 31) AS i;
INSERT INTO pools (project_id, name, status)
SELECT p.id, 'pool-' || i, 'released'
FROM generate_series(1, :pools) AS i JOIN projects p ON p.name = 'bp' || (i % 32);
INSERT INTO billing_rates (model, profile, currency, price_per_hour_micro, effective_from)
VALUES ('H100-80GB', 'full', 'EUR', 2500000, '2026-01-01 00:00:00+00');
INSERT INTO usage_ledger (pool_id, project_id, model, profile, count, started_at, ended_at,
	opened_by)
SELECT po.id, po.project_id, 'H100-80GB', 'full', 1 + po.id % 4,
       '2026-10-01 00:00:00+00'::timestamptz + (po.id % 60) * interval '1 minute',
       '2026-10-01 00:00:00+00'::timestamptz + (po.id % 60) * interval '1 minute'
         + :hours * interval '1 hour',
       (SELECT min(id) FROM users)
FROM pools po;
ANALYZE projects, pools, usage_ledger, billing_rates;
