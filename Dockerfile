# syntax=docker/dockerfile:1
# Build: docker build --build-arg VERSION=$(git describe --always --dirty) -t toolgate .
# Run:   docker run -p 8080:8080 toolgate
# Stop:  docker stop --time 30 ... (SIGTERM drains for up to 25 s: --drain-timeout)
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
ENV GATEWAY_LISTEN=0.0.0.0:8080 \
    GATEWAY_CONFIG=/etc/toolgate/tools.yaml
EXPOSE 8080
USER nonroot:nonroot
# No shell or curl in the image: the binary asks its own /healthz.
HEALTHCHECK --interval=30s --timeout=5s --start-period=5s CMD ["/usr/local/bin/gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["serve"]
