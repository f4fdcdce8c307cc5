/*
 * routes.c - the route table: every endpoint of gpupoold, in one place.
 * api/openapi.yaml must describe exactly these (tests/contract/test_contract.c).
 */
#include "routes.h"

#include "agent.h"
#include "agent_status.h"
#include "audit.h"
#include "auth.h"
#include "billing.h"
#include "billing_export.h"
#include "capacity.h"
#include "catalog.h"
#include "clusters.h"
#include "defrag.h"
#include "gpus.h"
#include "health.h"
#include "kubernetes.h"
#include "nodes.h"
#include "pool_requests.h"
#include "pools.h"
#include "projects.h"
#include "reports.h"
#include "telemetry.h"
#include "users.h"

#define CAP_WRITE (ALLOW_ADMIN | ALLOW_OPERATOR)
#define CAP_READ (ALLOW_ADMIN | ALLOW_OPERATOR | ALLOW_BILLING)

const struct route api_routes[] = {
	{ "GET", "/healthz", api_healthz, ALLOW_PUBLIC, Q_NONE },
	{ "GET", "/readyz", api_readyz, ALLOW_PUBLIC, Q_NONE },
	{ "GET", "/metrics", api_metrics, ALLOW_PUBLIC, Q_NONE },
	{ "GET", "/v1/openapi.yaml", api_openapi, ALLOW_PUBLIC, Q_NONE },

	{ "POST", "/v1/auth/login", api_login, ALLOW_PUBLIC, Q_NONE },
	{ "POST", "/v1/auth/logout", api_logout, ALLOW_USER, Q_NONE },
	{ "GET", "/v1/me", api_me, ALLOW_USER | AUTH_PROJECTS, Q_NONE },
	{ "POST", "/v1/tokens", api_tokens_create, ALLOW_USER, Q_NONE },
	{ "GET", "/v1/tokens", api_tokens_list, ALLOW_USER, Q_PAGE },
	{ "GET", "/v1/tokens/{}", api_tokens_get, ALLOW_USER, Q_NONE },
	{ "DELETE", "/v1/tokens/{}", api_tokens_delete, ALLOW_USER, Q_NONE },

	{ "POST", "/v1/users", api_users_create, ALLOW_ADMIN, Q_NONE },
	{ "GET", "/v1/users", api_users_list, ALLOW_ADMIN, Q_PAGE },
	{ "GET", "/v1/users/{}", api_users_get, ALLOW_ADMIN, Q_NONE },
	{ "PATCH", "/v1/users/{}", api_users_patch, ALLOW_ADMIN, Q_NONE },

	{ "POST", "/v1/projects", api_projects_create, ALLOW_ADMIN, Q_NONE },
	{ "GET", "/v1/projects", api_projects_list, ALLOW_USER, Q_PAGE },
	{ "GET", "/v1/projects/{}", api_projects_get, ALLOW_USER, Q_NONE },
	{ "PATCH", "/v1/projects/{}", api_projects_patch, ALLOW_USER, Q_NONE },
	{ "GET", "/v1/projects/{}/members", api_members_list, ALLOW_USER, Q_PAGE },
	{ "PUT", "/v1/projects/{}/members/{}", api_members_put, ALLOW_USER, Q_NONE },
	{ "DELETE", "/v1/projects/{}/members/{}", api_members_delete, ALLOW_USER, Q_NONE },

	{ "GET", "/v1/audit", api_audit_list, ALLOW_ADMIN,
	    Q_PAGE " actor action object_type object_id project since until" },

	/* capacity inventory: operators and admins write, billing reads too */
	{ "GET", "/v1/catalog/models", api_catalog_models_list, ALLOW_USER,
	    Q_PAGE " product_name pci_device_id mig_capable" },
	{ "GET", "/v1/catalog/models/{}", api_catalog_models_get, ALLOW_USER, Q_NONE },
	{ "POST", "/v1/clusters", api_clusters_create, CAP_WRITE, Q_NONE },
	{ "GET", "/v1/clusters", api_clusters_list, CAP_READ, Q_PAGE },
	{ "GET", "/v1/clusters/{}", api_clusters_get, CAP_READ, Q_NONE },
	{ "PATCH", "/v1/clusters/{}", api_clusters_patch, CAP_WRITE, Q_NONE },
	{ "DELETE", "/v1/clusters/{}", api_clusters_delete, CAP_WRITE, Q_NONE },
	{ "POST", "/v1/nodes", api_nodes_create, CAP_WRITE, Q_NONE },
	{ "GET", "/v1/nodes", api_nodes_list, CAP_READ, Q_PAGE " cluster status model label" },
	{ "GET", "/v1/nodes/{}", api_nodes_get, CAP_READ, Q_NONE },
	{ "PATCH", "/v1/nodes/{}", api_nodes_patch, CAP_WRITE, Q_NONE },
	{ "POST", "/v1/nodes/{}/cordon", api_nodes_cordon, CAP_WRITE, Q_NONE },
	{ "POST", "/v1/nodes/{}/uncordon", api_nodes_uncordon, CAP_WRITE, Q_NONE },
	{ "POST", "/v1/nodes/{}/drain", api_nodes_drain, CAP_WRITE, Q_NONE },
	{ "POST", "/v1/nodes/{}/gpus", api_gpus_create, CAP_WRITE, Q_NONE },
	{ "GET", "/v1/nodes/{}/gpus", api_node_gpus_list, CAP_READ, Q_PAGE },
	{ "GET", "/v1/gpus", api_gpus_list, CAP_READ,
	    Q_PAGE " cluster node model health mig_enabled project pool" },
	{ "GET", "/v1/gpus/{}", api_gpus_get, CAP_READ, Q_NONE },
	{ "PATCH", "/v1/gpus/{}", api_gpus_patch, CAP_WRITE, Q_NONE },
	{ "GET", "/v1/capacity", api_capacity_get, CAP_READ, "cluster model" },
	{ "POST", "/v1/capacity/simulate", api_capacity_simulate, CAP_READ, Q_NONE },
	{ "POST", "/v1/capacity/defrag-plans", api_defrag_plans_create, CAP_WRITE, Q_NONE },
	{ "GET", "/v1/capacity/defrag-plans", api_defrag_plans_list, CAP_WRITE, Q_PAGE " state" },
	{ "GET", "/v1/capacity/defrag-plans/{}", api_defrag_plans_get, CAP_WRITE, Q_NONE },
	{ "POST", "/v1/capacity/defrag-plans/{}/apply", api_defrag_plans_apply, CAP_WRITE, Q_NONE },
	{ "POST", "/v1/capacity/defrag-plans/{}/cancel", api_defrag_plans_cancel, CAP_WRITE,
	    Q_NONE },

	/* pools and the pool-request workflow (docs/pools.md) */
	{ "GET", "/v1/projects/{}/quota", api_quota_get, ALLOW_USER, Q_NONE },
	{ "PUT", "/v1/projects/{}/quota", api_quota_put, ALLOW_ADMIN, Q_NONE },
	{ "DELETE", "/v1/projects/{}/quota", api_quota_delete, ALLOW_ADMIN, Q_NONE },
	{ "GET", "/v1/projects/{}/pools", api_pools_list, ALLOW_USER, Q_PAGE " status" },
	{ "GET", "/v1/pools/{}", api_pools_get, ALLOW_USER, Q_NONE },
	{ "POST", "/v1/projects/{}/pool-requests", api_pool_requests_submit, ALLOW_USER, Q_NONE },
	{ "GET", "/v1/pool-requests", api_pool_requests_list, ALLOW_USER,
	    Q_PAGE " state project pool" },
	{ "GET", "/v1/pool-requests/{}", api_pool_requests_get, ALLOW_USER, Q_NONE },
	{ "POST", "/v1/pool-requests/{}/approve", api_pool_requests_approve, CAP_WRITE, Q_NONE },
	{ "POST", "/v1/pool-requests/{}/reject", api_pool_requests_reject, CAP_WRITE, Q_NONE },
	{ "POST", "/v1/pool-requests/{}/cancel", api_pool_requests_cancel, ALLOW_USER, Q_NONE },

	/* node agents (docs/agent.md): operators enroll; node tokens reach the agent routes */
	{ "POST", "/v1/clusters/{}/enrollment-tokens", api_enroll_tokens_create, CAP_WRITE,
	    Q_NONE },
	{ "GET", "/v1/clusters/{}/enrollment-tokens", api_enroll_tokens_list, CAP_WRITE, Q_NONE },
	{ "DELETE", "/v1/clusters/{}/enrollment-tokens/{}", api_enroll_tokens_delete, CAP_WRITE,
	    Q_NONE },
	{ "POST", "/v1/nodes/{}/agent-token/revoke", api_node_agent_token_revoke, CAP_WRITE,
	    Q_NONE },
	{ "GET", "/v1/nodes/{}/mig-config", api_node_mig_config, CAP_READ, Q_NONE },
	{ "POST", "/v1/agent/enroll", api_agent_enroll, ALLOW_PUBLIC, Q_NONE },
	{ "POST", "/v1/agent/token/rotate", api_agent_token_rotate, ALLOW_NODE, Q_NONE },
	{ "GET", "/v1/agent/desired-state", api_agent_desired_state, ALLOW_NODE, "after wait" },
	{ "PUT", "/v1/agent/status", api_agent_status, ALLOW_NODE, Q_NONE },
	{ "POST", "/v1/agent/heartbeat", api_agent_heartbeat, ALLOW_NODE, Q_NONE },
	{ "POST", "/v1/agent/metrics", api_agent_metrics, ALLOW_NODE, Q_NONE },
	{ "PUT", "/v1/agent/profiles", api_agent_profiles, ALLOW_NODE, Q_NONE },
	{ "GET", "/v1/gpus/{}/metrics", api_gpu_metrics, CAP_READ, "from to step" },
	{ "GET", "/v1/alerts", api_alerts_list, ALLOW_USER, Q_PAGE " type state project node" },
	{ "POST", "/v1/alerts/{}/ack", api_alerts_ack, ALLOW_USER, Q_NONE },
	{ "GET", "/v1/profiles", api_profiles_list, ALLOW_USER,
	    Q_PAGE " project node pool current" },

	/* billing (docs/billing.md): admin writes rates; billing closes and adjusts */
	{ "POST", "/v1/billing/rates", api_billing_rates_create, ALLOW_ADMIN, Q_NONE },
	{ "GET", "/v1/billing/rates", api_billing_rates_list, ALLOW_USER, "model profile at" },
	{ "POST", "/v1/billing/accrual/run", api_billing_accrual_run, ALLOW_ADMIN, Q_NONE },
	{ "GET", "/v1/billing/usage", api_billing_usage, ALLOW_USER,
	    "project from to group_by " Q_PAGE },
	{ "GET", "/v1/billing/periods", api_billing_periods_list, CAP_READ, Q_NONE },
	{ "POST", "/v1/billing/periods/{}/close", api_billing_periods_close,
	    ALLOW_ADMIN | ALLOW_BILLING, Q_NONE },
	{ "POST", "/v1/billing/adjustments", api_billing_adjustments_create,
	    ALLOW_ADMIN | ALLOW_BILLING, Q_NONE },
	/* billing exports (docs/billing.md "Exports"): admin and billing create, staff read */
	{ "POST", "/v1/billing/exports", api_billing_exports_create, ALLOW_ADMIN | ALLOW_BILLING,
	    Q_NONE },
	{ "GET", "/v1/billing/exports", api_billing_exports_list, CAP_READ, Q_PAGE },
	{ "GET", "/v1/billing/exports/{}", api_billing_exports_get, CAP_READ, Q_NONE },
	{ "GET", "/v1/billing/exports/{}/download", api_billing_exports_download, CAP_READ,
	    Q_NONE },
	{ "GET", "/v1/reports/utilization", api_reports_utilization, ALLOW_USER,
	    "from to group_by project" },

	/* Kubernetes objects (docs/kubernetes.md): operators a cluster's, members their project's */
	{ "GET", "/v1/clusters/{}/kubernetes", api_cluster_kubernetes, CAP_WRITE,
	    "wait device_taints" },
	{ "PUT", "/v1/clusters/{}/kubernetes/workloads", api_cluster_k8s_workloads, CAP_WRITE,
	    Q_NONE },
	{ "GET", "/v1/projects/{}/kubernetes", api_project_kubernetes, ALLOW_USER, Q_NONE },
};

const int api_nroutes = (int)(sizeof(api_routes) / sizeof(api_routes[0]));
