/*
 * What ferry does differently from one libfabric generation to the next,
 * in one place. ferry builds against the headers of 1.17 (Debian 12) or
 * of 2.x (Debian 13, current EFA installers), and a binary built against
 * one may run on the other (2.x keeps the 1.x symbols), so every rule is
 * decided from the library actually loaded (fi_version()), never from the
 * headers alone. Each rule has a test in generation_test.go; generation.go
 * holds the Go side (the API version asked for, the hazard table the efa
 * package consults).
 */
#ifndef FERRY_OFI_GENERATION_H
#define FERRY_OFI_GENERATION_H

#include <stdint.h>
#include <rdma/fabric.h>

/* The newest API this code was checked against: ferry asks fi_getinfo for
 * no newer than this, than the headers it was compiled with (the library
 * fills structs of that layout) and than the library it runs on. */
#define FERRY_NEWEST_API FI_VERSION(2, 1)

/* Rules, the bits of ferry_ep.rules, set once when an endpoint opens. */

/* FERRY_RULE_IMM_BY_DATA: a completion carrying remote CQ data and no
 * operation flag at all is an incoming write's immediate. libfabric 2.x's
 * shm reports the target side of fi_writedata with FI_REMOTE_CQ_DATA alone
 * (its "cleanup op flags" of 2.0), where 1.17 said FI_RMA |
 * FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, whatever API version or FI_RMA_EVENT
 * is asked for. On 1.x such an entry stays unclassified: it has never been
 * seen there, and the engine reports what it cannot place. */
#define FERRY_RULE_IMM_BY_DATA 1u

/* The rules for a library of version runtime (fi_version()). */
uint32_t ferry_gen_rules(uint32_t runtime);

/* The API version to ask fi_getinfo for, given the headers' version and
 * the library's. */
uint32_t ferry_gen_api(uint32_t header, uint32_t runtime);

/* Completion kinds (FERRY_EV_* of shim.h, which includes this file after
 * defining them; 0 for none) from an entry's flags.
 * Target-side write completions are checked first: providers disagree on
 * whether they also carry FI_RMA or a length, and some (sockets) set
 * FI_REMOTE_CQ_DATA on initiator entries, which FI_WRITE places first. */
static inline uint32_t ferry_classify(uint64_t flags, uint32_t rules)
{
	if (flags & FI_REMOTE_WRITE)
		return FERRY_EV_IMM;
	if (flags & FI_WRITE)
		return FERRY_EV_WRITE;
	/* A read (fi_readmsg) completes at its initiator as a write does. */
	if (flags & FI_READ)
		return FERRY_EV_WRITE;
	if (flags & FI_SEND)
		return FERRY_EV_SEND;
	if (flags & FI_RECV)
		return FERRY_EV_RECV;
	if ((rules & FERRY_RULE_IMM_BY_DATA) && (flags & FI_REMOTE_CQ_DATA))
		return FERRY_EV_IMM;
	return 0;
}

#endif
