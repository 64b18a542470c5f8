package storeexporter

import (
	"errors"
	"time"
)

// Config of the otelllm_store exporter.
type Config struct {
	// Store is the otel-llm store directory the segments go into (made a store if it is not
	// one yet). collector/duckdb.yaml takes it from $OTEL_LLM_COLLECTOR_STORE.
	Store string `mapstructure:"store"`
	// SealInterval: spans wait at most this long in memory before their segment is sealed
	// (and their export acknowledged). At most a second, so spans are readable within 2 s.
	SealInterval time.Duration `mapstructure:"seal_interval"`
	// SegmentSpans: a segment is sealed at once when this many spans wait.
	SegmentSpans int `mapstructure:"segment_spans"`
	// ResendWindow: a span sent again is not written again while it waits for its segment,
	// nor for at least this long after the store got it (read at start from the newest
	// segments: the Collector before this one may have been killed between sealing and
	// answering). 0 turns it off.
	ResendWindow time.Duration `mapstructure:"resend_window"`
	// ResendSpans bounds the ids kept for that (at most half of it read at start).
	ResendSpans int `mapstructure:"resend_spans"`
}

const (
	defaultSealInterval = 250 * time.Millisecond
	maxSealInterval     = time.Second
	defaultSegmentSpans = 20_000
	defaultResendWindow = 30 * time.Second
	defaultResendSpans  = 1_000_000
	minResendWindow     = time.Second
)

// Validate checks the configuration when the Collector loads it.
func (c *Config) Validate() error {
	if c.Store == "" {
		return errors.New("store: the otel-llm store directory is required")
	}
	if c.SealInterval <= 0 || c.SealInterval > maxSealInterval {
		return errors.New("seal_interval: more than 0 and at most 1s (spans are readable within 2 s)")
	}
	if c.SegmentSpans <= 0 {
		return errors.New("segment_spans: at least 1")
	}
	if c.ResendWindow < 0 || c.ResendSpans < 0 {
		return errors.New("resend_window and resend_spans: 0 or more")
	}
	if c.ResendWindow > 0 && c.ResendWindow < minResendWindow {
		return errors.New("resend_window: 0 (off) or at least 1s (senders send again a second or more later)")
	}
	return nil
}
