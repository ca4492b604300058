/*
 * gen_cpu_template_seeds.c - writes fuzz_cpu_template seeds (CPU-template JSON texts) into a corpus directory
 * (argv[1]): the templates docs/cpuid.md and the tests use, then edge cases of numbers, keys and structure.
 */
#include <stdio.h>
#include <string.h>

#include "seed_save.h"

static const struct {
	const char *name, *json;
} seeds[] = {
    /* docs/cpuid.md's example; tests/unit/test_cpuid.c test_json_template (applies on the Intel fixture) */
    {"seed-docs",
     "{\n  \"description\": \"optional text\",\n  \"cpuid\": [\n    {\"leaf\": \"0x7\", \"subleaf\": 0, \"register\": "
     "\"ebx\", \"mask\": \"0x20\", \"value\": \"0x0\"}\n  ],\n  \"msrs\": [\n    {\"index\": \"0x1a0\", \"value\": "
     "\"0x1\"}\n  ]\n}\n"},
    {"seed-unit-no-avx",
     "{\"description\": \"no AVX2, no AVX\",\n \"cpuid\": [{\"leaf\": \"0x7\", \"subleaf\": 0, \"register\": \"ebx\", "
     "\"mask\": \"0x20\", \"value\": \"0x0\"},\n  {\"leaf\": 1, \"register\": \"ecx\", \"mask\": \"0x10000000\", "
     "\"value\": 0},\n  {\"leaf\": \"0x80000008\", \"register\": \"eax\", \"mask\": \"0xff\", \"value\": \"0x28\"}],\n"
     " \"msrs\": [{\"index\": \"0x1a0\", \"value\": \"0x0\"}]}\n"},
    /* what the tests refuse (tests/unit/test_cpuid.c, tests/integration/test_cpuid.py) */
    {"seed-leaf-unknown", "{\"cpuid\": [{\"leaf\": \"0x1234\", \"register\": \"eax\", \"mask\": 1, \"value\": 1}]}"},
    {"seed-subleaf-unknown",
     "{\"cpuid\": [{\"leaf\": 7, \"subleaf\": 5, \"register\": \"eax\", \"mask\": 1, \"value\": 1}]}"},
    {"seed-feature-bit", "{\"cpuid\": [{\"leaf\": 7, \"register\": \"ebx\", \"mask\": \"0x2\", \"value\": \"0x2\"}]}"},
    {"seed-value-outside-mask",
     "{\"cpuid\": [{\"leaf\": 1, \"register\": \"ecx\", \"mask\": \"0x1\", \"value\": \"0x3\"}]}"},
    {"seed-msr-unknown", "{\"msrs\": [{\"index\": \"0x123\", \"value\": 1}]}"},
    {"seed-missing-value", "{\"cpuid\": [], \"msrs\": [{\"index\": 1}]}"},
    {"seed-unfinished", "{\"cpuid\": [{\"leaf\": 1,"},
    {"seed-trailing", "{\"cpuid\": []} x"},
    {"seed-nul", "{}\0{"},
    /* numbers: hex and decimal strings, JSON integers, the extremes of each range */
    {"seed-numbers",
     "{\"cpuid\": [{\"leaf\": 0, \"subleaf\": \"0\", \"register\": \"eax\", \"mask\": 4294967295, \"value\": 31},"
     " {\"leaf\": \"1\", \"register\": \"edx\", \"mask\": \"0xffffffff\", \"value\": \"0x078bfbff\"},"
     " {\"leaf\": \"0x80000001\", \"register\": \"ecx\", \"mask\": \"0X1\", \"value\": \"0\"},"
     " {\"leaf\": \"017\", \"register\": \"ebx\", \"mask\": \"0x0\", \"value\": \"0x0\"}]}"},
    {"seed-extremes",
     "{\"cpuid\": [{\"leaf\": \"0xffffffff\", \"subleaf\": \"0xffffffff\", \"register\": \"edx\", \"mask\": "
     "\"0xffffffff\", \"value\": \"0xffffffff\"}, {\"leaf\": 4294967296, \"register\": \"eax\", \"mask\": 1, "
     "\"value\": 1}, {\"leaf\": \"0x100000000\", \"register\": \"eax\", \"mask\": 1, \"value\": 1}],"
     " \"msrs\": [{\"index\": \"0xffffffff\", \"value\": \"0xffffffffffffffff\"}, {\"index\": 0, \"value\": "
     "18446744073709551615}, {\"index\": \"4294967295\", \"value\": 9223372036854775807}]}"},
    {"seed-negative",
     "{\"cpuid\": [{\"leaf\": -1, \"subleaf\": \"-0\", \"register\": \"ecx\", \"mask\": -0, \"value\": "
     "-9223372036854775808}], \"msrs\": [{\"index\": \"-1\", \"value\": \" 1\"}]}"},
    {"seed-not-numbers",
     "{\"cpuid\": [{\"leaf\": 1.5, \"register\": \"ecx\", \"mask\": 1e3, \"value\": true}, {\"leaf\": \"\", "
     "\"register\": null, \"mask\": \"0x\", \"value\": \"0x1zz\"}, {\"leaf\": [], \"register\": {}, \"mask\": "
     "\"1 \", \"value\": \"+1\"}]}"},
    /* every register of the leaves brisk derives afterwards (0xD, 0xB, 0x1F) and the KVM leaves */
    {"seed-derived",
     "{\"cpuid\": [{\"leaf\": \"0xd\", \"subleaf\": 0, \"register\": \"eax\", \"mask\": \"0xe4\", \"value\": 0},"
     " {\"leaf\": \"0xd\", \"subleaf\": 1, \"register\": \"ecx\", \"mask\": \"0xffffffff\", \"value\": 0},"
     " {\"leaf\": \"0xb\", \"subleaf\": 1, \"register\": \"ebx\", \"mask\": \"0xffff\", \"value\": \"0x40\"},"
     " {\"leaf\": \"0x1f\", \"subleaf\": 2, \"register\": \"ecx\", \"mask\": \"0xff00\", \"value\": \"0x200\"},"
     " {\"leaf\": 1, \"register\": \"ecx\", \"mask\": \"0x84000000\", \"value\": \"0x0\"},"
     " {\"leaf\": \"0x40000001\", \"register\": \"eax\", \"mask\": \"0xffffffff\", \"value\": \"0\"}]}"},
    /* AMD: the leaves an AMD KVM reports (applies on the PVM dump) */
    {"seed-derived-amd",
     "{\"cpuid\": [{\"leaf\": \"0x8000001e\", \"register\": \"ebx\", \"mask\": \"0xff00\", \"value\": \"0x100\"},"
     " {\"leaf\": \"0xb\", \"subleaf\": 0, \"register\": \"edx\", \"mask\": \"0xff\", \"value\": \"0x3\"},"
     " {\"leaf\": \"0x40000001\", \"register\": \"eax\", \"mask\": \"0x1\", \"value\": \"0x1\"}]}"},
    /* the same register twice: the later item wins where the masks overlap */
    {"seed-overlap", "{\"cpuid\": [{\"leaf\": 1, \"register\": \"ecx\", \"mask\": \"0xff\", \"value\": \"0x01\"},"
		     " {\"leaf\": 1, \"register\": \"ecx\", \"mask\": \"0x0f\", \"value\": \"0x00\"},"
		     " {\"leaf\": 1, \"subleaf\": 9, \"register\": \"ecx\", \"mask\": \"0x1\", \"value\": \"0x1\"}],"
		     " \"msrs\": [{\"index\": \"0x1a0\", \"value\": 1}, {\"index\": 416, \"value\": 2}]}"},
    /* duplicate keys (json-c keeps the last), unknown and missing keys */
    {"seed-duplicate-keys",
     "{\"cpuid\": [{\"leaf\": 1, \"leaf\": \"0x7\", \"register\": \"ebx\", \"register\": \"ecx\", \"mask\": 1, "
     "\"value\": 0}], \"cpuid\": [], \"msrs\": [], \"msrs\": [{\"index\": \"0x10\", \"value\": 0, \"value\": 1}]}"},
    {"seed-unknown-key", "{\"cpuid\": [], \"description\": \"x\", \"extra\": {\"leaf\": 1}}"},
    /* nesting: json-c's depth limit, and arrays where objects belong */
    {"seed-deep",
     "{\"cpuid\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{\"leaf\": 1}]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"},
    {"seed-deep-ok",
     "{\"description\": \"d\", \"cpuid\": [{\"leaf\": {\"a\": [{\"b\": [{\"c\": [1]}]}]}, \"register\": \"eax\", "
     "\"mask\": 1, \"value\": 1}]}"},
    /* strings: escapes, Unicode, control characters (all reach the messages) */
    {"seed-strings",
     "{\"description\": \"\\u00e9\\n\\t\\\"\\\\\\u0000x\", \"cpuid\": [{\"leaf\": \"\\u0031\", \"register\": "
     "\"e\\u0061x\", \"mask\": \"\\u0030x1\", \"value\": \"0x1\\u0000\"}]}"},
    /* 32 distinct MSRs: a vCPU's limit without brisk's boot MSRs, over it with them */
    {"seed-msr-32",
     "{\"msrs\": [{\"index\": \"0x10\", \"value\": 0}, {\"index\": \"0x3b\", \"value\": 0}, {\"index\": \"0x10a\", "
     "\"value\": 0}, {\"index\": \"0x174\", \"value\": 0}, {\"index\": \"0x175\", \"value\": 0}, {\"index\": "
     "\"0x176\", \"value\": 0}, {\"index\": \"0x1a0\", \"value\": 0}, {\"index\": \"0x277\", \"value\": 0}, "
     "{\"index\": \"0x6e0\", \"value\": 0}, {\"index\": \"0x4b564d00\", \"value\": 0}, {\"index\": \"0x4b564d01\", "
     "\"value\": 0}, {\"index\": \"0x4b564d02\", \"value\": 0}, {\"index\": \"0x4b564d03\", \"value\": 0}, "
     "{\"index\": \"0x4b564d04\", \"value\": 0}, {\"index\": \"0x4b564d05\", \"value\": 0}, {\"index\": "
     "\"0xc0000081\", \"value\": 0}, {\"index\": \"0xc0000082\", \"value\": 0}, {\"index\": \"0xc0000083\", "
     "\"value\": 0}, {\"index\": \"0xc0000084\", \"value\": 0}, {\"index\": \"0xc0000102\", \"value\": 0}, "
     "{\"index\": 1, \"value\": 0}, {\"index\": 2, \"value\": 0}, {\"index\": 3, \"value\": 0}, {\"index\": 4, "
     "\"value\": 0}, {\"index\": 5, \"value\": 0}, {\"index\": 6, \"value\": 0}, {\"index\": 7, \"value\": 0}, "
     "{\"index\": 8, \"value\": 0}, {\"index\": 9, \"value\": 0}, {\"index\": 11, \"value\": 0}, {\"index\": 12, "
     "\"value\": 0}, {\"index\": 13, \"value\": 0}]}"},
    {"seed-msr-boot",
     "{\"msrs\": [{\"index\": \"0x10\", \"value\": 0}, {\"index\": \"0x3b\", \"value\": 0}, {\"index\": \"0x10a\", "
     "\"value\": 0}, {\"index\": \"0x174\", \"value\": 0}, {\"index\": \"0x175\", \"value\": 0}, {\"index\": "
     "\"0x176\", \"value\": 0}, {\"index\": \"0x1a0\", \"value\": 0}, {\"index\": \"0x277\", \"value\": 0}, "
     "{\"index\": \"0x6e0\", \"value\": 0}, {\"index\": \"0x4b564d00\", \"value\": 0}, {\"index\": \"0x4b564d01\", "
     "\"value\": 0}, {\"index\": \"0x4b564d02\", \"value\": 0}, {\"index\": \"0x4b564d03\", \"value\": 0}, "
     "{\"index\": \"0x4b564d04\", \"value\": 0}, {\"index\": \"0x4b564d05\", \"value\": 0}, {\"index\": "
     "\"0xc0000081\", \"value\": 0}, {\"index\": \"0xc0000082\", \"value\": 0}, {\"index\": \"0xc0000083\", "
     "\"value\": 0}, {\"index\": \"0xc0000084\", \"value\": 0}, {\"index\": \"0xc0000102\", \"value\": 0}]}"},
    /* regression: a key or string from the file with a control character went into the message as is */
    {"regress-newline-in-key",
     "{\"cpuid\": [{\"l\\neaf\": 7, \"register\": \"ebx\", \"mask\": \"9x2\", \"valu\xe5\": \"0x2\"}]}"},
    {"regress-escape-in-value",
     "{\"cpuid\": [{\"leaf\": \"1\\u001b[2J\\r\", \"register\": \"eax\", \"mask\": 1, \"value\": 1}]}"},
    {"seed-empty", ""},
    {"seed-space", " \n\t\r"},
    {"seed-empty-object", "{}"},
    {"seed-top-array", "[{\"cpuid\": []}]"},
};

int main(int argc, char **argv)
{
	int bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		/* seed-nul keeps its NUL and the byte after it */
		size_t n = strcmp(seeds[i].name, "seed-nul") == 0 ? 4 : strlen(seeds[i].json);

		bad |= seed_save(argv[1], seeds[i].name, seeds[i].json, n);
	}
	return bad;
}
