# otel-llm's Collector (collector/manifest.yaml), built by collector/build.sh as `otel-llm
# collector` builds it, then copied into a small Debian image. Build context: the repository.
FROM golang:1.26-bookworm AS build
ENV XDG_CACHE_HOME=/cache
COPY collector /src/collector
RUN /src/collector/build.sh > /tmp/binary-path && cp "$(cat /tmp/binary-path)" /otelcol-llm

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /otelcol-llm /usr/local/bin/otelcol-llm
USER 10001
ENTRYPOINT ["/usr/local/bin/otelcol-llm"]
