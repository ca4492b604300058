/*
 * gen_fc_template_seeds.c - writes fuzz_fc_template seeds (Firecracker custom CPU template JSON) into a corpus
 * directory (argv[1]): Firecracker's own test template, the shapes its static templates have, and what the
 * unit tests refuse.
 */
#include <stdio.h>
#include <string.h>

#include "seed_save.h"

static const struct {
	const char *name, *json;
} seeds[] = {
    /* Firecracker v1.7.0 test_utils.rs TEST_TEMPLATE_JSON (shortened) */
    {"seed-fc-test",
     "{\"cpuid_modifiers\": [{\"leaf\": \"0x80000001\", \"subleaf\": \"0x0007\", \"flags\": 0, \"modifiers\": "
     "[{\"register\": \"eax\", \"bitmap\": \"0bx00100xxx1xxxxxxxxxxxxxxxxxxxxx1\"}]}, {\"leaf\": \"0x80000002\", "
     "\"subleaf\": \"0x0004\", \"flags\": 0, \"modifiers\": [{\"register\": \"ebx\", \"bitmap\": "
     "\"0bxxx1xxxxxxxxxxxxxxxxxxxxx1\"}]}], \"msr_modifiers\": [{\"addr\": \"0x0\", \"bitmap\": "
     "\"0bx00100xxx1xxxx00xxx1xxxxxxxxxxx1\"}, {\"addr\": \"0b11\", \"bitmap\": "
     "\"0bx00100xxx1xxxxxx0000000xxxxxxxx1\"}]}"},
    /* the shape of T2A's leaf 1 and 7 (applies on the AMD fixture) and T2S's MSR */
    {"seed-t2a-like",
     "{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0x0\", \"flags\": 0, \"modifiers\": [{\"register\": "
     "\"eax\", \"bitmap\": \"0bxxxx000000000011xx00011011110010\"}, {\"register\": \"ecx\", \"bitmap\": "
     "\"0bxxxxxxxxxxxxx0xx00xx00x0000000xx\"}]}, {\"leaf\": \"0x7\", \"subleaf\": \"0x0\", \"flags\": 1, "
     "\"modifiers\": [{\"register\": \"ebx\", \"bitmap\": \"0b00000000000x000000x00x1xxxx0x0xx\"}]}, {\"leaf\": "
     "\"0xd\", \"subleaf\": \"0x1\", \"flags\": 1, \"modifiers\": [{\"register\": \"eax\", \"bitmap\": "
     "\"0bxxxxxxxxxxxxxxxxxxxxxxxxxxxx000x\"}]}]}"},
    {"seed-t2s-msr",
     "{\"msr_modifiers\": [{\"addr\": \"0x10a\", \"bitmap\": "
     "\"0b0000000000000000000000000000000000000100000010000000110001001100\"}, {\"addr\": \"0x1a0\", \"bitmap\": "
     "\"0b1_x\"}], \"kvm_capabilities\": [\"33\", \"!7\"]}"},
    {"seed-empty", "{ }"},
    /* refusals */
    {"seed-bad-register", "{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0x0\", \"flags\": 0, "
			  "\"modifiers\": [{\"register\": \"ekx\", \"bitmap\": \"0b1\"}]}]}"},
    {"seed-bad-number", "{\"msr_modifiers\": [{\"addr\": \"0jj0\", \"bitmap\": \"0b1\"}]}"},
    {"seed-bad-bitmap", "{\"msr_modifiers\": [{\"addr\": \"0x200\", \"bitmap\": \"0bx0?1_0_0x_?x1xxxx00xxx1\"}]}"},
    {"seed-unknown", "{\"reg_modifiers\": []}"},
    {"seed-missing", "{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"flags\": 0, \"modifiers\": []}]}"},
    {"seed-flags",
     "{\"cpuid_modifiers\": [{\"leaf\": \"0x1\", \"subleaf\": \"0x0\", \"flags\": -1, \"modifiers\": []}]}"},
};

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
		bad |= seed_save(argv[1], seeds[i].name, seeds[i].json, strlen(seeds[i].json));
	return bad;
}
