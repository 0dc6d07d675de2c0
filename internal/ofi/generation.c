//go:build cgo

/*
 * The generation rules of generation.h, decided from the loaded library.
 */
#include "shim.h"

uint32_t ferry_gen_rules(uint32_t runtime)
{
	uint32_t rules = 0;

	if (FI_MAJOR(runtime) >= 2)
		rules |= FERRY_RULE_IMM_BY_DATA;
	return rules;
}

uint32_t ferry_gen_api(uint32_t header, uint32_t runtime)
{
	uint32_t v = header;

	if (FI_VERSION_LT(runtime, v))
		v = runtime;
	if (FI_VERSION_LT(FERRY_NEWEST_API, v))
		v = FERRY_NEWEST_API;
	return v;
}

uint32_t ferry_api_version(void)
{
	return ferry_gen_api(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), fi_version());
}
