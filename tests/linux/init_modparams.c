/*
 * init_modparams.c - a module's parameters from the kernel command line, for the test init's finit_module
 * (tests/linux/init.c load_modules). Part of the init's static binary (mkinitramfs.sh); also compiled into
 * tests/unit/test_init_modparams.c.
 *
 * Why: for a loadable module the kernel does not apply "MODNAME.PARAM=VALUE" words of its command line itself
 * (they are only kept in /proc/cmdline; Linux kernel/params.c parse_args treats them as unknown at boot). In a
 * normal system modprobe reads /proc/cmdline and passes them to the module it loads (kmod's
 * libkmod-config.c, kcmdline parsing); the test init loads its modules with finit_module, so it does the same.
 * That is how "virtio_mmio.device=4K@0xADDR:IRQ" words reach a virtio_mmio.ko built with
 * CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES (tests/linux/build-virtio-mmio.sh).
 *
 * The rules are the kernel's:
 *  - words as lib/cmdline.c next_arg splits them: blank-separated, a double quote toggles quoting (a quoted
 *    stretch is part of one word), a leading quote of a word and the closing one of its value are dropped;
 *  - only the kernel's own parameters count: those before a word "--" (what follows is init's, parse_args);
 *  - PARAM's module is the part of the name (before '=') up to its first '.'; '-' and '_' are the same in it
 *    (parameqn), so "virtio-mmio.device=" is virtio_mmio's too;
 *  - a word with no value ("MOD.flag") is passed as "flag" (a bool parameter set to true).
 * Each parameter is handed on as "PARAM=VALUE" (VALUE quoted when it holds a blank, so the module's own
 * parse_args splits it the same way), in command-line order, blank-separated.
 */
#include <stdio.h>
#include <string.h>

#include "init.h"

/* lib/cmdline.c next_arg: the next word at *p (blanks skipped) split into name and value (NULL without '=').
 * Writes NULs into the buffer; advances *p. Returns 0 at the end. */
static int next_word(char **p, char **name, char **value)
{
	char *s = *p;
	while (*s == ' ' || *s == '\t' || *s == '\n')
		s++;
	if (!*s)
		return 0;
	int quoted = 0, in_quote = 0;
	size_t eq = 0, i;
	if (*s == '"') {
		s++;
		in_quote = 1;
		quoted = 1;
	}
	for (i = 0; s[i]; i++) {
		if ((s[i] == ' ' || s[i] == '\t' || s[i] == '\n') && !in_quote)
			break;
		if (eq == 0 && s[i] == '=')
			eq = i;
		if (s[i] == '"')
			in_quote = !in_quote;
	}
	*name = s;
	*value = NULL;
	if (eq) {
		s[eq] = 0;
		*value = s + eq + 1;
		if (**value == '"') {
			(*value)++;
			quoted = 1;
		}
	}
	if (quoted && i > 0 && s[i - 1] == '"')
		s[i - 1] = 0;
	*p = s[i] ? s + i + 1 : s + i;
	if (s[i])
		s[i] = 0;
	return 1;
}

/* Whether the module part of `param` (up to its first '.') is `module`, '-' and '_' being the same. */
static const char *param_of(const char *param, const char *module)
{
	const char *dot = strchr(param, '.');
	if (!dot || dot == param || dot[1] == 0)
		return NULL;
	size_t n = (size_t)(dot - param);
	if (strlen(module) != n)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		char a = param[i] == '-' ? '_' : param[i], b = module[i] == '-' ? '_' : module[i];
		if (a != b)
			return NULL;
	}
	return dot + 1;
}

int module_params(const char *cmdline, const char *module, char *out, size_t size)
{
	char buf[4096];
	size_t used = 0;
	int fits = 1;
	if (size == 0)
		return -1;
	out[0] = 0;
	if (strlen(cmdline) >= sizeof(buf))
		return -1;
	strcpy(buf, cmdline);
	char *p = buf, *name, *value;
	while (next_word(&p, &name, &value)) {
		if (!value && !strcmp(name, "--"))
			break; /* the rest is init's */
		const char *param = param_of(name, module);
		if (!param)
			continue;
		const char *q = value && strpbrk(value, " \t\n") ? "\"" : "";
		size_t need = strlen(param) + (value ? 1 + strlen(value) + 2 * strlen(q) : 0) + (used ? 1 : 0);
		if (used + need >= size) {
			fits = 0;
			continue;
		}
		used += (size_t)snprintf(out + used, size - used, "%s%s%s%s%s%s", used ? " " : "", param,
					 value ? "=" : "", q, value ? value : "", q);
	}
	return fits ? (int)used : -1;
}
