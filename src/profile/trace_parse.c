/* trace_parse.c - one line of tracefs text output (trace_pipe) into a struct trace_line: the kvm events brisk uses. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/profile.h"

/*
 * The line format is the kernel's default trace output
 * (kernel/trace/trace_output.c, trace_print_context + the event's print fmt):
 *
 *   "  COMM-TID  [CPU] FLAGS  SECS.USECS: EVENT: PAYLOAD"
 *
 * COMM may contain spaces and dashes ("CPU 0/KVM-1234"); "(TGID)" follows
 * TID with the record-tgid option; FLAGS (irq-info) may be absent. Payloads
 * follow the TP_printk formats of include/trace/events/kvm.h and
 * arch/x86/kvm/trace.h; fields are looked up by their printed key so that
 * older layouts (kvm_exit without "vcpu N", kvm_cpuid without "idx") parse too.
 */

static const char *const ev_names[TEV__COUNT] = {
    [TEV_KVM_EXIT] = "kvm_exit",
    [TEV_KVM_EMULATE_INSN] = "kvm_emulate_insn",
    [TEV_KVM_CPUID] = "kvm_cpuid",
    [TEV_KVM_MSR] = "kvm_msr",
    [TEV_KVM_PIO] = "kvm_pio",
    [TEV_KVM_MMIO] = "kvm_mmio",
    [TEV_KVM_HYPERCALL] = "kvm_hypercall",
    [TEV_OTHER] = "other",
};

const char *trace_ev_name(enum trace_ev e)
{
	return e < TEV__COUNT ? ev_names[e] : "?";
}

static enum trace_ev ev_of(const char *name, size_t len)
{
	for (int e = 0; e < TEV_OTHER; e++)
		if (strlen(ev_names[e]) == len && memcmp(ev_names[e], name, len) == 0)
			return (enum trace_ev)e;
	return TEV_OTHER;
}

/* "CPU:N [LOST M EVENTS]" (kernel/trace/trace.c print_trace_line). */
static int parse_lost(const char *line, uint64_t *lost)
{
	const char *p = strstr(line, "[LOST ");
	char *end;

	if (!p || strncmp(line + strspn(line, " "), "CPU:", 4) != 0)
		return 0;
	*lost = strtoull(p + 6, &end, 10);
	return end != p + 6 && strncmp(end, " EVENTS]", 8) == 0;
}

/*
 * Finds "-TID [CPU]" (optionally "-TID (TGID) [CPU]"): fills tid, comm, cpu
 * and returns the character after ']', or NULL.
 */
static const char *parse_context(const char *line, struct trace_line *out)
{
	for (const char *b = strchr(line, '['); b; b = strchr(b + 1, '[')) {
		const char *q = b, *d;
		char *end;

		if (!isdigit((unsigned char)b[1]) || !strchr(b, ']'))
			continue;
		out->cpu = (int)strtol(b + 1, &end, 10);
		if (*end != ']')
			continue;
		while (q > line && q[-1] == ' ')
			q--;
		if (q > line && q[-1] == ')') { /* record-tgid: "(  123)" or "(-------)" */
			while (q > line && q[-1] != '(')
				q--;
			if (q == line)
				continue;
			q--;
			while (q > line && q[-1] == ' ')
				q--;
		}
		d = q;
		while (d > line && isdigit((unsigned char)d[-1]))
			d--;
		if (d == q || d == line || d[-1] != '-')
			continue;
		out->tid = (pid_t)strtol(d, NULL, 10);
		{
			const char *c = line + strspn(line, " ");
			size_t n =
			    (size_t)(d - 1 - c) < sizeof(out->comm) - 1 ? (size_t)(d - 1 - c) : sizeof(out->comm) - 1;

			if (d - 1 < c)
				n = 0;
			memcpy(out->comm, c, n);
			out->comm[n] = '\0';
		}
		return end + 1;
	}
	return NULL;
}

/* After the context: [FLAGS] SECS.USECS: EVENT: -> fills ts_ns and ev; returns the payload. */
static const char *parse_time_event(const char *p, struct trace_line *out)
{
	for (int tok = 0; tok < 2; tok++) {
		char *end;
		const char *s = p + strspn(p, " ");
		unsigned long long sec = strtoull(s, &end, 10), frac = 0;
		int digits = 0;

		if (end != s && *end == '.') {
			const char *f = end + 1;

			while (isdigit((unsigned char)*f) && digits < 9) {
				frac = frac * 10 + (unsigned)(*f++ - '0');
				digits++;
			}
			if (*f == ':' && digits > 0) {
				const char *name = f + 1 + strspn(f + 1, " "), *colon = strchr(name, ':');

				while (digits++ < 9)
					frac *= 10;
				if (!colon)
					return NULL;
				out->ts_ns = sec * 1000000000ull + frac;
				out->ev = ev_of(name, (size_t)(colon - name));
				return colon + 1;
			}
		}
		p = s + strcspn(s, " "); /* skip the flags token */
	}
	return NULL;
}

