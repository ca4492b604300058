/* test_init_modparams.c - the test init's module parameters from the kernel command line
 * (tests/linux/init_modparams.c: what modprobe would pass to finit_module). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

/* the init's file itself (it is part of the guest's static init, not of libbrisk) */
#include "../linux/init_modparams.c"

static const char *params(const char *cmdline, const char *module)
{
	static char out[4096];
	assert_true(module_params(cmdline, module, out, sizeof(out)) >= 0);
	return out;
}

/* Kata's command line with brisk's device words: each virtio_mmio word, in order, and nothing else */
static void test_virtio_mmio_words(void **state)
{
	(void)state;
	const char *cmdline = "console=ttyS0 pci=off reboot=k panic=1 iommu=off net.ifnames=0 random.trust_cpu=on "
			      "acpi=off brisk.virtio=1 virtio_mmio.device=4K@0xd0001000:5 "
			      "virtio_mmio.device=4K@0xd0002000:6";
	assert_string_equal(params(cmdline, "virtio_mmio"), "device=4K@0xd0001000:5 device=4K@0xd0002000:6");
	assert_string_equal(params(cmdline, "virtio_blk"), "");
	assert_string_equal(params(cmdline, "net"), "ifnames=0");
	assert_string_equal(params(cmdline, "random"), "trust_cpu=on");
	/* "brisk.virtio=1" is module brisk's, not virtio's */
	assert_string_equal(params(cmdline, "virtio"), "");
	assert_string_equal(params(cmdline, "brisk"), "virtio=1");
}

/* '-' and '_' are the same in the module name, either side (kernel/params.c parameqn) */
static void test_dash_underscore(void **state)
{
	(void)state;
	assert_string_equal(params("virtio-mmio.device=4K@0x1000:5", "virtio_mmio"), "device=4K@0x1000:5");
	assert_string_equal(params("virtio_rng.x=1 virtio-rng.y=2", "virtio-rng"), "x=1 y=2");
	assert_string_equal(params("virtio_mmiox.device=1 virtio_mmi.device=2", "virtio_mmio"), "");
}

/* only the kernel's parameters: nothing after "--" (init's arguments) */
static void test_stops_at_double_dash(void **state)
{
	(void)state;
	assert_string_equal(params("virtio_mmio.device=A -- virtio_mmio.device=B", "virtio_mmio"), "device=A");
	/* "--=x" is a word with a value, not the separator */
	assert_string_equal(params("--=x virtio_mmio.device=A", "virtio_mmio"), "device=A");
}

/* quotes as lib/cmdline.c next_arg reads them; a value with a blank is passed on quoted */
static void test_quotes(void **state)
{
	(void)state;
	assert_string_equal(params("m.p=\"a b\" m.q=c", "m"), "p=\"a b\" q=c");
	assert_string_equal(params("\"m.p=a b\" m.q", "m"), "p=\"a b\" q");
	assert_string_equal(params("x=\"m.p=1 m.q=2\" m.r=3", "m"), "r=3");
}

/* words that are no module's parameter: no '.', nothing after it, or the '.' in the value */
static void test_not_parameters(void **state)
{
	(void)state;
	assert_string_equal(params("m. .p=1 m=x.y root=/dev/vda m.=3", "m"), "");
	assert_string_equal(params("", "m"), "");
	assert_string_equal(params("   m.flag   ", "m"), "flag");
}

/* what does not fit is refused (-1), what did is kept */
static void test_too_long(void **state)
{
	(void)state;
	char out[16];
	assert_int_equal(module_params("m.a=1 m.bbbbbbbbbbbbbbbbbbbb=2 m.c=3", "m", out, sizeof(out)), -1);
	assert_string_equal(out, "a=1 c=3");
	assert_int_equal(module_params("m.a=1", "m", out, sizeof(out)), 3);
	char big[5000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_int_equal(module_params(big, "m", out, sizeof(out)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_virtio_mmio_words),	 cmocka_unit_test(test_dash_underscore),
	    cmocka_unit_test(test_stops_at_double_dash), cmocka_unit_test(test_quotes),
	    cmocka_unit_test(test_not_parameters),	 cmocka_unit_test(test_too_long),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
