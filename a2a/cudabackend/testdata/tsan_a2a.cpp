// The a2a kernels of four node ranks under ThreadSanitizer, as a C++
// program (built and run by TestThreadSanitizer in package a2a/cudabackend): the
// kernels run on the emulator's runtime, one host thread per rank queues
// the four launches of each iteration, and one host thread per rank plays
// the CPU worker (count exchange by copying rows, the receive plan the Go
// test precomputed, the barriers by std::barrier). Inputs, plans and the
// oracle's outputs come from scenario.bin. It prints "a2a tsan: N
// failures"; ThreadSanitizer reports races on stderr.
#include "ferry_device.h"
#line 1 "a2a_kernels.cu"
#include "a2a_kernels.cu"
#line 13 "tsan_a2a.cpp"
#include "fd_emu_runtime.h"

#include <barrier>
#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

const fd_emu::kernel_entry fd_emu_kernel_table[] = {
	FD_EMU_KERNEL(a2a_dispatch_send, A2A_THREADS, 1),
	FD_EMU_KERNEL(a2a_dispatch_recv, A2A_THREADS, 1),
	FD_EMU_KERNEL(a2a_combine_send, A2A_THREADS, 1),
	FD_EMU_KERNEL(a2a_combine_recv, A2A_THREADS, 1),
};
const int fd_emu_kernel_table_len = sizeof fd_emu_kernel_table / sizeof fd_emu_kernel_table[0];

namespace {

std::atomic<int> failures{0};
#define CHECK(cond, ...)                                                      \
	do {                                                                      \
		if (!(cond)) {                                                        \
			std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);         \
			std::fprintf(stderr, __VA_ARGS__);                                \
			std::fprintf(stderr, "\n");                                       \
			failures++;                                                       \
		}                                                                     \
	} while (0)

using bytes = std::vector<uint8_t>;

struct reader {
	std::ifstream in;
	uint64_t u64() {
		uint64_t v;
		if (!in.read((char *)&v, 8)) throw std::runtime_error("scenario truncated");
		return v;
	}
	bytes blob() {
		bytes b(u64());
		if (!b.empty() && !in.read((char *)b.data(), b.size())) throw std::runtime_error("scenario truncated");
		return b;
	}
};

uint8_t *alloc(uint64_t n) {
	n = (n + 4095) & ~uint64_t(4095);
	auto *p = (uint8_t *)std::aligned_alloc(4096, n ? n : 4096);
	std::memset(p, 0, n ? n : 4096);
	return p;
}

template <class T>
T load_acquire(T *p) { return std::atomic_ref<T>(*p).load(std::memory_order_acquire); }
template <class T>
void store_release(T *p, T v) { std::atomic_ref<T>(*p).store(v, std::memory_order_release); }

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

struct rank_io {
	uint64_t m, acc;
	bytes x, scales, idx, w, y, prev, table, meta, tok, off, outx, outs, real, out;
};

struct world {
	uint64_t W, S, G, iters, grid, block, T, K, L, O, TB, HS, CB, RW, E;
	uint64_t send_b, recv_b, recv_data, table_b, ctrl_b, meta_b, params_b, state_b, peers_b, mask_b, prefix_b,
	    offsets_b, pos_b, dmeta_b;
	std::vector<bytes> params;
	std::vector<std::vector<rank_io>> its; // [iteration][rank]
	// per rank memory
	std::vector<uint8_t *> send, recv, table, ctrl, meta, prm, state, peers, mask, prefix, offsets, pos, dmeta, ranks;
	std::vector<uint8_t *> x, scales, idx, w, y, out, outx, outs, tok, off;
	std::vector<std::atomic<uint64_t>> arrivals;
	world() : arrivals(64) {}
};

uint32_t *ctrl_word(world &wd, int r, int slot) { return (uint32_t *)wd.ctrl[r] + slot * A2A_SLOT_WORDS; }

void wait_flag(uint32_t *p, uint32_t want) {
	for (int i = 0; !a2a_reached(load_acquire(p), want); i++) {
		if (i > 2000000) throw std::runtime_error("worker: flag never raised");
		std::this_thread::sleep_for(std::chrono::microseconds(20));
	}
}