/* The number after "KEY " in payload (base 16 or 10), or -1 when absent. */
static int field(const char *payload, const char *key, int base, uint64_t *out)
{
	size_t klen = strlen(key);

	for (const char *p = strstr(payload, key); p; p = strstr(p + 1, key)) {
		char *end;

		if ((p != payload && p[-1] != ' ' && p[-1] != ',') || p[klen] != ' ')
			continue;
		*out = strtoull(p + klen + 1, &end, base);
		return end == p + klen + 1 ? -1 : 0;
	}
	return -1;
}

/* kvm_exit: "[vcpu N ]reason R rip 0xRIP info1 ..." (VMX: "reason EXIT_REASON rip ..."). */
static int parse_exit(const char *pl, struct trace_line *o)
{
	const char *r = strstr(pl, "reason ");
	size_t n;

	if (!r || field(pl, "rip", 16, &o->rip))
		return -1;
	r += 7;
	n = strcspn(r, " ");
	if (n >= sizeof(o->reason))
		n = sizeof(o->reason) - 1;
	memcpy(o->reason, r, n);
	o->reason[n] = '\0';
	o->has_rip = 1;
	return 0;
}

/* kvm_emulate_insn: "CSBASE:RIP:BYTES (MODE)[ failed]"; the linear RIP is CSBASE + RIP outside 64-bit mode. */
static int parse_emulate(const char *pl, struct trace_line *o)
{
	char *end;
	uint64_t cs = strtoull(pl, &end, 16);

	if (*end != ':')
		return -1;
	o->rip = strtoull(end + 1, &end, 16);
	if (*end != ':')
		return -1;
	if (!strstr(end, "(prot64)"))
		o->rip += cs;
	o->has_rip = 1;
	return 0;
}

/* kvm_cpuid: "func F idx I rax A rbx B rcx C rdx D, cpuid entry ..." (idx absent before Linux 4.x). */
static int parse_cpuid(const char *pl, struct trace_line *o)
{
	static const char *const regs[4] = {"rax", "rbx", "rcx", "rdx"};
	uint64_t v = 0;

	if (field(pl, "func", 16, &v))
		return -1;
	o->leaf = (uint32_t)v;
	o->subleaf = field(pl, "idx", 16, &v) ? 0 : (uint32_t)v;
	for (int i = 0; i < 4; i++)
		if (field(pl, regs[i], 16, &o->regs[i]))
			return -1;
	return 0;
}

/* kvm_msr: "msr_read|msr_write IDX = 0xDATA[ (#GP)]". */
static int parse_msr(const char *pl, struct trace_line *o)
{
	const char *p = pl + strspn(pl, " ");
	char *end;

	if (strncmp(p, "msr_read ", 9) == 0)
		o->write = 0;
	else if (strncmp(p, "msr_write ", 10) == 0)
		o->write = 1;
	else
		return -1;
	p = strchr(p, ' ') + 1;
	o->msr = (uint32_t)strtoul(p, &end, 16);
	if (end == p || strncmp(end, " = ", 3) != 0)
		return -1;
	o->regs[0] = strtoull(end + 3, NULL, 16);
	o->gp = strstr(end, "(#GP)") != NULL;
	return 0;
}

/* kvm_pio: "pio_read|pio_write at 0xPORT size S count C val 0xV". */
static int parse_pio(const char *pl, struct trace_line *o)
{
	o->write = strstr(pl, "pio_write") != NULL;
	return field(pl, "at", 16, &o->addr);
}

/* kvm_mmio: "mmio read|write|unsatisfied-read len L gpa 0xGPA val 0xV". */
static int parse_mmio(const char *pl, struct trace_line *o)
{
	o->write = strstr(pl, "mmio write") != NULL;
	return field(pl, "gpa", 16, &o->addr);
}

static int parse_payload(const char *pl, struct trace_line *o)
{
	switch (o->ev) {
	case TEV_KVM_EXIT:
		return parse_exit(pl, o);
	case TEV_KVM_EMULATE_INSN:
		return parse_emulate(pl + strspn(pl, " "), o);
	case TEV_KVM_CPUID:
		return parse_cpuid(pl, o);
	case TEV_KVM_MSR:
		return parse_msr(pl, o);
	case TEV_KVM_PIO:
		return parse_pio(pl, o);
	case TEV_KVM_MMIO:
		return parse_mmio(pl, o);
	case TEV_KVM_HYPERCALL:
		return field(pl, "nr", 16, &o->nr);
	default:
		return 0;
	}
}

enum trace_parse_result trace_parse_line(const char *line, struct trace_line *out, uint64_t *lost)
{
	const char *p;

	memset(out, 0, sizeof(*out));
	if (line[strspn(line, " \t\r\n")] == '\0' || line[strspn(line, " ")] == '#')
		return TP_IGNORED;
	if (parse_lost(line, lost))
		return TP_LOST;
	p = parse_context(line, out);
	if (!p || !(p = parse_time_event(p, out)))
		return TP_MALFORMED;
	if (out->ev == TEV_OTHER)
		return TP_IGNORED;
	return parse_payload(p, out) ? TP_MALFORMED : TP_EVENT;
}
