/*
 * bsnmp_host: a test host that loads a bsnmpd module the way bsnmpd does, for the tests of
 * snmp_agentx.so where no bsnmpd can be installed (Debian has none).
 *
 * What it reproduces, from bsnmp's snmpd/main.c and lib/snmpagent.c (freebsd-src, read at
 * main.c 01b48d45, snmpagent.c 03326931, config.c 157223c6):
 *  - lm_load: dlopen(RTLD_NOW|RTLD_GLOBAL), dlsym("config"), init(module, argc, argv) with
 *    the module's "section:arg" words, the section stripped;
 *  - lm_start: the tree merged into one array sorted by OID (qsort), the config section's
 *    assignments done as one transaction (SET each, then COMMIT each, or ROLLBACK in reverse
 *    on a failure), then start();
 *  - the main loop: idle() of every module before each poll, then timers and descriptors;
 *  - GET, GETNEXT, GETBULK and SET dispatched over the tree as snmpagent.c does: the first
 *    node whose OID prefixes the variable; GETNEXT passes the variable, or the node's own
 *    OID when the variable sorts before it, and moves on after NOSUCHNAME; SET checks the
 *    node's syntax, calls SET per varbind, ROLLBACK in reverse on failure, COMMIT after;
 *  - lm_unload: tree unmerged, fini(), the module's timers and descriptors dropped, dlclose.
 *  - the daemon API modules import: fd_select/fd_deselect, timer_start/_repeat/timer_stop,
 *    or_register/or_unregister, snmp_send_trap, get_ticks and start_tick.
 *
 * Everything here is written for the tests; no bsnmp source is included. The declarations
 * below transcribe the ABI from the headers.
 *
 * Commands, one per line on stdin; every answer ends with a line holding only ".":
 *   load PATH SECTION [ARG...]   config NAME VALUE   start   unload   quit
 *   get OID...   getnext OID...   getbulk NONREP MAXREP OID...
 *   set OID SYNTAX VALUE [OID SYNTAX VALUE...]   (SYNTAX: integer, string, ...)
 *   walk OID [MAXREP]    (GETNEXT PDUs, or GETBULK PDUs when MAXREP is given; prints "pdus N")
 *   run MS   orlist   traps   tree   dump (the module's dump, to stderr)
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/types.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* ---- the ABI (asn1.h, snmp.h, snmpagent.h, snmpmod.h) ---- */
#define ASN_MAXOIDLEN 128
struct asn_oid {
	u_int len;
	uint32_t subs[ASN_MAXOIDLEN];
};
enum snmp_syntax {
	SNMP_SYNTAX_NULL = 0, SNMP_SYNTAX_INTEGER, SNMP_SYNTAX_OCTETSTRING, SNMP_SYNTAX_OID,
	SNMP_SYNTAX_IPADDRESS, SNMP_SYNTAX_COUNTER, SNMP_SYNTAX_GAUGE, SNMP_SYNTAX_TIMETICKS,
	SNMP_SYNTAX_COUNTER64, SNMP_SYNTAX_NOSUCHOBJECT, SNMP_SYNTAX_NOSUCHINSTANCE,
	SNMP_SYNTAX_ENDOFMIBVIEW,
};
struct snmp_value {
	struct asn_oid var;
	enum snmp_syntax syntax;
	union snmp_values {
		int32_t integer;
		struct {
			u_int len;
			u_char *octets;
		} octetstring;
		struct asn_oid oid;
		u_char ipaddress[4];
		uint32_t uint32;
		uint64_t counter64;
	} v;
};
struct snmp_scratch {
	void *ptr1;
	void *ptr2;
	uint32_t int1;
	uint32_t int2;
};
struct snmp_context {
	u_int var_index;
	struct snmp_scratch *scratch;
	void *dep;
	void *data;
	int code;
};
enum snmp_node_type { SNMP_NODE_LEAF = 1, SNMP_NODE_COLUMN };
enum snmp_op { SNMP_OP_GET = 1, SNMP_OP_GETNEXT, SNMP_OP_SET, SNMP_OP_COMMIT, SNMP_OP_ROLLBACK };
typedef int (*snmp_op_t)(struct snmp_context *, struct snmp_value *, u_int, u_int, enum snmp_op);
struct snmp_node {
	struct asn_oid oid;
	const char *name;
	enum snmp_node_type type;
	enum snmp_syntax syntax;
	snmp_op_t op;
	u_int flags;
	uint32_t index;
	void *data;
	void *tree_data;
};
#define SNMP_NODE_CANSET 0x0001
struct lmodule;
struct snmp_module {
	const char *comment;
	int (*init)(struct lmodule *, int, char *[]);
	int (*fini)(void);
	void (*idle)(void);
	void (*dump)(void);
	void (*config)(void);
	void (*start)(void);
	void *proxy;
	const struct snmp_node *tree;
	u_int tree_size;
	void (*loading)(const struct lmodule *, int);
};
#define SNMP_ERR_NOERROR 0
#define SNMP_ERR_NOSUCHNAME 2
#define SNMP_ERR_GENERR 5
#define SNMP_ERR_WRONG_TYPE 7
#define SNMP_ERR_NOT_WRITEABLE 17
#define MAX_BINDINGS 100

