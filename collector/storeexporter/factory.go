// Package storeexporter is an OpenTelemetry Collector exporter that writes the spans it gets
// straight into an otel-llm store as sealed Parquet segments: the same schema, names, sealing
// and crash safety as otel-llm's own writer, readable by `otel-llm query`, DuckDB and Grafana
// as soon as a segment is sealed.
package storeexporter

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// TypeStr is the exporter's name in a Collector config.
const TypeStr = "otelllm_store"

var componentType = component.MustNewType(TypeStr)

// NewFactory makes the otelllm_store exporter's factory (traces only).
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		componentType,
		createDefaultConfig,
		exporter.WithTraces(createTraces, component.StabilityLevelAlpha),
	)
}

func createDefaultConfig() component.Config {
	return &Config{
		SealInterval: defaultSealInterval,
		SegmentSpans: defaultSegmentSpans,
		ResendWindow: defaultResendWindow,
		ResendSpans:  defaultResendSpans,
	}
}

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	e, err := newStoreExporter(cfg.(*Config), set.Logger)
	if err != nil {
		return nil, err
	}
	// No queue and no retries in the Collector: an export is acknowledged only once its spans
	// are in a sealed, published segment (push returns then); a failed one is the sender's to
	// retry. No timeout of its own either: the sender's deadline bounds the wait.
	return exporterhelper.NewTraces(ctx, set, cfg, e.push,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
	)
}
