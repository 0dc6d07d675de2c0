// The emulator's kernel scenarios as a C++ program, built with
// -fsanitize=thread by the Go test TestThreadSanitizer (Go's race runtime
// and a TSan-built library cannot share a process). It runs the emulator
// tests' kernels and ferry's own (flags.cu, fabric/gpu's gpu.cu) with host
// threads on the other side of every flag, checks their results, and
// exits 0; ThreadSanitizer reports races on stderr (and exits 66).
// Built with -DFD_MUTATE_* it runs the mutation variant of copy_scan.
#include "ferry_device.h"
#line 1 "emu_kernels.cu"
#include "emu_kernels.cu"
#line 1 "flags.cu"
#include "flags.cu"
#line 1 "gpu.cu"
#include "gpu.cu"
#line 20 "tsan_scenarios.cpp"
#include "fd_emu_runtime.h"

#include <vector>

const fd_emu::kernel_entry fd_emu_kernel_table[] = {
	FD_EMU_KERNEL(copy_scan, EMU_BLOCK),
	FD_EMU_KERNEL(flag_relay, 64),
	FD_EMU_KERNEL(grid_sync_twice, 128),
	FD_EMU_KERNEL(ferry_flag_wait, 32),
	FD_EMU_KERNEL(ferry_gpu_slot_add, 32),
	FD_EMU_KERNEL(ferry_gpu_wait_epoch, 32),
};
const int fd_emu_kernel_table_len = sizeof fd_emu_kernel_table / sizeof fd_emu_kernel_table[0];