/* ---- the host's module record ---- */
struct lmodule {
	void *handle;
	struct snmp_module *config;
	int started;
	char section[64];
};
static struct lmodule *module;

/* ---- time ---- */
uint64_t start_tick;
uint64_t
get_ticks(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (tv.tv_sec * 100ULL + tv.tv_usec / 10000ULL);
}
static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (ts.tv_sec * 1000ULL + ts.tv_nsec / 1000000ULL);
}

/* ---- descriptors ---- */
#define MAX_FDS 256
struct fdent {
	int used, fd;
	void (*func)(int, void *);
	void *udata;
	struct lmodule *owner;
};
static struct fdent fds[MAX_FDS];

void *
fd_select(int fd, void (*func)(int, void *), void *udata, struct lmodule *mod)
{
	for (int i = 0; i < MAX_FDS; i++)
		if (!fds[i].used) {
			fds[i] = (struct fdent){ 1, fd, func, udata, mod };
			return (&fds[i]);
		}
	return (NULL);
}
void
fd_deselect(void *id)
{
	((struct fdent *)id)->used = 0;
}

/* ---- timers ---- */
#define MAX_TIMERS 64
struct timer {
	int used;
	uint64_t due_ms, repeat_ms;
	void (*func)(void *);
	void *udata;
	struct lmodule *owner;
};
static struct timer timers[MAX_TIMERS];

void *
timer_start_repeat(u_int ticks, u_int repeat, void (*func)(void *), void *udata,
    struct lmodule *mod)
{
	for (int i = 0; i < MAX_TIMERS; i++)
		if (!timers[i].used) {
			timers[i] = (struct timer){ 1, now_ms() + ticks * 10ULL, repeat * 10ULL,
			    func, udata, mod };
			return (&timers[i]);
		}
	return (NULL);
}
void *
timer_start(u_int ticks, void (*func)(void *), void *udata, struct lmodule *mod)
{
	return (timer_start_repeat(ticks, 0, func, udata, mod));
}
void
timer_stop(void *id)
{
	((struct timer *)id)->used = 0;
}

/* ---- sysORTable ---- */
#define MAX_OR 64
struct orent {
	u_int index;
	struct asn_oid oid;
	char descr[256];
};
static struct orent ortable[MAX_OR];

static void
print_oid(FILE *f, const struct asn_oid *o)
{
	for (u_int i = 0; i < o->len; i++)
		fprintf(f, ".%u", o->subs[i]);
}

u_int
or_register(const struct asn_oid *or, const char *descr, struct lmodule *mod)
{
	(void)mod;
	for (u_int idx = 1; idx <= MAX_OR; idx++) {
		int taken = 0;
		for (int i = 0; i < MAX_OR; i++)
			if (ortable[i].index == idx)
				taken = 1;
		if (taken)
			continue;
		for (int i = 0; i < MAX_OR; i++)
			if (ortable[i].index == 0) {
				ortable[i].index = idx;
				ortable[i].oid = *or;
				snprintf(ortable[i].descr, sizeof(ortable[i].descr), "%s", descr);
				return (idx);
			}
	}
	return (0);
}
void
or_unregister(u_int idx)
{
	for (int i = 0; i < MAX_OR; i++)
		if (ortable[i].index == idx)
			ortable[i].index = 0;
}

