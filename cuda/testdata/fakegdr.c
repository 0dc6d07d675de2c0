// A fake libgdrapi.so.2 for the package's tests: "device" memory is host
// memory in the fake driver, so the BAR mapping is the memory itself.
// It refuses what gdrdrv refuses: unaligned pins, maps of another size.
// Built by the test with: cc -shared -fPIC -o libgdrapi.so.2 fakegdr.c
#include <stddef.h>
#include <stdint.h>

typedef struct { unsigned long h; } gdr_mh_t;
struct gdr { int open; };
static struct gdr the_gdr;
static unsigned long pinned_addr;
static size_t pinned_size;

struct gdr *gdr_open(void) { the_gdr.open = 1; return &the_gdr; }
int gdr_close(struct gdr *g) { if (g != &the_gdr || !g->open) return 22; g->open = 0; return 0; }
int gdr_pin_buffer(struct gdr *g, unsigned long addr, size_t size, uint64_t token, uint32_t va_space, gdr_mh_t *h) {
	if (g != &the_gdr || addr % 65536 || size == 0 || size % 65536 || token || va_space) return 22;
	pinned_addr = addr;
	pinned_size = size;
	h->h = 77;
	return 0;
}
int gdr_unpin_buffer(struct gdr *g, gdr_mh_t h) { return h.h == 77 ? 0 : 22; }
int gdr_map(struct gdr *g, gdr_mh_t h, void **va, size_t size) {
	if (h.h != 77 || size != pinned_size) return 22;
	*va = (void *)pinned_addr;
	return 0;
}
int gdr_unmap(struct gdr *g, gdr_mh_t h, void *va, size_t size) {
	return h.h == 77 && va == (void *)pinned_addr && size == pinned_size ? 0 : 22;
}
void gdr_runtime_get_version(int *major, int *minor) { *major = 2; *minor = 4; }
