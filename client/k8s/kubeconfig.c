/*
 * kubeconfig.c - the Kubernetes API's address and credentials: in-cluster
 * ServiceAccount files or a kubeconfig's current context (kubeconfig.h).
 */
#include "kubeconfig.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define MAX_LINES 20000

static int fail(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
fail(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -1;
}

static char *
read_all(const char *path, size_t max)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (f == NULL)
		return NULL;
	buf = malloc(max + 1);
	if (buf == NULL) {
		fclose(f);
		return NULL;
	}
	n = fread(buf, 1, max, f);
	if (!feof(f)) { /* larger than max */
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* ---- the YAML subset ---- */

struct yline {
	int indent;
	char *text; /* after the indentation, comment and trailing blanks removed */
	int lineno;
};

struct yparse {
	struct yline *l;
	int n, i;
	char *why;
	size_t whylen;
	bool bad;
};

static struct json_object *parse_block(struct yparse *p, int indent);

static void
ybad(struct yparse *p, int lineno, const char *what)
{
	if (!p->bad)
		snprintf(p->why, p->whylen, "line %d: %s", lineno, what);
	p->bad = true;
}

/* Cut a comment (" #" outside quotes) and trailing blanks. */
static void
strip_comment(char *s)
{
	char q = 0;
	char *end;

	for (char *c = s; *c != '\0'; c++) {
		if (q != 0) {
			if (*c == '\\' && q == '"' && c[1] != '\0')
				c++;
			else if (*c == q)
				q = 0;
		} else if (*c == '"' || *c == '\'') {
			q = *c;
		} else if (*c == '#' && (c == s || c[-1] == ' ' || c[-1] == '\t')) {
			*c = '\0';
			break;
		}
	}
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		*--end = '\0';
}

/* A scalar: quoted (with escapes), empty flow collections, or plain text. */
static struct json_object *
scalar(struct yparse *p, int lineno, const char *s)
{
	size_t n = strlen(s);

	if (strcmp(s, "{}") == 0)
		return json_object_new_object();
	if (strcmp(s, "[]") == 0)
		return json_object_new_array();
	if (s[0] == '{' || s[0] == '[' || s[0] == '&' || s[0] == '*' || s[0] == '|' ||
	    s[0] == '>' || s[0] == '!') {
		ybad(p, lineno, "flow collections, anchors, tags and block scalars are not read");
		return NULL;
	}
	if (s[0] == '"' || s[0] == '\'') {
		char *out = malloc(n + 1), *o = out;
		struct json_object *j;

		if (out == NULL || n < 2 || s[n - 1] != s[0]) {
			free(out);
			ybad(p, lineno, "unterminated quoted scalar");
			return NULL;
		}
		for (size_t k = 1; k + 1 < n; k++) {
			if (s[0] == '\'' && s[k] == '\'' && s[k + 1] == '\'') {
				*o++ = '\'';
				k++;
			} else if (s[0] == '"' && s[k] == '\\' && k + 2 < n) {
				char e = s[++k];

				*o++ = e == 'n' ? '\n' : e == 't' ? '\t' : e;
			} else {
				*o++ = s[k];
			}
		}
		*o = '\0';
		j = json_object_new_string(out);
		free(out);
		return j;
	}
	if (strcmp(s, "true") == 0)
		return json_object_new_boolean(1);
	if (strcmp(s, "false") == 0)
		return json_object_new_boolean(0);
	if (strcmp(s, "null") == 0 || strcmp(s, "~") == 0)
		return NULL;
	return json_object_new_string(s);
}

/* "key: value" or "key:" → key (NUL-terminated in place) and value (NULL when none). */
static char *
split_key(char *s, char **value)
{
	char *c = s;

	*value = NULL;
	if (*s == '"' || *s == '\'') {
		char q = *s;

		for (c = s + 1; *c != '\0' && *c != q; c++)
			;
		if (*c == '\0')
			return NULL;
		c++;
	}
	for (; *c != '\0'; c++)
		if (*c == ':' && (c[1] == '\0' || c[1] == ' ' || c[1] == '\t'))
			break;
	if (*c == '\0')
		return NULL;
	*c = '\0';
	c++;
	while (*c == ' ' || *c == '\t')
		c++;
	if (*c != '\0')
		*value = c;
	if (*s == '"' || *s == '\'') {
		s++;
		s[strlen(s) - 1] = '\0';
	}
	return s;
}

static struct json_object *
parse_seq(struct yparse *p, int indent)
{
	struct json_object *a = json_object_new_array();

	while (!p->bad && p->i < p->n && p->l[p->i].indent == indent && p->l[p->i].text[0] == '-' &&
	    (p->l[p->i].text[1] == '\0' || p->l[p->i].text[1] == ' ')) {
		struct yline *y = &p->l[p->i];
		char *rest = y->text + 1;
		int off = 1;

		while (*rest == ' ') {
			rest++;
			off++;
		}
		if (*rest == '\0') { /* "-" alone: the item is the block below */
			p->i++;
			if (p->i < p->n && p->l[p->i].indent > indent)
				json_object_array_add(a, parse_block(p, p->l[p->i].indent));
			else
				json_object_array_add(a, NULL);
			continue;
		}
		/* "- key: v" opens a mapping whose keys sit at indent + off */
		y->indent = indent + off;
		y->text = rest;
		{
			char *copy = strdup(rest), *v;
			bool is_map = copy != NULL && split_key(copy, &v) != NULL;

			free(copy);
			if (is_map) {
				json_object_array_add(a, parse_block(p, y->indent));
			} else {
				json_object_array_add(a, scalar(p, y->lineno, rest));
				p->i++;
			}
		}
	}
	return a;
}

static struct json_object *
parse_map(struct yparse *p, int indent)
{
	struct json_object *m = json_object_new_object();

	while (!p->bad && p->i < p->n && p->l[p->i].indent == indent) {
		struct yline *y = &p->l[p->i];
		char *value, *key = split_key(y->text, &value);

		if (key == NULL) {
			ybad(p, y->lineno, "expected \"key: value\"");
			break;
		}
		p->i++;
		if (value != NULL) {
			json_object_object_add(m, key, scalar(p, y->lineno, value));
		} else if (p->i < p->n &&
		    (p->l[p->i].indent > indent ||
			(p->l[p->i].indent == indent && p->l[p->i].text[0] == '-'))) {
			json_object_object_add(m, key, parse_block(p, p->l[p->i].indent));
		} else {
			json_object_object_add(m, key, NULL);
		}
	}
	return m;
}

static struct json_object *
parse_block(struct yparse *p, int indent)
{
	const char *t = p->l[p->i].text;

	if (t[0] == '-' && (t[1] == '\0' || t[1] == ' '))
		return parse_seq(p, indent);
	return parse_map(p, indent);
}

struct json_object *
kube_yaml_parse(const char *text, char *why, size_t whylen)
{
	struct yparse p = { .why = why, .whylen = whylen };
	char *copy, *save = NULL, *line;
	struct json_object *root = NULL;
	int lineno = 0;

	snprintf(why, whylen, "empty");
	while (*text == ' ' || *text == '\t' || *text == '\n' || *text == '\r')
		text++;
	if (*text == '{') { /* a JSON kubeconfig */
		root = json_tokener_parse(text);
		if (root == NULL)
			snprintf(why, whylen, "not valid JSON");
		return root;
	}
	copy = strdup(text);
	p.l = calloc(MAX_LINES, sizeof(*p.l));
	if (copy == NULL || p.l == NULL) {
		free(copy);
		free(p.l);
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	/* strsep keeps empty lines apart, so line numbers stay right */
	save = copy;
	while ((line = strsep(&save, "\n")) != NULL) {
		int ind = 0;

		lineno++;
		strip_comment(line);
		while (line[ind] == ' ')
			ind++;
		if (line[ind] == '\t') {
			ybad(&p, lineno, "a tab in the indentation");
			break;
		}
		if (line[ind] == '\0' || strcmp(line + ind, "---") == 0)
			continue;
		if (strcmp(line + ind, "...") == 0)
			break;
		if (p.n == MAX_LINES) {
			ybad(&p, lineno, "too many lines");
			break;
		}
		p.l[p.n++] = (struct yline){ ind, line + ind, lineno };
	}
	if (!p.bad && p.n > 0) {
		root = parse_block(&p, p.l[0].indent);
		if (!p.bad && p.i < p.n)
			ybad(&p, p.l[p.i].lineno, "unexpected indentation");
	}
	if (p.bad) {
		json_object_put(root);
		root = NULL;
	}
	free(p.l);
	free(copy);
	return root;
}

/* ---- kubeconfig ---- */

static const char *
str_at(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (o == NULL || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* The entry of list (clusters, users, contexts) named name: its member inner. */
static struct json_object *
named(struct json_object *root, const char *list, const char *name, const char *inner)
{
	struct json_object *a, *v;

	if (name == NULL || !json_object_object_get_ex(root, list, &a) ||
	    !json_object_is_type(a, json_type_array))
		return NULL;
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		const char *n = str_at(e, "name");

		if (n != NULL && strcmp(n, name) == 0 && json_object_object_get_ex(e, inner, &v) &&
		    json_object_is_type(v, json_type_object))
			return v;
	}
	return NULL;
}

static char *
b64_decode(const char *in)
{
	size_t n = strlen(in);
	char *out = malloc(n / 4 * 3 + 4), *o = out;
	unsigned acc = 0;
	int bits = 0;

	if (out == NULL)
		return NULL;
	for (const char *c = in; *c != '\0' && *c != '='; c++) {
		int v;

		if (*c >= 'A' && *c <= 'Z')
			v = *c - 'A';
		else if (*c >= 'a' && *c <= 'z')
			v = *c - 'a' + 26;
		else if (*c >= '0' && *c <= '9')
			v = *c - '0' + 52;
		else if (*c == '+')
			v = 62;
		else if (*c == '/')
			v = 63;
		else if (isspace((unsigned char)*c))
			continue;
		else {
			free(out);
			return NULL;
		}
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			*o++ = (char)((acc >> bits) & 0xff);
		}
	}
	*o = '\0';
	return out;
}

/* A path from the kubeconfig: relative ones are relative to its directory. */
static int
path_in(char *out, size_t outlen, const char *kubeconfig, const char *p)
{
	const char *slash = strrchr(kubeconfig, '/');
	int n;

	if (p[0] == '/' || slash == NULL)
		n = snprintf(out, outlen, "%s", p);
	else
		n = snprintf(out, outlen, "%.*s/%s", (int)(slash - kubeconfig), kubeconfig, p);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

int
kube_auth_from_kubeconfig(struct kube_auth *a, const char *path, const char *context, char *why,
    size_t whylen)
{
	char *text = read_all(path, 1 << 20);
	struct json_object *root, *ctx, *cl, *user, *v;
	const char *s, *cluster_name, *user_name;
	int rc = -1;

	memset(a, 0, sizeof(*a));
	if (text == NULL)
		return fail(why, whylen, "cannot read the kubeconfig %s", path);
	root = kube_yaml_parse(text, why, whylen);
	free(text);
	if (root == NULL)
		return -1;
	if (context == NULL)
		context = str_at(root, "current-context");
	if (context == NULL) {
		fail(why, whylen, "the kubeconfig has no current-context");
		goto out;
	}
	ctx = named(root, "contexts", context, "context");
	if (ctx == NULL) {
		fail(why, whylen, "no context %s in the kubeconfig", context);
		goto out;
	}
	cluster_name = str_at(ctx, "cluster");
	user_name = str_at(ctx, "user");
	cl = named(root, "clusters", cluster_name, "cluster");
	if (cl == NULL || (s = str_at(cl, "server")) == NULL) {
		fail(why, whylen, "the context's cluster %s has no server", cluster_name);
		goto out;
	}
	if (strncmp(s, "https://", 8) != 0 && strncmp(s, "http://", 7) != 0) {
		fail(why, whylen, "server %s is not an http(s) URL", s);
		goto out;
	}
	snprintf(a->server, sizeof(a->server), "%s", s);
	if (a->server[strlen(a->server) - 1] == '/')
		a->server[strlen(a->server) - 1] = '\0';
	if ((s = str_at(cl, "certificate-authority-data")) != NULL) {
		if ((a->ca_data = b64_decode(s)) == NULL) {
			fail(why, whylen, "certificate-authority-data is not base64");
			goto out;
		}
	} else if ((s = str_at(cl, "certificate-authority")) != NULL) {
		if (path_in(a->ca_file, sizeof(a->ca_file), path, s) < 0)
			goto toolong;
	}
	if (json_object_object_get_ex(cl, "insecure-skip-tls-verify", &v))
		a->insecure = json_object_get_boolean(v);
	user = named(root, "users", user_name, "user");
	if (user == NULL) {
		/* a context without a user: no credentials (an open API, tests) */
		rc = 0;
		goto out;
	}
	if (json_object_object_get_ex(user, "exec", &v) ||
	    json_object_object_get_ex(user, "auth-provider", &v)) {
		fail(why, whylen,
		    "user %s authenticates with exec or auth-provider, which gpupool-k8s does not run",
		    user_name);
		goto out;
	}
	if ((s = str_at(user, "token")) != NULL) {
		if (strlen(s) >= sizeof(a->token))
			goto toolong;
		snprintf(a->token, sizeof(a->token), "%s", s);
	} else if ((s = str_at(user, "tokenFile")) != NULL) {
		if (path_in(a->token_file, sizeof(a->token_file), path, s) < 0)
			goto toolong;
	}
	if ((s = str_at(user, "client-certificate-data")) != NULL)
		a->cert_data = b64_decode(s);
	else if ((s = str_at(user, "client-certificate")) != NULL &&
	    path_in(a->cert_file, sizeof(a->cert_file), path, s) < 0)
		goto toolong;
	if ((s = str_at(user, "client-key-data")) != NULL)
		a->key_data = b64_decode(s);
	else if ((s = str_at(user, "client-key")) != NULL &&
	    path_in(a->key_file, sizeof(a->key_file), path, s) < 0)
		goto toolong;
	if ((a->cert_data != NULL || a->cert_file[0] != '\0') !=
	    (a->key_data != NULL || a->key_file[0] != '\0')) {
		fail(why, whylen,
		    "user %s has a client certificate without its key or the other way", user_name);
		goto out;
	}
	rc = 0;
	goto out;
toolong:
	fail(why, whylen, "a value of the kubeconfig is too long");
out:
	json_object_put(root);
	if (rc < 0)
		kube_auth_free(a);
	return rc;
}

int
kube_auth_in_cluster(struct kube_auth *a, const char *dir, char *why, size_t whylen)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	int n;

	memset(a, 0, sizeof(*a));
	if (dir == NULL)
		dir = SA_DIR;
	if (host == NULL || host[0] == '\0')
		return fail(why, whylen, "KUBERNETES_SERVICE_HOST is not set (not in a pod?)");
	if (port == NULL || port[0] == '\0')
		port = "443";
	/* an IPv6 service address needs brackets in a URL */
	n = snprintf(a->server, sizeof(a->server),
	    strchr(host, ':') != NULL ? "https://[%s]:%s" : "https://%s:%s", host, port);
	if (n < 0 || (size_t)n >= sizeof(a->server))
		return fail(why, whylen, "KUBERNETES_SERVICE_HOST is too long");
	snprintf(a->token_file, sizeof(a->token_file), "%s/token", dir);
	snprintf(a->ca_file, sizeof(a->ca_file), "%s/ca.crt", dir);
	return 0;
}

void
kube_auth_free(struct kube_auth *a)
{
	free(a->ca_data);
	free(a->cert_data);
	free(a->key_data);
	a->ca_data = a->cert_data = a->key_data = NULL;
	memset(a->token, 0, sizeof(a->token));
}