/* ---- values ---- */
static void
print_value(FILE *f, const struct snmp_value *v)
{
	print_oid(f, &v->var);
	fprintf(f, " = ");
	switch (v->syntax) {
	case SNMP_SYNTAX_NULL: fprintf(f, "NULL"); break;
	case SNMP_SYNTAX_INTEGER: fprintf(f, "INTEGER: %d", v->v.integer); break;
	case SNMP_SYNTAX_OCTETSTRING: {
		int printable = 1;
		for (u_int i = 0; i < v->v.octetstring.len; i++)
			if (!isprint(v->v.octetstring.octets[i]))
				printable = 0;
		if (printable) {
			fprintf(f, "STRING: \"%.*s\"", (int)v->v.octetstring.len,
			    (const char *)v->v.octetstring.octets);
		} else {
			/* as net-snmp's clients print it */
			fprintf(f, "Hex-STRING: ");
			for (u_int i = 0; i < v->v.octetstring.len; i++)
				fprintf(f, "%02X ", v->v.octetstring.octets[i]);
		}
		break;
	}
	case SNMP_SYNTAX_OID: fprintf(f, "OID: "); print_oid(f, &v->v.oid); break;
	case SNMP_SYNTAX_IPADDRESS:
		fprintf(f, "IpAddress: %u.%u.%u.%u", v->v.ipaddress[0], v->v.ipaddress[1],
		    v->v.ipaddress[2], v->v.ipaddress[3]);
		break;
	case SNMP_SYNTAX_COUNTER: fprintf(f, "Counter32: %u", v->v.uint32); break;
	case SNMP_SYNTAX_GAUGE: fprintf(f, "Gauge32: %u", v->v.uint32); break;
	case SNMP_SYNTAX_TIMETICKS: {
		/* as net-snmp's clients print it */
		u_int t = v->v.uint32, d = t / 8640000;
		fprintf(f, "Timeticks: (%u) ", t);
		if (d == 1)
			fprintf(f, "1 day, ");
		else if (d > 1)
			fprintf(f, "%u days, ", d);
		fprintf(f, "%u:%02u:%02u.%02u", t / 360000 % 24, t / 6000 % 60, t / 100 % 60,
		    t % 100);
		break;
	}
	case SNMP_SYNTAX_COUNTER64:
		fprintf(f, "Counter64: %llu", (unsigned long long)v->v.counter64);
		break;
	case SNMP_SYNTAX_NOSUCHOBJECT:
		fprintf(f, "No Such Object available on this agent at this OID");
		break;
	case SNMP_SYNTAX_NOSUCHINSTANCE:
		fprintf(f, "No Such Instance currently exists at this OID");
		break;
	case SNMP_SYNTAX_ENDOFMIBVIEW:
		fprintf(f, "No more variables left in this MIB View (It is past the end of the MIB tree)");
		break;
	}
	fprintf(f, "\n");
}

/* bsnmpd frees what the module handed over (snmp_value_free) */
static void
value_free(struct snmp_value *v)
{
	if (v->syntax == SNMP_SYNTAX_OCTETSTRING) {
		free(v->v.octetstring.octets);
		v->v.octetstring.octets = NULL;
	}
}

/* ---- traps ---- */
static char traplog[65536];
static size_t traplen;

void
snmp_send_trap(const struct asn_oid *trap_oid, ...)
{
	va_list ap;
	const struct snmp_value *v;
	FILE *f = fmemopen(traplog + traplen, sizeof(traplog) - traplen, "w");

	if (f == NULL)
		return;
	fprintf(f, "trap ");
	print_oid(f, trap_oid);
	fprintf(f, "\n");
	va_start(ap, trap_oid);
	while ((v = va_arg(ap, const struct snmp_value *)) != NULL) {
		fprintf(f, "  ");
		print_value(f, v);
	}
	va_end(ap);
	traplen += ftell(f);
	fclose(f);
}

/* ---- the tree ---- */
static struct snmp_node *tree;
static u_int tree_size;

static int
oid_compare(const struct asn_oid *a, const struct asn_oid *b)
{
	for (u_int i = 0; i < a->len && i < b->len; i++) {
		if (a->subs[i] < b->subs[i])
			return (-1);
		if (a->subs[i] > b->subs[i])
			return (1);
	}
	return (a->len < b->len ? -1 : a->len > b->len ? 1 : 0);
}
/* is `sub` a prefix of `o`? */
static int
is_suboid(const struct asn_oid *sub, const struct asn_oid *o)
{
	if (sub->len > o->len)
		return (0);
	for (u_int i = 0; i < sub->len; i++)
		if (sub->subs[i] != o->subs[i])
			return (0);
	return (1);
}
static int
node_cmp(const void *a, const void *b)
{
	return (oid_compare(&((const struct snmp_node *)a)->oid,
	    &((const struct snmp_node *)b)->oid));
}

static int
parse_oid(const char *s, struct asn_oid *o)
{
	o->len = 0;
	if (*s == '.')
		s++;
	while (*s) {
		char *end;
		unsigned long n = strtoul(s, &end, 10);
		if (end == s || o->len == ASN_MAXOIDLEN)
			return (-1);
		o->subs[o->len++] = n;
		s = end;
		if (*s == '.')
			s++;
		else if (*s)
			return (-1);
	}
	return (0);
}