void read_world(world &wd, const char *path) {
	reader rd;
	rd.in.open(path, std::ios::binary);
	char magic[4];
	if (!rd.in.read(magic, 4) || std::memcmp(magic, "A2AT", 4) != 0) throw std::runtime_error("not a scenario");
	uint64_t *hdr[] = {&wd.W, &wd.S, &wd.G, &wd.iters, &wd.grid, &wd.block, &wd.T, &wd.K, &wd.L, &wd.O, &wd.TB, &wd.HS,
	                   &wd.CB, &wd.RW, &wd.E, &wd.send_b, &wd.recv_b, &wd.recv_data, &wd.table_b, &wd.ctrl_b, &wd.meta_b,
	                   &wd.params_b, &wd.state_b, &wd.peers_b, &wd.mask_b, &wd.prefix_b, &wd.offsets_b, &wd.pos_b, &wd.dmeta_b};
	for (auto *h : hdr) *h = rd.u64();
	for (uint64_t r = 0; r < wd.W; r++) wd.params.push_back(rd.blob());
	wd.its.resize(wd.iters);
	for (auto &it : wd.its) {
		it.resize(wd.W);
		for (auto &io : it) {
			io.m = rd.u64();
			io.acc = rd.u64();
			bytes *bs[] = {&io.x, &io.scales, &io.idx, &io.w, &io.y, &io.prev, &io.table, &io.meta, &io.tok, &io.off,
			               &io.outx, &io.outs, &io.real, &io.out};
			for (auto *b : bs) *b = rd.blob();
		}
	}
}

void allocate(world &wd) {
	for (uint64_t r = 0; r < wd.W; r++) {
		wd.send.push_back(alloc(wd.send_b));
		wd.recv.push_back(alloc(wd.recv_b));
		wd.table.push_back(alloc(wd.table_b));
		wd.ctrl.push_back(alloc(wd.ctrl_b));
		wd.meta.push_back(alloc(wd.meta_b));
		wd.prm.push_back(alloc(wd.params_b));
		wd.state.push_back(alloc(wd.state_b));
		wd.peers.push_back(alloc(wd.peers_b));
		wd.mask.push_back(alloc(wd.mask_b));
		wd.prefix.push_back(alloc(wd.prefix_b));
		wd.offsets.push_back(alloc(wd.offsets_b));
		wd.pos.push_back(alloc(wd.pos_b));
		wd.dmeta.push_back(alloc(wd.dmeta_b));
		wd.ranks.push_back(alloc(wd.W));
		wd.x.push_back(alloc(wd.T * wd.TB));
		wd.scales.push_back(alloc(4 * wd.T * wd.HS));
		wd.idx.push_back(alloc(4 * wd.T * wd.K));
		wd.w.push_back(alloc(4 * wd.T * wd.K));
		wd.y.push_back(alloc(wd.O * wd.CB));
		wd.out.push_back(alloc(wd.T * wd.CB));
		wd.outx.push_back(alloc(wd.O * wd.TB));
		wd.outs.push_back(alloc(4 * wd.O * wd.HS));
		wd.tok.push_back(alloc(4 * wd.L));
		wd.off.push_back(alloc(4 * (wd.L + 1)));
	}
	// One NVLink domain: every rank's peer tables list every rank.
	for (uint64_t r = 0; r < wd.W; r++) {
		auto *pt = (uint64_t *)wd.peers[r];
		for (uint64_t q = 0; q < wd.S; q++) {
			pt[q] = (uint64_t)wd.send[q];
			pt[wd.S + q] = (uint64_t)wd.recv[q];
			pt[2 * wd.S + q] = (uint64_t)(wd.recv[q] + wd.recv_data);
		}
		a2a_params p;
		std::memcpy(&p, wd.params[r].data(), sizeof p);
		p.send = (uint64_t)wd.send[r];
		p.recv = (uint64_t)wd.recv[r];
		p.peer_send = (uint64_t)pt;
		p.peer_recv = (uint64_t)(pt + wd.S);
		p.peer_sync = (uint64_t)(pt + 2 * wd.S);
		p.sync = (uint64_t)(wd.recv[r] + wd.recv_data);
		p.table = (uint64_t)wd.table[r];
		p.ctrl = (uint64_t)wd.ctrl[r];
		p.meta = (uint64_t)wd.meta[r];
		p.dmeta = (uint64_t)wd.dmeta[r];
		p.state = (uint64_t)wd.state[r];
		p.mask = (uint64_t)wd.mask[r];
		p.prefix = (uint64_t)wd.prefix[r];
		p.offsets = (uint64_t)wd.offsets[r];
		p.pos = (uint64_t)wd.pos[r];
		// Every rank active; this one serves the ranks of its replica index.
		for (uint64_t q = 0; q < wd.W; q++)
			wd.ranks[r][q] = A2A_RANK_ACTIVE | (q % p.replicas == p.replica ? A2A_RANK_SERVED : 0u);
		p.ranks = (uint64_t)wd.ranks[r];
		std::memcpy(wd.prm[r], &p, sizeof p);
	}
}

