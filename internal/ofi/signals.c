//go:build cgo

/*
 * Debian's libfabric 1.17 links its psm provider, and with it
 * libinfinipath, whose load-time constructor installs handlers for
 * SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT and SIGTERM that print a two-line
 * backtrace, write "<program>.<host>-<pid>,<host>.btr" into the working
 * directory and exit. Shared libraries are initialised before the program,
 * so the Go runtime finds those handlers when it starts, installs its own
 * and keeps them as the ones to forward to: a fault inside C code (a
 * crash in a libfabric provider) then went to libinfinipath instead of
 * Go's crash report, which names the signal and prints every goroutine's
 * stack with the cgo call that faulted. Faults in Go code (nil
 * dereferences) were never affected: Go handles those itself.
 *
 * ferry never uses psm. This constructor runs after every shared
 * library's and before the Go runtime starts (in a program) or before the
 * library's runtime (constructor priority 101, ahead of the default ones,
 * in a c-shared libferry), and puts back the default action of each of
 * those signals whose handler lives in libinfinipath, leaving any other
 * library's or program's handler alone. Keeping libfabric from initialising
 * psm (FI_PROVIDER=^psm) would not help: its handlers come with the
 * library's loading, and libfabric runs its built-in providers' init
 * functions before applying that filter.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <string.h>

static int ferry_signals_reset;

__attribute__((constructor(101))) static void ferry_reset_foreign_handlers(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGINT, SIGTERM };
	size_t i;

	for (i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct sigaction sa;
		Dl_info di;
		void *h;

		if (sigaction(sigs[i], NULL, &sa) != 0)
			continue;
		h = (sa.sa_flags & SA_SIGINFO) ? (void *)sa.sa_sigaction : (void *)sa.sa_handler;
		if (h == (void *)SIG_DFL || h == (void *)SIG_IGN)
			continue;
		if (!dladdr(h, &di) || !di.dli_fname || !strstr(di.dli_fname, "libinfinipath"))
			continue;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = SIG_DFL;
		sigemptyset(&sa.sa_mask);
		if (sigaction(sigs[i], &sa, NULL) == 0)
			ferry_signals_reset |= 1 << sigs[i];
	}
}

/* The signals whose libinfinipath handler was removed, as a bit mask. */
int ferry_signals_reset_mask(void)
{
	return ferry_signals_reset;
}

/* Faults on purpose: the regression test of the above runs it in a child
 * process and checks that Go, not libinfinipath, reports the crash. */
void ferry_fault_for_test(void)
{
	volatile int *p = (volatile int *)0;
	*p = 1;
}