/* snmpagent.c's find_node: the first node that prefixes the variable */
static struct snmp_node *
find_node(const struct snmp_value *v, enum snmp_syntax *err)
{
	for (struct snmp_node *tp = tree; tp < tree + tree_size; tp++) {
		if (is_suboid(&tp->oid, &v->var)) {
			if (tp->type == SNMP_NODE_LEAF &&
			    (v->var.len != tp->oid.len + 1 || v->var.subs[tp->oid.len] != 0)) {
				*err = SNMP_SYNTAX_NOSUCHINSTANCE;
				return (NULL);
			}
			return (tp);
		}
		if (oid_compare(&tp->oid, &v->var) >= 0)
			break;
	}
	*err = SNMP_SYNTAX_NOSUCHOBJECT;
	return (NULL);
}

/* snmpagent.c's next_node */
static struct snmp_node *
next_node(const struct snmp_value *v, int *pnext)
{
	*pnext = 0;
	for (struct snmp_node *tp = tree; tp < tree + tree_size; tp++) {
		if (is_suboid(&tp->oid, &v->var)) {
			if (tp->type == SNMP_NODE_LEAF) {
				if (tp->oid.len == v->var.len)
					return (tp);
			} else
				return (tp);
		} else if (is_suboid(&v->var, &tp->oid) || oid_compare(&tp->oid, &v->var) >= 0) {
			*pnext = 1;
			return (tp);
		}
	}
	return (NULL);
}

static struct snmp_context ctx;

/* snmpagent.c's do_getnext; returns the op's error or 0 (endOfMibView set on the end) */
static int
do_getnext(const struct snmp_value *in, struct snmp_value *out)
{
	int next, ret = SNMP_ERR_NOSUCHNAME;
	struct snmp_node *tp = next_node(in, &next);

	if (tp != NULL) {
		out->var = (tp->type == SNMP_NODE_LEAF || next) ? tp->oid : in->var;
		for (;;) {
			out->syntax = tp->syntax;
			if (tp->type == SNMP_NODE_LEAF) {
				out->var.subs[out->var.len++] = 0;
				ret = tp->op(&ctx, out, tp->oid.len, tp->index, SNMP_OP_GET);
			} else
				ret = tp->op(&ctx, out, tp->oid.len, tp->index, SNMP_OP_GETNEXT);
			if (ret != SNMP_ERR_NOSUCHNAME)
				break;
			if (++tp == tree + tree_size)
				break;
			out->var = tp->oid;
		}
	}
	if (ret == SNMP_ERR_NOSUCHNAME) {
		out->var = in->var;
		out->syntax = SNMP_SYNTAX_ENDOFMIBVIEW;
		return (0);
	}
	return (ret);
}

static void pass(int timeout_ms);
static void lm_unload(void);

static void
error_out(int status, int index)
{
	printf("ERROR status=%d index=%d\n", status, index);
}

/* One GET PDU (v2c semantics). */
static void
pdu_get(struct asn_oid *oids, int n)
{
	struct snmp_value resp[MAX_BINDINGS];
	int i, ret;

	pass(0);
	for (i = 0; i < n; i++) {
		enum snmp_syntax except;
		struct snmp_node *tp;
		struct snmp_value in = { .var = oids[i] };

		resp[i].var = oids[i];
		if ((tp = find_node(&in, &except)) == NULL) {
			resp[i].syntax = except;
			continue;
		}
		resp[i].syntax = tp->syntax;
		ret = tp->op(&ctx, &resp[i], tp->oid.len, tp->index, SNMP_OP_GET);
		if (ret == SNMP_ERR_NOSUCHNAME)
			resp[i].syntax = SNMP_SYNTAX_NOSUCHINSTANCE;
		else if (ret != SNMP_ERR_NOERROR) {
			for (int j = 0; j < i; j++)
				value_free(&resp[j]);
			error_out(SNMP_ERR_GENERR, i + 1);
			return;
		}
	}
	for (i = 0; i < n; i++) {
		print_value(stdout, &resp[i]);
		value_free(&resp[i]);
	}
}

/* One GETBULK PDU (GETNEXT is nonrep = n). Returns the bindings printed, -1 on error;
 * `last` receives the last repeater's variable and syntax. */
