# syntax=docker/dockerfile:1
# Build: docker build -t toolgate .
# Run:   docker run -p 8080:8080 toolgate
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/gateway ./cmd/gateway

FROM gcr.io/distroless/static-debian12:nonroot
WORKDIR /etc/toolgate
COPY --from=build /out/gateway /usr/local/bin/gateway
COPY tools.yaml ./tools.yaml
COPY hints ./hints
ENV GATEWAY_LISTEN=0.0.0.0:8080 \
    GATEWAY_CONFIG=/etc/toolgate/tools.yaml
EXPOSE 8080
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/gateway"]
CMD ["serve"]
