# syntax=docker/dockerfile:1
#
# The engagement scheduler's image: the five binaries, static, on distroless
# (CA certificates, tzdata, /etc/passwd with nonroot, no shell), running as
# nonroot (65532). No entrypoint: the command names the binary.
#
#   make image                                  # engagement-scheduler:dev
#   docker run --rm engagement-scheduler:dev engagement-daily --help
#   docker run --rm -e DATABASE_URL engagement-scheduler:dev engagementctl migrate up
#   docker run --rm -e DATABASE_URL -e ENGAGEMENT_WEBHOOK_URL -e ENGAGEMENT_WEBHOOK_SECRET \
#     engagement-scheduler:dev queue-process --transport webhook \
#     --quiet-hours 21:00-09:00 --timezone America/Sao_Paulo \
#     --daily-limit 300 --daily-limit-ramp 50,1.5 --output json
#
# Quiet hours and the send budget are off in the binaries; every example
# and manifest we ship sets them (nothing is sent from 21:00 to 09:00 in
# the user's zone, São Paulo's when unknown; at most 300 people a day,
# warmed up from 50): see docs/deploy.md, "Waking hours", and
# docs/delivery.md, "The send budget".

# Keep in step with the go directive in go.mod (deploy's tests check it).
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
# What --version prints and the image's labels say (make image sets both
# from git).
ARG VERSION=dev
WORKDIR /src
# Dependencies first, so that editing code does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags="-s -w -X github.com/engagement-scheduler/engagement/internal/cli.Version=${VERSION}" -o /out/ \
      ./cmd/engagement-daily \
      ./cmd/engagement-weekly \
      ./cmd/queue-process \
      ./cmd/engagementctl \
      ./cmd/engagement-console

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=
LABEL org.opencontainers.image.title="engagement-scheduler" \
      org.opencontainers.image.description="Batch jobs that move a WhatsApp bot's users through an engagement state machine and deliver its messages exactly once" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://github.com/engagement-scheduler/engagement"
COPY --from=build /out/ /usr/local/bin/
# Your database provider's root CA, if it has its own (Supabase does): put
# its file in deploy/certs/ and name it with sslrootcert= in the URLs.
COPY deploy/certs/ /etc/engagement/certs/
USER 65532:65532
CMD ["engagementctl", "--help"]