static int
pdu_getbulk(int nonrep, int maxrep, struct asn_oid *oids, int n, struct snmp_value *last,
    int quiet_prefix, const struct asn_oid *prefix)
{
	static struct snmp_value resp[MAX_BINDINGS * 4];
	int cnt = 0, i, ret;
	int nrep = n - nonrep;

	pass(0);
	if (nonrep > n)
		nonrep = n;
	for (i = 0; i < nonrep; i++) {
		struct snmp_value in = { .var = oids[i] };
		if ((ret = do_getnext(&in, &resp[cnt])) != 0)
			goto err;
		cnt++;
	}
	for (int r = 0; nrep > 0 && r < maxrep && cnt + nrep <= MAX_BINDINGS; r++) {
		int eom = 1;
		for (i = nonrep; i < n; i++) {
			struct snmp_value in;
			if (r == 0)
				in.var = oids[i];
			else
				in.var = resp[cnt - nrep].var;
			if ((ret = do_getnext(&in, &resp[cnt])) != 0)
				goto err;
			if (resp[cnt].syntax != SNMP_SYNTAX_ENDOFMIBVIEW)
				eom = 0;
			cnt++;
		}
		if (eom)
			break;
	}
	for (i = 0; i < cnt; i++) {
		if (!(quiet_prefix && (!is_suboid(prefix, &resp[i].var) ||
		    resp[i].syntax == SNMP_SYNTAX_ENDOFMIBVIEW)))
			print_value(stdout, &resp[i]);
		if (last != NULL && i == cnt - 1) {
			*last = resp[i];
			if (last->syntax == SNMP_SYNTAX_OCTETSTRING)
				last->v.octetstring.octets = NULL;
		}
		value_free(&resp[i]);
	}
	return (cnt);
  err:
	for (int j = 0; j < cnt; j++)
		value_free(&resp[j]);
	error_out(ret == SNMP_ERR_NOSUCHNAME ? SNMP_ERR_NOSUCHNAME : SNMP_ERR_GENERR, i + 1);
	return (-1);
}

static int
parse_syntax(const char *s)
{
	static const char *const names[] = { "null", "integer", "string", "oid", "ipaddress",
	    "counter", "gauge", "timeticks", "counter64", NULL };
	for (int i = 0; names[i]; i++)
		if (strcmp(s, names[i]) == 0)
			return (i);
	return (-1);
}

/* One SET PDU, as snmp_set does it. */
static void
pdu_set(char **av, int ac)
{
	struct snmp_value b[MAX_BINDINGS];
	struct snmp_node *np[MAX_BINDINGS];
	struct snmp_scratch scratch[MAX_BINDINGS];
	int n = 0, i, ret;

	pass(0);
	memset(scratch, 0, sizeof(scratch));
	for (i = 0; i + 2 < ac; i += 3, n++) {
		enum snmp_syntax except;
		memset(&b[n], 0, sizeof(b[n]));
		if (parse_oid(av[i], &b[n].var) != 0 || (int)(b[n].syntax = parse_syntax(av[i + 1])) < 0) {
			printf("bad varbind %s\n", av[i]);
			return;
		}
		switch (b[n].syntax) {
		case SNMP_SYNTAX_INTEGER: b[n].v.integer = strtol(av[i + 2], NULL, 0); break;
		case SNMP_SYNTAX_OCTETSTRING:
			b[n].v.octetstring.len = strlen(av[i + 2]);
			b[n].v.octetstring.octets = (u_char *)av[i + 2];
			break;
		case SNMP_SYNTAX_OID: parse_oid(av[i + 2], &b[n].v.oid); break;
		case SNMP_SYNTAX_COUNTER64: b[n].v.counter64 = strtoull(av[i + 2], NULL, 0); break;
		default: b[n].v.uint32 = strtoul(av[i + 2], NULL, 0); break;
		}
		if ((np[n] = find_node(&b[n], &except)) == NULL) {
			error_out(except == SNMP_SYNTAX_NOSUCHOBJECT ? 6 : 11, n + 1);
			return;
		}
		if (np[n]->type == SNMP_NODE_LEAF && !(np[n]->flags & SNMP_NODE_CANSET)) {
			error_out(SNMP_ERR_NOT_WRITEABLE, n + 1);
			return;
		}
		if (np[n]->syntax != b[n].syntax) {
			error_out(SNMP_ERR_WRONG_TYPE, n + 1);
			return;
		}
	}
	for (i = 0; i < n; i++) {
		ctx.var_index = i + 1;
		ctx.scratch = &scratch[i];
		ret = np[i]->op(&ctx, &b[i], np[i]->oid.len, np[i]->index, SNMP_OP_SET);
		if (ret != SNMP_ERR_NOERROR) {
			while (i-- > 0) {
				ctx.scratch = &scratch[i];
				int r2 = np[i]->op(&ctx, &b[i], np[i]->oid.len, np[i]->index,
				    SNMP_OP_ROLLBACK);
				if (r2 != SNMP_ERR_NOERROR)
					ret = 15; /* undoFailed */
			}
			error_out(ret, ret == 15 ? 0 : (int)ctx.var_index);
			return;
		}
	}
	for (i = 0; i < n; i++) {
		ctx.scratch = &scratch[i];
		np[i]->op(&ctx, &b[i], np[i]->oid.len, np[i]->index, SNMP_OP_COMMIT);
	}
	for (i = 0; i < n; i++)
		print_value(stdout, &b[i]);
}

