/* SPDX-License-Identifier: MIT */
/* rsk_version(): the version this library was built as (rseqkit/version.h). */
#include <rseqkit/version.h>
#include "internal.h"

RSK_EXPORT const char *rsk_version(int *major, int *minor, int *patch)
{
	if (major != NULL)
		*major = RSEQKIT_VERSION_MAJOR;
	if (minor != NULL)
		*minor = RSEQKIT_VERSION_MINOR;
	if (patch != NULL)
		*patch = RSEQKIT_VERSION_PATCH;
	return RSEQKIT_VERSION_STRING;
}
