# ferry on Debian 12: builds every package, the benchmark commands and
# libferry.so (the C ABI) in one stage, and ships them in a slim runtime
# image with only the shared libraries they load.
#
#   docker build -t ferry .
#   docker run --rm ferry fabric-debug info
#   docker run --rm --device=/dev/infiniband ... ferry fabric-debug loopback
#
# The build stage has the whole toolchain: `docker build --target build -t
# ferry-build .` then `docker run --rm ferry-build go test ./bindings
# ./fabric/...` runs the tests that need no device (shm and tcp;ofi_rxm
# over the container's loopback; give shm room with --shm-size=1g, as each
# shm endpoint maps a 16 MiB file in /dev/shm and Docker's default is 64 MiB).
#
# RDMA devices (EFA, verbs) must be passed into the container with --device
# (and usually --cap-add IPC_LOCK, or a raised memlock ulimit, for memory
# registration); without them the shm and tcp;ofi_rxm transports still
# work on loopback.
#
# On AWS, prefer the EFA installer's libfabric (under /opt/amazon/efa) to
# Debian's 1.17, which predates several EFA options ferry uses when the
# header has them: run the installer in both stages (`efa_installer.sh -y
# --skip-kmod --skip-limit-conf --no-verify`, which needs no device at build
# time), build with PKG_CONFIG_PATH=/opt/amazon/efa/lib/pkgconfig so cgo
# compiles against its headers, and run with
# LD_LIBRARY_PATH=/opt/amazon/efa/lib (or an ld.so.conf.d entry) so the same
# libfabric is loaded. `fabric-debug info` prints the libfabric version in
# use.

FROM debian:12 AS build

# Go comes from the official tarball, so the toolchain does not depend on
# what Debian packages, and the tarball is checked before it is unpacked:
# against GO_SHA256 when given (pin it for reproducible builds), else
# against the SHA-256 the Go team publishes beside the tarball.
# TARGETARCH is set by BuildKit (amd64, arm64); the classic builder leaves
# it empty and the build uses this machine's architecture.
ARG GO_VERSION=1.26.8
ARG GO_SHA256=
ARG TARGETARCH

# gcc and libc6-dev for cgo; pkg-config finds libfabric and libibverbs,
# which the efa and verbs providers link against. CUDA needs nothing at
# build time: it is loaded with dlopen where a driver exists.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates curl gcc libc6-dev make pkg-config \
      libfabric-dev libibverbs-dev \
 && rm -rf /var/lib/apt/lists/*

RUN set -eu; \
    arch="${TARGETARCH:-$(dpkg --print-architecture)}"; \
    tgz="go${GO_VERSION}.linux-${arch}.tar.gz"; \
    curl -fsSLo "/tmp/$tgz" "https://dl.google.com/go/$tgz"; \
    sum="${GO_SHA256:-$(curl -fsSL "https://dl.google.com/go/$tgz.sha256")}"; \
    echo "$sum  /tmp/$tgz" | sha256sum -c -; \
    tar -C /usr/local -xzf "/tmp/$tgz"; \
    rm "/tmp/$tgz"
ENV PATH=/usr/local/go/bin:$PATH \
    CGO_ENABLED=1 \
    GOTOOLCHAIN=local

WORKDIR /src

# Modules first, in their own layer, so source edits do not download them
# again.
COPY go.mod go.sum ./
RUN go mod download

COPY . .

# The same commands as make build and make install (make's deps step is
# not needed: the packages are installed above): libferry.so.1 with its
# SONAME, symlinks, ferry.h and ferry.pc under /out.
RUN go build ./... \
 && mkdir -p /out/bin \
 && go build -o /out/bin/ ./bench/... \
 && scripts/bindings.sh build /tmp/libferry \
 && scripts/bindings.sh install /tmp/libferry /usr/local /out

FROM debian:12-slim

# Only the runtime halves of the libraries: libfabric1 with its providers,
# libibverbs1 with the user-space device drivers (ibverbs-providers).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates libfabric1 libibverbs1 ibverbs-providers \
 && rm -rf /var/lib/apt/lists/*

COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build /out/usr/local/ /usr/local/
RUN ldconfig

CMD ["fabric-debug", "info"]