/* ---- module lifecycle ---- */
#define MAX_ASSIGN 32
static struct {
	char name[64];
	char value[512];
} assigns[MAX_ASSIGN];
static int nassigns;

static void
lm_load(char **av, int ac)
{
	char *args[17];
	int n = 0;

	if (module != NULL) {
		printf("already loaded\n");
		return;
	}
	module = calloc(1, sizeof(*module));
	snprintf(module->section, sizeof(module->section), "%s", av[1]);
	if ((module->handle = dlopen(av[0], RTLD_NOW | RTLD_GLOBAL)) == NULL) {
		printf("dlopen failed: %s\n", dlerror());
		free(module);
		module = NULL;
		return;
	}
	if ((module->config = dlsym(module->handle, "config")) == NULL) {
		printf("no config symbol\n");
		dlclose(module->handle);
		free(module);
		module = NULL;
		return;
	}
	for (int i = 2; i < ac && n < 16; i++)
		args[n++] = av[i];
	args[n] = NULL;
	int err = module->config->init(module, n, args);
	if (err != 0) {
		printf("init failed: %d\n", err);
		dlclose(module->handle);
		free(module);
		module = NULL;
		return;
	}
	printf("loaded: %s\n", module->config->comment);
}

static struct snmp_node *
node_named(const char *name)
{
	for (struct snmp_node *tp = tree; tp < tree + tree_size; tp++)
		if (strcmp(tp->name, name) == 0)
			return (tp);
	return (NULL);
}

static void
lm_start(void)
{
	const struct snmp_module *c = module->config;
	struct snmp_value vals[MAX_ASSIGN];
	struct snmp_scratch scratch[MAX_ASSIGN];
	struct snmp_node *nodes[MAX_ASSIGN];
	int i, failed = -1;

	tree = realloc(tree, sizeof(*tree) * (tree_size + c->tree_size));
	memcpy(tree + tree_size, c->tree, sizeof(*tree) * c->tree_size);
	for (i = 0; i < (int)c->tree_size; i++)
		tree[tree_size + i].tree_data = module;
	tree_size += c->tree_size;
	qsort(tree, tree_size, sizeof(*tree), node_cmp);

	/* the config section: one transaction */
	memset(scratch, 0, sizeof(scratch));
	for (i = 0; i < nassigns; i++) {
		nodes[i] = node_named(assigns[i].name);
		if (nodes[i] == NULL) {
			printf("unknown variable %s\n", assigns[i].name);
			failed = i;
			break;
		}
		memset(&vals[i], 0, sizeof(vals[i]));
		vals[i].var = nodes[i]->oid;
		vals[i].var.subs[vals[i].var.len++] = 0;
		vals[i].syntax = nodes[i]->syntax;
		if (vals[i].syntax == SNMP_SYNTAX_OCTETSTRING) {
			vals[i].v.octetstring.len = strlen(assigns[i].value);
			vals[i].v.octetstring.octets = malloc(vals[i].v.octetstring.len + 1);
			memcpy(vals[i].v.octetstring.octets, assigns[i].value,
			    vals[i].v.octetstring.len + 1);
		} else
			vals[i].v.integer = strtol(assigns[i].value, NULL, 0);
		ctx.scratch = &scratch[i];
		int err = nodes[i]->op(&ctx, &vals[i], nodes[i]->oid.len, nodes[i]->index,
		    SNMP_OP_SET);
		if (err != 0) {
			printf("assignment to %s returns %d\n", assigns[i].name, err);
			value_free(&vals[i]);
			failed = i;
			break;
		}
	}
	if (failed >= 0) {
		while (failed-- > 0) {
			ctx.scratch = &scratch[failed];
			nodes[failed]->op(&ctx, &vals[failed], nodes[failed]->oid.len,
			    nodes[failed]->index, SNMP_OP_ROLLBACK);
			value_free(&vals[failed]);
		}
		/* bsnmpd's lm_start unloads a module whose section fails */
		printf("error in config file\n");
		nassigns = 0;
		lm_unload();
		return;
	} else {
		for (i = 0; i < nassigns; i++) {
			ctx.scratch = &scratch[i];
			nodes[i]->op(&ctx, &vals[i], nodes[i]->oid.len, nodes[i]->index,
			    SNMP_OP_COMMIT);
			value_free(&vals[i]);
		}
	}
	nassigns = 0;
	if (c->start)
		c->start();
	module->started = 1;
	printf("started\n");
}

