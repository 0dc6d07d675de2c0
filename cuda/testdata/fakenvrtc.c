// A fake libnvrtc.so for the package's tests. "Compiling" checks the
// options ferry must pass and produces an ELF-tagged image holding the
// source; a source containing FAKE_ERROR fails with a log naming it; one
// containing FAKE_PORTABLE_ONLY refuses architecture-specific targets
// (sm_90a) as an invalid option, as NVRTC 11.8 does. Every program must
// come with the device header as an in-memory header, included first.
// Built by the test with: cc -shared -fPIC -o libnvrtc.so.13 fakenvrtc.c
#include <stdlib.h>
#include <string.h>

typedef struct { char *src, *log, *image; size_t image_size; } prog_t;

int nvrtcVersion(int *major, int *minor) { *major = 13; *minor = 0; return 0; }
const char *nvrtcGetErrorString(int r) { return r == 6 ? "NVRTC_ERROR_COMPILATION" : "NVRTC_ERROR_FAKE"; }
int nvrtcCreateProgram(prog_t **p, const char *src, const char *name, int nh, const char *const *h, const char *const *in) {
	if (!src || !name || nh != 1 || strcmp(in[0], "ferry_device.h") != 0 || !strstr(h[0], "#define FERRY_DEVICE_H") ||
		strncmp(src, "#include \"ferry_device.h\"\n", 26) != 0)
		return 3;
	*p = calloc(1, sizeof(prog_t));
	(*p)->src = strdup(src);
	return 0;
}
int nvrtcDestroyProgram(prog_t **p) {
	free((*p)->src); free((*p)->log); free((*p)->image); free(*p);
	*p = NULL;
	return 0;
}
int nvrtcCompileProgram(prog_t *p, int n, const char *const *opts) {
	int arch = 0;
	for (int i = 0; i < n; i++)
		if (strncmp(opts[i], "--gpu-architecture=sm_", 22) == 0) {
			arch = 1;
			size_t l = strlen(opts[i]);
			if (opts[i][l - 1] == 'a' && strstr(p->src, "FAKE_PORTABLE_ONLY")) return 5;
		}
	if (!arch) { p->log = strdup("fake nvrtc: no --gpu-architecture=sm_XX option"); return 5; }
	if (strstr(p->src, "FAKE_ERROR")) { p->log = strdup("k.cu(1): error: FAKE_ERROR is not defined"); return 6; }
	size_t n2 = strlen(p->src);
	p->image = malloc(4 + n2);
	memcpy(p->image, "\177ELF", 4);
	memcpy(p->image + 4, p->src, n2);
	p->image_size = 4 + n2;
	p->log = strdup("");
	return 0;
}
int nvrtcGetProgramLogSize(prog_t *p, size_t *n) { *n = p->log ? strlen(p->log) + 1 : 1; return 0; }
int nvrtcGetProgramLog(prog_t *p, char *out) { strcpy(out, p->log ? p->log : ""); return 0; }
int nvrtcGetCUBINSize(prog_t *p, size_t *n) { *n = p->image_size; return p->image ? 0 : 4; }
int nvrtcGetCUBIN(prog_t *p, char *out) { memcpy(out, p->image, p->image_size); return 0; }
