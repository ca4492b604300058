/* exitcode.c - exits through the debug-exit port with code=N from the command line (default 0). */
#include "guest.h"

void guest_main(struct hvm_start_info *si)
{
	uint64_t code = 0;

	serial_init();
	cmdline_get_u64(guest_cmdline(si), "code", &code);
	gprintf("exitcode: %lu\n", code);
	guest_exit((unsigned int)code);
}