static void
lm_unload(void)
{
	u_int s, d;

	if (module == NULL) {
		printf("not loaded\n");
		return;
	}
	for (s = d = 0; s < tree_size; s++)
		if (tree[s].tree_data != module)
			tree[d++] = tree[s];
	tree_size = d;
	if (module->started && module->config->fini)
		printf("fini: %d\n", module->config->fini());
	for (int i = 0; i < MAX_TIMERS; i++)
		if (timers[i].used && timers[i].owner == module)
			timers[i].used = 0;
	for (int i = 0; i < MAX_FDS; i++)
		if (fds[i].used && fds[i].owner == module)
			fds[i].used = 0;
	printf("dlclose: %d\n", dlclose(module->handle));
	free(module);
	module = NULL;
}

/* ---- the loop ---- */
static char inbuf[65536];
static size_t inlen;
static int stdin_eof;
/* A command runs inside the stdin callback; its own passes must not read stdin again. */
static int in_command;

/* One pass of bsnmpd's loop: idle, then wait for descriptors or timers. */
static void
pass(int timeout_ms)
{
	struct pollfd p[MAX_FDS];
	int map[MAX_FDS], n = 0;
	uint64_t now = now_ms();

	if (module != NULL && module->config->idle != NULL)
		module->config->idle();
	for (int i = 0; i < MAX_TIMERS; i++)
		if (timers[i].used) {
			int64_t left = (int64_t)(timers[i].due_ms - now);
			if (left < 0)
				left = 0;
			if (timeout_ms < 0 || left < timeout_ms)
				timeout_ms = (int)left;
		}
	for (int i = 0; i < MAX_FDS; i++)
		if (fds[i].used && !(in_command && fds[i].fd == 0)) {
			p[n].fd = fds[i].fd;
			p[n].events = POLLIN;
			map[n++] = i;
		}
	if (poll(p, n, timeout_ms) < 0 && errno != EINTR)
		exit(2);
	now = now_ms();
	for (int i = 0; i < MAX_TIMERS; i++)
		if (timers[i].used && timers[i].due_ms <= now) {
			if (timers[i].repeat_ms)
				timers[i].due_ms = now + timers[i].repeat_ms;
			else
				timers[i].used = 0;
			timers[i].func(timers[i].udata);
		}
	for (int k = 0; k < n; k++)
		if ((p[k].revents & (POLLIN | POLLHUP | POLLERR)) && fds[map[k]].used &&
		    fds[map[k]].fd == p[k].fd)
			fds[map[k]].func(p[k].fd, fds[map[k]].udata);
}

static void
run_for(int ms)
{
	uint64_t end = now_ms() + ms;
	for (uint64_t t = now_ms(); t < end; t = now_ms())
		pass((int)(end - t));
}

static void
walk(const char *root, int maxrep)
{
	struct asn_oid prefix, cur;
	struct snmp_value last;
	int pdus = 0;

	if (parse_oid(root, &prefix) != 0) {
		printf("bad OID\n");
		return;
	}
	cur = prefix;
	for (;;) {
		int got = pdu_getbulk(maxrep ? 0 : 1, maxrep ? maxrep : 0, &cur, 1, &last, 1,
		    &prefix);
		pdus++;
		if (got <= 0 || last.syntax == SNMP_SYNTAX_ENDOFMIBVIEW ||
		    !is_suboid(&prefix, &last.var))
			break;
		cur = last.var;
	}
	printf("pdus %d\n", pdus);
}