namespace {

std::atomic<int> failures{0}; // checks run on several host threads
#define CHECK(cond, ...)                                        \
	do {                                                        \
		if (!(cond)) {                                          \
			std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			std::fprintf(stderr, __VA_ARGS__);                  \
			std::fprintf(stderr, "\n");                         \
			failures++;                                         \
		}                                                       \
	} while (0)

int kernel_index(const char *name) {
	for (int i = 0; i < fd_emu_kernel_table_len; i++)
		if (std::strcmp(fd_emu_kernel_table[i].name, name) == 0) return i;
	std::abort();
}

// Packs arguments like the Go side: each at an offset aligned to its size.
struct args {
	unsigned char buf[256];
	uint32_t offs[16];
	uint32_t len = 0, n = 0;
	template <class T>
	args &add(T v) {
		len = (len + sizeof(T) - 1) & ~(uint32_t)(sizeof(T) - 1);
		std::memcpy(buf + len, &v, sizeof v);
		offs[n++] = len;
		len += sizeof v;
		return *this;
	}
};

bool launch(const char *name, uint32_t grid, uint32_t block, const args &a) {
	uint32_t g[3] = {grid, 1, 1}, b[3] = {block, 1, 1};
	char err[512];
	if (fd_emu_launch(kernel_index(name), g, b, 0, a.buf, a.offs, nullptr, nullptr, 0, err, sizeof err) != 0) {
		std::fprintf(stderr, "FAIL launch %s: %s\n", name, err);
		failures++;
		return false;
	}
	return true;
}

template <class T>
T load_acquire(T *p) { return std::atomic_ref<T>(*p).load(std::memory_order_acquire); }
template <class T>
void store_release(T *p, T v) { std::atomic_ref<T>(*p).store(v, std::memory_order_release); }

// copy_scan on two ranks at once, checked element by element.
void copy_scan_ranks() {
	const uint32_t blocks = 4, per_block = 4 * EMU_BLOCK, n = blocks * per_block;
	std::vector<std::thread> ranks;
	for (int r = 0; r < 2; r++) {
		ranks.emplace_back([=] {
			std::vector<uint32_t> in(n), out(n), scan(n), totals(blocks);
			alignas(16) static thread_local uint32_t words[4];
			for (uint32_t i = 0; i < n; i++) in[i] = (i * 7 + r) % 1000;
			words[0] = words[1] = 0;
			args a;
			a.add(in.data()).add(out.data()).add(scan.data()).add(per_block).add(totals.data()).add(&words[0]).add(&words[1]);
			if (!launch("copy_scan", blocks, EMU_BLOCK, a)) return;
			uint32_t grand = 0;
			for (uint32_t b = 0; b < blocks; b++) {
				uint32_t sum = 0;
				for (uint32_t i = b * per_block; i < (b + 1) * per_block; i++) {
					sum += in[i];
					CHECK(out[i] == in[i], "rank %d: out[%u] = %u, want %u", r, i, out[i], in[i]);
					CHECK(scan[i] == sum, "rank %d: scan[%u] = %u, want %u", r, i, scan[i], sum);
					if (out[i] != in[i] || scan[i] != sum) return;
				}
				grand += sum;
			}
			CHECK(load_acquire(&words[1]) == grand, "rank %d: grand total %u, want %u", r, words[1], grand);
		});
	}
	for (auto &t : ranks) t.join();
}

// A host thread raises the flag flag_relay's block 0 waits for; block 0
// relays to block 1 through a plain write published by a release store.
void flag_relay_host() {
	alignas(64) static uint32_t mem[64];
	std::thread host([] {
		std::this_thread::sleep_for(std::chrono::milliseconds(5));
		store_release(&mem[0], 1u);
	});
	args a;
	a.add(&mem[0]).add(&mem[16]).add(&mem[32]).add(&mem[48]).add((uint64_t)20000000000ull);
	launch("flag_relay", 2, 64, a);
	host.join();
	CHECK(load_acquire(&mem[48]) == FD_STATUS_OK, "flag_relay status %u", mem[48]);
}

void grid_sync() {
	static fd_grid_barrier bar;
	static uint32_t vals[8], seen[8];
	for (int round = 0; round < 2; round++) {
		args a;
		a.add(&bar).add(&vals[0]).add(&seen[0]);
		launch("grid_sync_twice", 4, 128, a);
		for (uint32_t b = 0; b < 4; b++) CHECK(seen[b] == (b + 1) % 4 + 1, "grid_sync block %u saw %u", b, seen[b]);
	}
}

// ferry_flag_wait released by the host; ferry_gpu_slot_add feeding a host
// watcher thread; ferry_gpu_wait_epoch released by a host epoch counter.
void ferry_kernels() {
	alignas(64) static uint32_t flag, status;
	std::thread host([] {
		std::this_thread::sleep_for(std::chrono::milliseconds(2));
		store_release(&flag, 7u);
	});
	args a;
	a.add(&flag).add(7u).add((uint64_t)20000000000ull).add(&status);
	launch("ferry_flag_wait", 1, 32, a);
	host.join();
	CHECK(load_acquire(&status) == FD_STATUS_OK, "ferry_flag_wait status %u", status);

	alignas(64) static uint64_t slot;
	std::atomic<bool> stop{false};
	uint64_t last = 0;
	std::thread watcher([&] {
		while (!stop.load()) {
			uint64_t v = load_acquire(&slot);
			if (v < last) std::abort();
			last = v;
			std::this_thread::yield();
		}
	});
	for (int i = 0; i < 20; i++) {
		args b;
		b.add(&slot).add((uint64_t)3);
		launch("ferry_gpu_slot_add", 1, 32, b);
	}
	stop = true;
	watcher.join();
	CHECK(load_acquire(&slot) == 60, "watcher slot %lu", (unsigned long)slot);

	alignas(64) static uint32_t eflag, epoch, estatus;
	for (uint32_t round = 1; round <= 3; round++) {
		std::thread raiser([round] {
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
			store_release(&eflag, round);
		});
		args c;
		c.add(&eflag).add(&epoch).add((uint64_t)20000000000ull).add(&estatus);
		launch("ferry_gpu_wait_epoch", 1, 32, c);
		raiser.join();
		CHECK(load_acquire(&estatus) == FD_STATUS_OK && epoch == round, "wait_epoch round %u: status %u epoch %u", round,
		      estatus, epoch);
	}
}

} // namespace

int main(int argc, char **argv) {
	bool only_copy_scan = argc > 1 && std::strcmp(argv[1], "copy_scan") == 0;
	copy_scan_ranks();
	if (!only_copy_scan) {
		flag_relay_host();
		grid_sync();
		ferry_kernels();
	}
	fd_emu_shutdown();
	std::printf("tsan scenarios: %d failures\n", failures.load());
	return failures == 0 ? 0 : 1;
}