// The CPU worker of rank r: what a2a/cudabackend's worker does, with the count
// exchange done by copying rows and the plan precomputed.
void worker(world &wd, std::barrier<> &bar, uint32_t r) {
	const uint64_t rowb = 4 * wd.RW;
	for (uint32_t it = 1; it <= wd.iters; it++) {
		const rank_io &io = wd.its[it - 1][r];
		wait_flag(ctrl_word(wd, r, A2A_ROUTE_DONE), it);
		for (uint32_t q = 0; q < wd.W; q++) {
			if (q == r) continue;
			std::memcpy(wd.table[q] + r * rowb, wd.table[r] + r * rowb, rowb);
			wd.arrivals[q].fetch_add(1, std::memory_order_release);
		}
		wait_flag(ctrl_word(wd, r, A2A_SEND_DONE), it);
		for (int i = 0; wd.arrivals[r].load(std::memory_order_acquire) < it * (wd.W - 1); i++) {
			if (i > 2000000) throw std::runtime_error("worker: count rows never arrived");
			std::this_thread::sleep_for(std::chrono::microseconds(20));
		}
		CHECK(std::memcmp(wd.table[r], io.table.data(), io.table.size()) == 0, "rank %u iteration %u: count table differs", r, it);
		std::memcpy(wd.meta[r], io.meta.data(), io.meta.size());
		store_release(ctrl_word(wd, r, A2A_PLAN_READY), it);
		wait_flag(ctrl_word(wd, r, A2A_DRECV_DONE), it);
		bar.arrive_and_wait();
		store_release(ctrl_word(wd, r, A2A_COMBINE_FREE), it);
		wait_flag(ctrl_word(wd, r, A2A_CSEND_DONE), it);
		wait_flag(ctrl_word(wd, r, A2A_CRECV_DONE), it);
		bar.arrive_and_wait();
		store_release(ctrl_word(wd, r, A2A_DISPATCH_FREE), it);
	}
}

bool launch(world &wd, int k, const args &a) {
	uint32_t g[3] = {(uint32_t)wd.grid, 1, 1}, b[3] = {(uint32_t)wd.block, 1, 1};
	char err[512];
	if (fd_emu_launch(k, g, b, 0, a.buf, a.offs, nullptr, nullptr, 0, err, sizeof err) != 0) {
		std::fprintf(stderr, "FAIL launch %s: %s\n", fd_emu_kernel_table[k].name, err);
		failures++;
		return false;
	}
	return true;
}

