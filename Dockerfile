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

FROM debian:12 AS build

# Go comes from the official tarball, at the version go.mod asks for, so
# the toolchain does not depend on what Debian packages. TARGETARCH is set
# by BuildKit (amd64, arm64); the default serves the classic builder.
ARG GO_VERSION=1.26.8
ARG TARGETARCH=amd64

# gcc and libc6-dev for cgo; pkg-config finds libfabric and libibverbs,
# which the efa and verbs providers link against. CUDA needs nothing at
# build time: it is loaded with dlopen where a driver exists.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates curl gcc libc6-dev make pkg-config \
      libfabric-dev libibverbs-dev \
 && rm -rf /var/lib/apt/lists/*

RUN curl -fsSL "https://go.dev/dl/go${GO_VERSION}.linux-${TARGETARCH}.tar.gz" \
      | tar -C /usr/local -xz
ENV PATH=/usr/local/go/bin:$PATH \
    CGO_ENABLED=1 \
    GOTOOLCHAIN=local

WORKDIR /src

# Modules first, in their own layer, so source edits do not download them
# again.
COPY go.mod go.sum ./
RUN go mod download

COPY . .

# The same commands as make build and make bindings (make's deps step is
# not needed: the packages are installed above).
RUN go build ./... \
 && mkdir -p /out/bin /out/lib /out/include \
 && go build -o /out/bin/ ./bench/... \
 && go build -buildmode=c-shared \
      -ldflags="-extldflags=-Wl,--version-script=/src/bindings/libferry.map" \
      -o /out/lib/libferry.so ./bindings \
 && rm -f /out/lib/libferry.h \
 && cp bindings/ferry.h /out/include/ferry.h

FROM debian:12-slim

# Only the runtime halves of the libraries: libfabric1 with its providers,
# libibverbs1 with the user-space device drivers (ibverbs-providers).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates libfabric1 libibverbs1 ibverbs-providers \
 && rm -rf /var/lib/apt/lists/*

COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build /out/lib/libferry.so /usr/local/lib/libferry.so
COPY --from=build /out/include/ferry.h /usr/local/include/ferry.h
RUN ldconfig

CMD ["fabric-debug", "info"]