static void
command(char *line)
{
	char *av[3 * MAX_BINDINGS + 4];
	int ac = 0;
	struct asn_oid oids[MAX_BINDINGS];

	for (char *t = strtok(line, " \t"); t && ac < (int)(sizeof(av) / sizeof(av[0]));
	    t = strtok(NULL, " \t"))
		av[ac++] = t;
	if (ac == 0)
		return;
	if (strcmp(av[0], "quit") == 0) {
		if (module != NULL)
			lm_unload();
		printf(".\n");
		fflush(stdout);
		exit(0);
	} else if (strcmp(av[0], "load") == 0 && ac >= 3) {
		lm_load(av + 1, ac - 1);
	} else if (strcmp(av[0], "config") == 0 && ac >= 2 && nassigns < MAX_ASSIGN) {
		snprintf(assigns[nassigns].name, sizeof(assigns[0].name), "%s", av[1]);
		snprintf(assigns[nassigns].value, sizeof(assigns[0].value), "%s",
		    ac >= 3 ? av[2] : "");
		nassigns++;
	} else if (strcmp(av[0], "start") == 0 && module != NULL) {
		lm_start();
	} else if (strcmp(av[0], "unload") == 0) {
		lm_unload();
	} else if ((strcmp(av[0], "get") == 0 || strcmp(av[0], "getnext") == 0) && ac >= 2) {
		int n = 0;
		for (int i = 1; i < ac && n < MAX_BINDINGS; i++)
			if (parse_oid(av[i], &oids[n++]) != 0) {
				printf("bad OID %s\n", av[i]);
				goto done;
			}
		if (av[0][3] == 0)
			pdu_get(oids, n);
		else
			pdu_getbulk(n, 0, oids, n, NULL, 0, NULL);
	} else if (strcmp(av[0], "getbulk") == 0 && ac >= 4) {
		int n = 0;
		for (int i = 3; i < ac && n < MAX_BINDINGS; i++)
			if (parse_oid(av[i], &oids[n++]) != 0) {
				printf("bad OID %s\n", av[i]);
				goto done;
			}
		pdu_getbulk(atoi(av[1]), atoi(av[2]), oids, n, NULL, 0, NULL);
	} else if (strcmp(av[0], "set") == 0 && ac >= 4) {
		pdu_set(av + 1, ac - 1);
	} else if (strcmp(av[0], "walk") == 0 && ac >= 2) {
		walk(av[1], ac >= 3 ? atoi(av[2]) : 0);
	} else if (strcmp(av[0], "run") == 0 && ac >= 2) {
		run_for(atoi(av[1]));
	} else if (strcmp(av[0], "dump") == 0) {
		if (module != NULL && module->config->dump != NULL)
			module->config->dump();
		fflush(stderr);
	} else if (strcmp(av[0], "orlist") == 0) {
		for (int i = 0; i < MAX_OR; i++)
			if (ortable[i].index) {
				printf("%u ", ortable[i].index);
				print_oid(stdout, &ortable[i].oid);
				printf(" %s\n", ortable[i].descr);
			}
	} else if (strcmp(av[0], "traps") == 0) {
		fwrite(traplog, 1, traplen, stdout);
		traplen = 0;
	} else if (strcmp(av[0], "tree") == 0) {
		for (u_int i = 0; i < tree_size; i++) {
			printf("%s %s ", tree[i].type == SNMP_NODE_LEAF ? "LEAF" : "COLUMN",
			    tree[i].name);
			print_oid(stdout, &tree[i].oid);
			printf(" syntax=%d index=%u\n", tree[i].syntax, tree[i].index);
		}
	} else {
		printf("unknown command %s\n", av[0]);
	}
  done:
	printf(".\n");
	fflush(stdout);
}

static void
on_stdin(int fd, void *udata)
{
	(void)udata;
	ssize_t n = read(fd, inbuf + inlen, sizeof(inbuf) - 1 - inlen);
	if (n <= 0) {
		stdin_eof = 1;
		return;
	}
	inlen += n;
	char *nl;
	while ((nl = memchr(inbuf, '\n', inlen)) != NULL) {
		*nl = 0;
		char line[sizeof(inbuf)];
		size_t len = nl - inbuf + 1;
		memcpy(line, inbuf, len);
		memmove(inbuf, inbuf + len, inlen - len);
		inlen -= len;
		in_command = 1;
		command(line);
		in_command = 0;
	}
}

int
main(void)
{
	/* bsnmpd leaves SIGPIPE at its default (fatal); so does the host, whatever it inherited. */
	signal(SIGPIPE, SIG_DFL);
	openlog("bsnmp-host", LOG_PERROR | LOG_PID, LOG_USER);
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	start_tick = get_ticks();
	fd_select(0, on_stdin, NULL, NULL);
	while (!stdin_eof)
		pass(-1);
	if (module != NULL)
		lm_unload();
	return (0);
}
