# syntax=docker/dockerfile:1
# Build: docker build --build-arg VERSION=$(git describe --always --dirty) -t toolgate .
# Run:   docker run -p 8080:8080 toolgate
# Stop:  docker stop ... (its 10 s grace: the image drains for up to 7 s, then
#        gives the requests left 2 s to end with a gateway_shutting_down error).
#        With a longer grace, raise the drain to match, keeping delay + timeout
#        + 2 s under it: docker stop --time 30 with -e GATEWAY_DRAIN_TIMEOUT=25s;
#        Kubernetes' 30 s with GATEWAY_DRAIN_DELAY=5s and GATEWAY_DRAIN_TIMEOUT=20s.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The build context has no .git (.dockerignore), so the version is linked in.
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/gateway ./cmd/gateway

FROM gcr.io/distroless/static-debian12:nonroot
WORKDIR /etc/toolgate
COPY --from=build /out/gateway /usr/local/bin/gateway
COPY tools.yaml ./tools.yaml
COPY hints ./hints
# The drain fits docker stop's default 10 s grace (see Stop above); serve's
# own default, 25 s, fits Kubernetes' 30 s.
ENV GATEWAY_LISTEN=0.0.0.0:8080 \
    GATEWAY_CONFIG=/etc/toolgate/tools.yaml \
    GATEWAY_DRAIN_TIMEOUT=7s
EXPOSE 8080
USER nonroot:nonroot
# No shell or curl in the image: the binary asks its own /healthz.
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s CMD ["/usr/local/bin/gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["serve"]