// The caller of rank r: inputs in, the four launches, outputs checked.
void caller(world &wd, uint32_t r) {
	const uint64_t tmo = 60000000000ull;
	for (uint32_t it = 1; it <= wd.iters; it++) {
		const rank_io &io = wd.its[it - 1][r];
		std::memcpy(wd.x[r], io.x.data(), io.x.size());
		std::memcpy(wd.scales[r], io.scales.data(), io.scales.size());
		std::memcpy(wd.idx[r], io.idx.data(), io.idx.size());
		std::memcpy(wd.w[r], io.w.data(), io.w.size());
		std::memcpy(wd.y[r], io.y.data(), io.y.size());
		std::memcpy(wd.out[r], io.prev.data(), io.prev.size());
		std::memset(wd.outx[r], 0xa5, wd.O * wd.TB);
		std::memset(wd.outs[r], 0xa5, 4 * wd.O * wd.HS);
		std::memset(wd.tok[r], 0xa5, 4 * wd.L);
		std::memset(wd.off[r], 0xa5, 4 * (wd.L + 1));
		uint64_t p = (uint64_t)wd.prm[r];
		uint64_t sc = wd.HS ? (uint64_t)wd.scales[r] : 0, osc = wd.HS ? (uint64_t)wd.outs[r] : 0;
		args ds, dr, cs, cr;
		ds.add(p).add((uint64_t)wd.x[r]).add((uint64_t)wd.TB).add(sc).add((uint64_t)wd.HS).add((uint64_t)1)
		    .add((uint64_t)wd.idx[r]).add((uint32_t)io.m).add((uint64_t)0).add(tmo);
		dr.add(p).add((uint64_t)wd.outx[r]).add((uint64_t)wd.TB).add(osc).add((uint64_t)wd.HS).add((uint64_t)1)
		    .add((uint64_t)wd.tok[r]).add((uint64_t)wd.off[r]).add(tmo);
		cs.add(p).add((uint64_t)wd.y[r]).add((uint64_t)wd.CB).add(tmo);
		cr.add(p).add((uint64_t)wd.out[r]).add((uint64_t)wd.CB).add((uint64_t)wd.w[r]).add((uint32_t)io.acc).add(tmo);
		const args *all[] = {&ds, &dr, &cs, &cr};
		for (int k = 0; k < 4; k++) {
			if (!launch(wd, k, *all[k])) return;
			uint32_t code = load_acquire(ctrl_word(wd, r, A2A_STATUS + k));
			CHECK(code == FD_STATUS_OK, "rank %u iteration %u %s: status %u (what %u)", r, it, fd_emu_kernel_table[k].name,
			      code, ctrl_word(wd, r, A2A_STATUS + k)[1]);
		}
		CHECK(std::memcmp(wd.tok[r], io.tok.data(), io.tok.size()) == 0, "rank %u iteration %u: expert tokens", r, it);
		CHECK(std::memcmp(wd.off[r], io.off.data(), io.off.size()) == 0, "rank %u iteration %u: expert offsets", r, it);
		for (uint64_t row = 0; row < wd.O; row++) {
			if (!io.real[row]) continue;
			CHECK(std::memcmp(wd.outx[r] + row * wd.TB, io.outx.data() + row * wd.TB, wd.TB) == 0,
			      "rank %u iteration %u: dispatch row %lu", r, it, (unsigned long)row);
			CHECK(std::memcmp(wd.outs[r] + 4 * row * wd.HS, io.outs.data() + 4 * row * wd.HS, 4 * wd.HS) == 0,
			      "rank %u iteration %u: scales of row %lu", r, it, (unsigned long)row);
		}
		CHECK(std::memcmp(wd.out[r], io.out.data(), io.out.size()) == 0, "rank %u iteration %u: combine output", r, it);
	}
}

} // namespace

int main(int argc, char **argv) {
	if (argc < 2) {
		std::fprintf(stderr, "usage: tsan_a2a scenario.bin\n");
		return 2;
	}
	world wd;
	try {
		read_world(wd, argv[1]);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "FAIL %s\n", e.what());
		return 1;
	}
	allocate(wd);
	std::barrier<> bar((std::ptrdiff_t)wd.W);
	std::vector<std::thread> threads;
	for (uint32_t r = 0; r < wd.W; r++) {
		threads.emplace_back([&wd, &bar, r] {
			try {
				worker(wd, bar, r);
			} catch (const std::exception &e) {
				std::fprintf(stderr, "FAIL rank %u: %s\n", r, e.what());
				failures++;
				std::_Exit(1);
			}
		});
		threads.emplace_back([&wd, r] { caller(wd, r); });
	}
	for (auto &t : threads) t.join();
	fd_emu_shutdown();
	std::printf("a2a tsan: %d failures (%lu ranks, %lu iterations)\n", failures.load(), (unsigned long)wd.W,
	            (unsigned long)wd.iters);
	return failures == 0 ? 0 : 1;
}
